// The tensors of a checkpoint: one or more memory-mapped safetensors files.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/tensor.h"

namespace vegas {

class MappedFile;

class WeightStore {
 public:
  // Opens `dir`/model.safetensors.index.json (shards) or `dir`/model.safetensors
  // or, failing both, the single *.safetensors in `dir`. Throws vegas::Error
  // (IO, FORMAT with the file and the fault: header length past the end,
  // offsets out of the file or overlapping, dtype size not matching the shape).
  static std::unique_ptr<WeightStore> open(const std::string &dir);
  // Parses one safetensors file (also used by tests and fuzzers).
  static std::unique_ptr<WeightStore> open_file(const std::string &path);
  ~WeightStore();

  // nullptr if absent.
  const TensorView *find(const std::string &name) const;
  // Throws FORMAT "missing tensor NAME" / "tensor NAME has shape [..], expected [..]".
  const TensorView &require(const std::string &name, const std::vector<int64_t> &shape) const;
  const std::map<std::string, TensorView> &tensors() const { return tensors_; }

 private:
  WeightStore() = default;
  void add_file(const std::string &path);
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::map<std::string, TensorView> tensors_;
};

}  // namespace vegas
