// A model from a GGUF file: its config from the metadata, its tensors under
// the Hugging Face names the rest of the runtime binds (model_weights.h).
//
// Architectures: qwen3, qwen2, llama (Llama, and Mistral as llama.cpp's
// converter writes it). Quantized tensors are dequantized to bf16 at load
// (ggml_types.h lists the types read), Q8_0, Q4_0, Q4_K, Q5_K and Q6_K rows also kept as they
// are (TensorView::ggml_blocks, for the CUDA backend's quantized GEMV); F32,
// F16 and BF16 tensors stay views
// of the mapped file unless they must be reordered. llama.cpp's converter
// interleaves each Llama head's rows of q and k for its rotary layout; the
// loader puts them back in Hugging Face's half-split order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "model/weight_store.h"

namespace vegas::gguf {

// FORMAT for missing or absurd metadata (naming the key), UNSUPPORTED for an
// architecture or rope scaling this runtime does not run.
ModelConfig model_config_from_gguf(const File &file);

// Every tensor the config binds, renamed to the Hugging Face names. The store
// keeps `file` alive. FORMAT when a tensor's shape disagrees with the config,
// UNSUPPORTED for a tensor type that cannot be dequantized (naming both).
std::unique_ptr<WeightStore> weights_from_gguf(std::shared_ptr<const File> file,
                                               const ModelConfig &config);

// Where Hugging Face row r of a q or k projection lies in llama.cpp's Llama
// layout, which interleaves each head's two rotary halves (row i of the
// first half at 2i, of the second at 2i + 1); head_rows = head_dim.
int64_t llama_rope_row(int64_t r, int64_t head_rows);

// llama.cpp's name of a Hugging Face tensor the runtime binds, empty for others.
std::string gguf_tensor_name(const std::string &hf_name);

}  // namespace vegas::gguf
