#include "common/tensor_write.h"

#include "common/error.h"

namespace vegas {

void write_tensor_bytes(std::ofstream &out, const std::string &path, const std::string &tensor,
                        const std::vector<uint8_t> &data, uint64_t expected) {
  if (data.size() != expected)
    fail(VEGAS_ERR_INTERNAL, path + ": tensor " + tensor + " came out as " +
                                 std::to_string(data.size()) + " bytes, not " +
                                 std::to_string(expected));
  out.write(reinterpret_cast<const char *>(data.data()), static_cast<std::streamsize>(data.size()));
  if (!out) fail(VEGAS_ERR_IO, path + ": could not be written (disk full?)");
}

}  // namespace vegas
