// A Hugging Face model directory (config.json, safetensors, tokenizer.json and
// tokenizer_config.json when present) written as one GGUF file, the format
// llama.cpp and libvegas both load (`vegas quantize`, vegas_model_quantize).
//
// Metadata and tensor names are llama.cpp's converter's (qwen3, qwen2, llama;
// Llama's q/k rows in its rotary order; Llama 3 rope scaling as the
// rope_freqs tensor). Vectors (norms, biases) are written as F32, matrices
// as the ExportType says (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K, or
// llama.cpp's Q4_K_M mix; a matrix whose rows are not whole blocks of its
// type keeps F16). The tokenizer metadata
// is what tokenizer_from_gguf reads back into the same tokenizer: byte-level
// BPE whose pre-tokenizer is one of gguf_pre_type's.
#pragma once

#include <cstdint>
#include <string>

namespace vegas::gguf {

// What the matrices become: one GGML type for all, or llama.cpp's Q4_K_M or
// Q5_K_M mix (`matrix`, Q4_K or Q5_K; Q6_K for the head, and for v and down in
// its "more bits" layers: the first and last eighth and every third between).
struct ExportType {
  ExportType(uint32_t matrix_type) : matrix(matrix_type) {}  // NOLINT: one type for every matrix
  static ExportType q4_k_m();
  static ExportType q5_k_m();
  uint32_t matrix;
  bool k_m_mix = false;
};

// The type a `vegas quantize --type` name stands for: f32, f16, bf16, q8_0,
// q4_0, q4_k, q5_k, q6_k, q4_k_m, q5_k_m (any case); INVALID_ARGUMENT for another.
ExportType export_type(const std::string &name);

// llama.cpp's use_more_bits: whether layer i of n takes Q6_K for v and down in
// the K_M mixes (the first and last eighth, every third between).
bool use_more_bits(int32_t i, int32_t n);

// The GGML type of one tensor of the file: `gguf_name` as the file names it,
// `layers` the model's.
uint32_t export_tensor_type(const ExportType &type, const std::string &gguf_name, int32_t layers);

// Writes `out_path`. IO for an unreadable model or an unwritable output,
// FORMAT for a bad checkpoint, UNSUPPORTED for what GGUF (or this writer)
// cannot carry: sliding-window attention, YaRN's mscale, a tokenizer other
// than byte-level BPE.
void export_gguf(const std::string &model_dir, const std::string &out_path, const ExportType &type);

}  // namespace vegas::gguf
