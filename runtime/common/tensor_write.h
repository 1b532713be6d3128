// Writing a tensor's bytes, made as the file is written (GGUF and safetensors
// writers), with the checks both need.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace vegas {

// Writes `data`, tensor `tensor` of the file `path`, to `out`. INTERNAL when
// it is not `expected` bytes long; IO when the stream failed (a full disk:
// the caller stops before encoding the tensors that follow).
void write_tensor_bytes(std::ofstream &out, const std::string &path, const std::string &tensor,
                        const std::vector<uint8_t> &data, uint64_t expected);

}  // namespace vegas
