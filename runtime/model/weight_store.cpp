// safetensors: an 8-byte little-endian header length N, N bytes of JSON
// ({name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}),
// then the data; offsets are relative to the first byte after the header.
// Every number in the header is checked before it is used to address memory.
#include "model/weight_store.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "common/ends_with.h"
#include "common/error.h"
#include "common/json_depth.h"
#include "common/small_file.h"
#include "model/fp8_weights.h"
#include "model/mapped_file.h"

namespace vegas {

namespace {

using json = nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the safetensors reference limit
constexpr size_t kMaxRank = 8;
constexpr int64_t kMaxDim = int64_t{1} << 40;
constexpr int64_t kMaxElements = int64_t{1} << 48;

bool file_exists(const std::string &path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool dir_exists(const std::string &path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

uint64_t read_le64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Parses one header entry into `t` (without data); errors name file and tensor.
struct Entry {
  TensorView view;
  uint64_t begin = 0;
  uint64_t end = 0;
};

Entry parse_entry(const std::string &path, const std::string &name, const json &v) {
  const std::string where = path + ": tensor " + name;
  auto bad = [&](const std::string &what) { fail(VEGAS_ERR_FORMAT, where + ": " + what); };
  if (!v.is_object()) bad("header entry is not an object");

  auto dt = v.find("dtype");
  if (dt == v.end() || !dt->is_string()) bad("missing or non-string dtype");
  Entry e;
  e.view.name = name;
  const std::string dtype = dt->get<std::string>();
  if (dtype == "F32") {
    e.view.dtype = DType::kF32;
  } else if (dtype == "F16") {
    e.view.dtype = DType::kF16;
  } else if (dtype == "BF16") {
    e.view.dtype = DType::kBF16;
  } else if (dtype == "F8_E4M3") {
    e.view.dtype = DType::kF8E4M3;  // dequantized once every file is read (fp8_weights.h)
  } else {
    fail(VEGAS_ERR_UNSUPPORTED,
         where + ": dtype " + dtype + " is not supported (supported: F32, F16, BF16, F8_E4M3)");
  }

  auto sh = v.find("shape");
  if (sh == v.end() || !sh->is_array()) bad("missing or non-list shape");
  if (sh->size() > kMaxRank) bad("rank " + std::to_string(sh->size()) + " is absurd");
  int64_t numel = 1;
  for (const json &d : *sh) {
    if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<int64_t>() >= 0))
      bad("shape " + sh->dump() + " has a non-integer or negative dimension");
    if (d.is_number_unsigned() && d.get<uint64_t>() > static_cast<uint64_t>(kMaxDim))
      bad("shape " + sh->dump() + " has an absurd dimension");
    const int64_t n = d.get<int64_t>();
    if (n > kMaxDim) bad("shape " + sh->dump() + " has an absurd dimension");
    e.view.shape.push_back(n);
    if (n != 0 && numel > kMaxElements / n)
      bad("shape " + sh->dump() + " has absurdly many elements");
    numel *= n;
  }

  auto off = v.find("data_offsets");
  if (off == v.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned())
    bad("data_offsets must be two non-negative integers");
  e.begin = (*off)[0].get<uint64_t>();
  e.end = (*off)[1].get<uint64_t>();
  if (e.end < e.begin) bad("data_offsets " + off->dump() + " end before they begin");
  const uint64_t expected = static_cast<uint64_t>(numel) * dtype_size(e.view.dtype);
  if (e.end - e.begin != expected)
    bad("data_offsets " + off->dump() + " span " + std::to_string(e.end - e.begin) +
        " bytes but shape " + shape_string(e.view.shape) + " of " + dtype + " needs " +
        std::to_string(expected));
  e.view.nbytes = static_cast<size_t>(expected);
  return e;
}

// A safetensors index lists one line per tensor: tens of KB for real checkpoints.
std::string read_text_file(const std::string &path) {
  return read_small_file(path, size_t{64} << 20, "checkpoint index");
}

// Shard names come from a file: keep them inside the checkpoint directory.
bool is_safe_relative_path(const std::string &p) {
  if (p.empty() || p[0] == '/') return false;
  std::istringstream parts(p);
  std::string part;
  while (std::getline(parts, part, '/'))
    if (part.empty() || part == "..") return false;
  return true;
}

// The safetensors header of `file` (an 8-byte little-endian length, then
// that many bytes of JSON), checked to lie inside the file, to be a JSON
// object and to nest within bounds; *header_len receives its length.
json read_header(const MappedFile &file, const std::string &path, uint64_t *header_len) {
  const uint64_t size = file.size();
  if (size < 8)
    fail(VEGAS_ERR_FORMAT, path + ": " + std::to_string(size) +
                               " bytes is too short for a safetensors header (truncated file?)");
  const uint64_t len = read_le64(file.data());
  if (len > size - 8)
    fail(VEGAS_ERR_FORMAT, path + ": header length " + std::to_string(len) +
                               " runs past the end of the file (" + std::to_string(size) +
                               " bytes; truncated?)");
  if (len > kMaxHeaderBytes)
    fail(VEGAS_ERR_FORMAT, path + ": header length " + std::to_string(len) + " is absurd");
  const auto *header = reinterpret_cast<const char *>(file.data() + 8);
  check_json_depth(header, header + len, path + ": header");
  json j;
  try {
    j = json::parse(header, header + len);
  } catch (const json::exception &e) {
    fail(VEGAS_ERR_FORMAT, path + ": header is not valid JSON: " + e.what());
  }
  if (!j.is_object()) fail(VEGAS_ERR_FORMAT, path + ": header is not a JSON object");
  *header_len = len;
  return j;
}

// The header's tensors (not __metadata__), each checked to lie in the
// data_size bytes of data that follow the header, pointing into them.
std::vector<Entry> tensor_entries(const json &header, const std::string &path, const uint8_t *data,
                                  uint64_t data_size) {
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    Entry e = parse_entry(path, it.key(), it.value());
    if (e.end > data_size)
      fail(VEGAS_ERR_FORMAT, path + ": tensor " + it.key() + ": data_offsets [" +
                                 std::to_string(e.begin) + ", " + std::to_string(e.end) +
                                 "] run past the end of the data (" + std::to_string(data_size) +
                                 " bytes; truncated file?)");
    e.view.data = data + e.begin;
    entries.push_back(std::move(e));
  }
  return entries;
}

// Two tensors must not share bytes (holes between them are tolerated).
void check_no_overlap(const std::vector<Entry> &entries, const std::string &path) {
  std::vector<const Entry *> by_offset;
  for (const Entry &e : entries)
    if (e.end > e.begin) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const Entry *a, const Entry *b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i]->begin < by_offset[i - 1]->end)
      fail(VEGAS_ERR_FORMAT, path + ": tensors " + by_offset[i - 1]->view.name + " and " +
                                 by_offset[i]->view.name + " overlap");
  }
}

}  // namespace

WeightStore::~WeightStore() = default;

std::unique_ptr<WeightStore> WeightStore::adopt(std::map<std::string, TensorView> tensors,
                                                std::vector<std::shared_ptr<const void>> owners,
                                                const std::string &source) {
  std::unique_ptr<WeightStore> store(new WeightStore());
  store->tensors_ = std::move(tensors);
  store->owners_ = std::move(owners);
  store->source_ = source;
  return store;
}

std::unique_ptr<WeightStore> WeightStore::open_file(const std::string &path) {
  std::unique_ptr<WeightStore> store(new WeightStore());
  store->source_ = path;
  store->add_file(path);
  dequantize_fp8_weights(store->tensors_, store->owners_, path);
  return store;
}

std::unique_ptr<WeightStore> WeightStore::open(const std::string &dir) {
  if (!dir_exists(dir)) fail(VEGAS_ERR_IO, "checkpoint directory '" + dir + "' does not exist");
  std::unique_ptr<WeightStore> store(new WeightStore());
  store->source_ = dir;
  const std::string index = dir + "/model.safetensors.index.json";
  const std::string single = dir + "/model.safetensors";
  if (file_exists(index)) {
    store->add_index(dir, index);
  } else if (file_exists(single)) {
    store->add_file(single);
  } else {
    std::vector<std::string> found;
    if (DIR *d = ::opendir(dir.c_str())) {
      while (const dirent *ent = ::readdir(d))
        if (ends_with(ent->d_name, ".safetensors")) found.emplace_back(ent->d_name);
      ::closedir(d);
    }
    if (found.empty())
      fail(VEGAS_ERR_IO,
           "no model.safetensors, model.safetensors.index.json or *.safetensors in '" + dir + "'");
    if (found.size() > 1)
      fail(VEGAS_ERR_FORMAT, "several *.safetensors files in '" + dir +
                                 "' and no model.safetensors.index.json to say which to use");
    store->add_file(dir + "/" + found[0]);
  }
  dequantize_fp8_weights(store->tensors_, store->owners_, dir);
  return store;
}

void WeightStore::add_index(const std::string &dir, const std::string &index_path) {
  json index;
  const std::string index_text = read_text_file(index_path);
  check_json_depth(index_text, index_path);
  try {
    index = json::parse(index_text);
  } catch (const json::exception &e) {
    fail(VEGAS_ERR_FORMAT, index_path + ": not valid JSON: " + e.what());
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    fail(VEGAS_ERR_FORMAT, index_path + ": no 'weight_map' object");
  const json &map = index["weight_map"];
  std::set<std::string> shards;
  for (auto it = map.begin(); it != map.end(); ++it) {
    if (!it.value().is_string() || !is_safe_relative_path(it.value().get<std::string>()))
      fail(VEGAS_ERR_FORMAT, index_path + ": weight_map entry for " + it.key() +
                                 " is not a file name inside the directory: " + it.value().dump());
    shards.insert(it.value().get<std::string>());
  }
  if (shards.empty()) fail(VEGAS_ERR_FORMAT, index_path + ": weight_map is empty");
  for (const std::string &shard : shards) {
    const std::string path = dir + "/" + shard;
    if (!file_exists(path))
      fail(VEGAS_ERR_IO, "shard '" + path + "' named by " + index_path + " is missing");
  }
  for (const std::string &shard : shards) add_file(dir + "/" + shard);
  for (auto it = map.begin(); it != map.end(); ++it) {
    const std::string path = dir + "/" + it.value().get<std::string>();
    auto where = file_of_.find(it.key());
    if (where == file_of_.end())
      fail(VEGAS_ERR_FORMAT,
           index_path + ": tensor " + it.key() + " is mapped to '" + path + "' which lacks it");
    if (where->second != path)
      fail(VEGAS_ERR_FORMAT, index_path + ": tensor " + it.key() + " is mapped to '" + path +
                                 "' but lives in '" + where->second + "'");
  }
}

void WeightStore::add_file(const std::string &path) {
  std::unique_ptr<MappedFile> file = MappedFile::open(path);
  uint64_t header_len = 0;
  const json header = read_header(*file, path, &header_len);
  std::vector<Entry> entries =
      tensor_entries(header, path, file->data() + 8 + header_len, file->size() - 8 - header_len);
  check_no_overlap(entries, path);
  for (Entry &e : entries) {
    auto prev = file_of_.find(e.view.name);
    if (prev != file_of_.end())
      fail(VEGAS_ERR_FORMAT,
           "tensor " + e.view.name + " appears in both '" + prev->second + "' and '" + path + "'");
    file_of_[e.view.name] = path;
    std::string name = e.view.name;
    tensors_.emplace(std::move(name), std::move(e.view));
  }
  files_.push_back(std::move(file));
}

const TensorView *WeightStore::find(const std::string &name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const TensorView &WeightStore::require(const std::string &name,
                                       const std::vector<int64_t> &shape) const {
  const TensorView *t = find(name);
  if (t == nullptr) fail(VEGAS_ERR_FORMAT, source_ + ": missing tensor " + name);
  if (t->shape != shape)
    fail(VEGAS_ERR_FORMAT, source_ + ": tensor " + name + " has shape " + shape_string(t->shape) +
                               ", expected " + shape_string(shape));
  return *t;
}

uint64_t WeightStore::total_bytes() const {
  uint64_t n = 0;
  for (const auto &kv : tensors_) n += kv.second.nbytes;
  return n;
}

}  // namespace vegas
