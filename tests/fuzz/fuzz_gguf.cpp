// libFuzzer target: the GGUF parser (gguf::File::parse) and what reads its
// metadata (model config, tokenizer) on arbitrary bytes. Bad input must end
// in a vegas::Error; a file it accepts must describe tensors that lie inside
// the input, which the target proves by reading the first and last byte of
// each and dequantizing its first block.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/error.h"
#include "gguf/ggml_types.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_model.h"
#include "gguf/gguf_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // A copy of exactly `size` bytes, so a read past the end is an ASan error.
  const std::vector<uint8_t> bytes(data, data + size);
  try {
    const auto file = vegas::gguf::File::parse(bytes.data(), bytes.size(), "fuzz");
    volatile unsigned char sink = 0;
    for (const vegas::gguf::TensorInfo &t : file->tensors()) {
      if (t.nbytes > 0) sink = sink ^ t.data[0] ^ t.data[t.nbytes - 1];
      const vegas::gguf::GgmlTypeInfo *info = vegas::gguf::ggml_type_info(t.type);
      if (info == nullptr) std::abort();  // the parser let an unknown type through
      if (info->dequantizable && t.nbytes > 0) {
        std::vector<float> block(static_cast<size_t>(info->block_elems));
        vegas::gguf::dequantize(t.type, t.data, info->block_elems, block.data());
      }
    }
    try {
      (void)vegas::gguf::model_config_from_gguf(*file);
    } catch (const vegas::Error &) {
    }
    (void)vegas::gguf::tokenizer_from_gguf(*file);
  } catch (const vegas::Error &) {
  }
  return 0;
}
