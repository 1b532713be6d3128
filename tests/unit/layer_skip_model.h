// Test helper: a layer-skip draft of the embedded model (its first n decoder
// layers, embedding, final norm and head, the same tokenizer), written once
// per process under GoogleTest's temporary directory. The model that
// tools/layer_skip_draft.py writes, for the draft-model tests.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/weight_store.h"
#include "safetensors_writer.h"
#include "support/model_dir.h"
#include "tiny_checkpoint.h"

namespace vegas::test {

inline std::string layer_skip_dir(int n) {
  const std::string dir = ::testing::TempDir() + "vegas-layer-skip-" + std::to_string(n);
  if (std::filesystem::exists(dir + "/model.safetensors")) return dir;
  std::filesystem::create_directories(dir);
  const std::string src = embedded_model_dir();
  const std::unique_ptr<WeightStore> store = WeightStore::open(src);
  std::vector<FakeTensor> kept;
  for (const auto &[name, view] : store->tensors()) {
    const std::string prefix = "model.layers.";
    if (name.rfind(prefix, 0) == 0 && std::stoi(name.substr(prefix.size())) >= n) continue;
    kept.push_back({name, dtype_name(view.dtype), view.shape,
                    std::string(static_cast<const char *>(view.data), view.nbytes)});
  }
  write_safetensors(dir + "/model.safetensors", kept);
  nlohmann::json config = nlohmann::json::parse(read_bytes(src + "/config.json"));
  config["num_hidden_layers"] = n;
  if (config.contains("layer_types")) {
    nlohmann::json types = nlohmann::json::array();
    for (int i = 0; i < n; ++i) types.push_back(config["layer_types"][i]);
    config["layer_types"] = types;
  }
  write_bytes(dir + "/config.json", config.dump());
  for (const char *f : {"tokenizer.json", "tokenizer_config.json"})
    std::filesystem::copy_file(src + "/" + f, dir + "/" + f,
                               std::filesystem::copy_options::overwrite_existing);
  return dir;
}

}  // namespace vegas::test
