// The tokenizer of a GGUF file, from its tokenizer.* metadata as llama.cpp's
// converter (convert_hf_to_gguf.py) writes it.
//
// The metadata is turned back into the tokenizer.json and tokenizer_config.json
// the Hugging Face model had, and BpeTokenizer is built from those, so that a
// GGUF tokenizes exactly as the model it was converted from:
//   - tokenizer.ggml.model "gpt2" (byte-level BPE) only;
//   - tokenizer.ggml.pre names the pre-tokenizer (and, for qwen2, the NFC
//     normalizer of Qwen2's tokenizer.json, which llama.cpp itself skips):
//     qwen2, llama-bpe (also llama3, llama-v3), gpt-2, starcoder, smollm, and
//     default (llama.cpp's fallback split, also used when the key is absent);
//   - tokens of type CONTROL (and UNKNOWN) are special added tokens,
//     USER_DEFINED ones non-special added tokens, both matched on the raw text;
//     the "[PAD<id>]" UNUSED tokens the converter invents for ids the
//     vocabulary lacks are left out (they decode as nothing and never match);
//   - bos/eos/padding ids, add_bos_token/add_eos_token (default: llama.cpp's
//     for the pre type) and tokenizer.chat_template become the config's.
// What GGUF does not keep: added tokens' lstrip/rstrip/single_word flags (all
// off here) and which added tokens the vocabulary also listed.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace vegas::gguf {

// gguf.TokenType: tokenizer.ggml.token_type's values.
enum TokenType : int64_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// UNSUPPORTED for a tokenizer model or pre-tokenizer this runtime does not
// read, or no tokenizer at all (the model then loads without a tokenizer);
// FORMAT for bad metadata, naming the file and the key.
std::unique_ptr<Tokenizer> tokenizer_from_gguf(const File &file);

// The tokenizer.ggml.pre value whose pre-tokenizer (and normalizer) a Hugging
// Face tokenizer.json has, as tokenizer_from_gguf rebuilds them: qwen2,
// llama-bpe or gpt-2; empty when it is none of those.
std::string gguf_pre_type(const nlohmann::json &tokenizer_json);

}  // namespace vegas::gguf
