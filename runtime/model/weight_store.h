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
  // (IO for a missing directory or shard, FORMAT with the file, the tensor and
  // the fault: header length past the end, offsets out of the file or
  // overlapping, byte count not matching dtype and shape; UNSUPPORTED for a
  // dtype other than F32/F16/BF16/F8_E4M3). F8_E4M3 weights come out as bf16,
  // their scales applied (model/fp8_weights.h).
  static std::unique_ptr<WeightStore> open(const std::string &dir);
  // Parses one safetensors file (also used by tests and fuzzers).
  static std::unique_ptr<WeightStore> open_file(const std::string &path);
  // Tensors whose bytes live in `owners` (another format's loader: a mapped
  // file, buffers it converted), kept alive as long as the store.
  static std::unique_ptr<WeightStore> adopt(std::map<std::string, TensorView> tensors,
                                            std::vector<std::shared_ptr<const void>> owners,
                                            const std::string &source);
  ~WeightStore();

  // nullptr if absent.
  const TensorView *find(const std::string &name) const;
  // Throws FORMAT "missing tensor NAME" / "tensor NAME has shape [..], expected [..]".
  const TensorView &require(const std::string &name, const std::vector<int64_t> &shape) const;
  const std::map<std::string, TensorView> &tensors() const { return tensors_; }
  // The directory or file this store was opened from (for messages).
  const std::string &source() const { return source_; }
  // Sum of the tensors' bytes.
  uint64_t total_bytes() const;

 private:
  WeightStore() = default;
  void add_file(const std::string &path);
  void add_index(const std::string &dir, const std::string &index_path);
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> file_of_;  // tensor name -> file path
  std::vector<std::shared_ptr<const void>> owners_;
  std::string source_;
};

}  // namespace vegas
