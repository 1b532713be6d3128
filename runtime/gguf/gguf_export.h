// A Hugging Face model directory (config.json, safetensors, tokenizer.json and
// tokenizer_config.json when present) written as one GGUF file, the format
// llama.cpp and libvegas both load (`vegas quantize`, vegas_model_quantize).
//
// Metadata and tensor names are llama.cpp's converter's (qwen3, qwen2, llama;
// Llama's q/k rows in its rotary order; Llama 3 rope scaling as the
// rope_freqs tensor). Vectors (norms, biases) are written as F32, matrices
// as `matrix_type` (F32, F16, BF16, Q8_0, Q4_0, Q4_K; a matrix whose rows are
// not whole blocks of the type keeps F16). The tokenizer metadata
// is what tokenizer_from_gguf reads back into the same tokenizer: byte-level
// BPE whose pre-tokenizer is one of gguf_pre_type's.
#pragma once

#include <cstdint>
#include <string>

namespace vegas::gguf {

// The GGML type a `vegas quantize --type` name stands for: f32, f16, bf16,
// q8_0, q4_0, q4_k (any case); INVALID_ARGUMENT for another.
uint32_t export_type(const std::string &name);

// Writes `out_path`. IO for an unreadable model or an unwritable output,
// FORMAT for a bad checkpoint, UNSUPPORTED for what GGUF (or this writer)
// cannot carry: sliding-window attention, YaRN's mscale, a tokenizer other
// than byte-level BPE.
void export_gguf(const std::string &model_dir, const std::string &out_path, uint32_t matrix_type);

}  // namespace vegas::gguf
