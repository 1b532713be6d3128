// libFuzzer target: the safetensors header parser (WeightStore::open_file) on
// arbitrary file contents. Bad input must end in a vegas::Error; a file it
// accepts must describe tensors that lie inside the mapped file, which the
// target proves by reading the first and last byte of each one, and whose byte
// count is exactly shape x dtype size.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/error.h"
#include "model/tensor.h"
#include "model/weight_store.h"

namespace {

// One scratch file per fuzzing process, rewritten for every input.
const std::string &scratch_path() {
  static const std::string path = [] {
    char tmpl[] = "/tmp/vegas-fuzz-safetensors-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    if (fd < 0) std::abort();
    ::close(fd);
    return std::string(tmpl);
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &path = scratch_path();
  FILE *f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  try {
    auto store = vegas::WeightStore::open_file(path);
    volatile unsigned char sink = 0;
    for (const auto &[name, view] : store->tensors()) {
      const auto *bytes = static_cast<const unsigned char *>(view.data);
      if (static_cast<uint64_t>(view.numel()) * vegas::dtype_size(view.dtype) != view.nbytes)
        std::abort();  // accepted a tensor whose bytes do not match its shape
      if (view.nbytes > 0) sink = sink ^ bytes[0] ^ bytes[view.nbytes - 1];
    }
    (void)store->total_bytes();
  } catch (const vegas::Error &) {
  }
  return 0;
}
