#include "gguf/gguf_file.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/error.h"
#include "gguf/ggml_types.h"
#include "model/mapped_file.h"

namespace vegas::gguf {

namespace {

using json = nlohmann::json;

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr uint32_t kMaxRank = 4;         // GGML_MAX_DIMS
constexpr int64_t kMaxElements = int64_t{1} << 48;
constexpr int kMaxArrayDepth = 4;  // arrays of arrays are legal; deeper is hostile
constexpr uint64_t kDefaultAlignment = 32;

// The fewest bytes a value of `type` takes in the file (for bounding counts
// before anything is allocated).
uint64_t min_value_bytes(uint32_t type) {
  switch (type) {
    case kUint8:
    case kInt8:
    case kBool:
      return 1;
    case kUint16:
    case kInt16:
      return 2;
    case kUint32:
    case kInt32:
    case kFloat32:
      return 4;
    case kString:
    case kUint64:
    case kInt64:
    case kFloat64:
      return 8;
    case kArray:
      return 12;
    default:
      return 0;  // unknown: refused by the reader
  }
}

// A float32 value as the shortest decimal that rounds to it: the converter
// wrote 1e-06 from config.json as 9.99999997e-07, and reading it back as
// 1e-06 gives the model the epsilon (and rope bases, factors) it was trained
// with.
double shortest_decimal(float f) {
  if (!std::isfinite(f)) return f;
  char text[32];
  for (int digits = 1; digits <= 9; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, static_cast<double>(f));
    if (std::strtof(text, nullptr) == f) return std::strtod(text, nullptr);
  }
  return f;
}

// A cursor over the file's bytes; every read is bounds-checked and a short
// read is a FORMAT error saying what was being read.
class Reader {
 public:
  Reader(const uint8_t *data, size_t size, const std::string &source)
      : data_(data), size_(size), source_(source) {}

  size_t offset() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  [[noreturn]] void bad(const std::string &what) const {
    fail(VEGAS_ERR_FORMAT, source_ + ": " + what + " (at byte " + std::to_string(pos_) + ")");
  }

  template <typename T>
  T read(const char *what) {
    if (remaining() < sizeof(T)) bad(std::string("file ends inside ") + what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const char *what) {
    const uint64_t n = read<uint64_t>(what);
    if (n > remaining())
      bad(std::string(what) + " is " + std::to_string(n) + " bytes long, past the end of the file");
    std::string s(reinterpret_cast<const char *>(data_ + pos_), static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }

  json read_value(uint32_t type, const std::string &key, int depth) {
    switch (type) {
      case kUint8:
        return read<uint8_t>(key.c_str());
      case kInt8:
        return read<int8_t>(key.c_str());
      case kUint16:
        return read<uint16_t>(key.c_str());
      case kInt16:
        return read<int16_t>(key.c_str());
      case kUint32:
        return read<uint32_t>(key.c_str());
      case kInt32:
        return read<int32_t>(key.c_str());
      case kFloat32:
        return shortest_decimal(read<float>(key.c_str()));
      case kBool: {
        const uint8_t b = read<uint8_t>(key.c_str());
        if (b > 1) bad("metadata " + key + ": bool value " + std::to_string(b));
        return b == 1;
      }
      case kString:
        return read_string(key.c_str());
      case kUint64:
        return read<uint64_t>(key.c_str());
      case kInt64:
        return read<int64_t>(key.c_str());
      case kFloat64:
        return read<double>(key.c_str());
      case kArray:
        return read_array(key, depth);
      default:
        bad("metadata " + key + " has unknown value type " + std::to_string(type));
    }
  }

 private:
  json read_array(const std::string &key, int depth) {
    if (depth >= kMaxArrayDepth) bad("metadata " + key + ": arrays nested too deep");
    const uint32_t type = read<uint32_t>(key.c_str());
    const uint64_t count = read<uint64_t>(key.c_str());
    const uint64_t least = min_value_bytes(type);
    if (least == 0) bad("metadata " + key + " is an array of unknown type " + std::to_string(type));
    if (count > remaining() / least)
      bad("metadata " + key + " claims " + std::to_string(count) +
          " elements, more than the file holds");
    json a = json::array();
    a.get_ref<json::array_t &>().reserve(static_cast<size_t>(count));
    for (uint64_t i = 0; i < count; ++i) a.push_back(read_value(type, key, depth + 1));
    return a;
  }

  const uint8_t *data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string &source_;
};

// The tensor's byte count from its type's block geometry; FORMAT when its
// rows are not whole blocks or the shape is absurd.
uint64_t tensor_bytes(const TensorInfo &t, const GgmlTypeInfo &info, const Reader &r) {
  if (t.dims[0] % info.block_elems != 0)
    r.bad("tensor " + t.name + ": its rows of " + std::to_string(t.dims[0]) +
          " values are not whole " + info.name + " blocks of " + std::to_string(info.block_elems));
  return static_cast<uint64_t>(t.numel() / info.block_elems) *
         static_cast<uint64_t>(info.block_bytes);
}

// One directory entry; its data pointer is set once the data section is known.
TensorInfo read_tensor_info(Reader &r, uint64_t *offset) {
  TensorInfo t;
  t.name = r.read_string("a tensor name");
  const uint32_t rank = r.read<uint32_t>("a tensor's rank");
  if (rank == 0 || rank > kMaxRank)
    r.bad("tensor " + t.name + " has rank " + std::to_string(rank) + " (1 to 4)");
  int64_t numel = 1;
  for (uint32_t i = 0; i < rank; ++i) {
    const uint64_t d = r.read<uint64_t>("a tensor's dimensions");
    if (d == 0 || d > static_cast<uint64_t>(kMaxElements) ||
        numel > kMaxElements / static_cast<int64_t>(d))
      r.bad("tensor " + t.name + " has an absurd dimension " + std::to_string(d));
    numel *= static_cast<int64_t>(d);
    t.dims.push_back(static_cast<int64_t>(d));
  }
  t.type = r.read<uint32_t>("a tensor's type");
  const GgmlTypeInfo *info = ggml_type_info(t.type);
  if (info == nullptr) r.bad("tensor " + t.name + " has unknown type " + std::to_string(t.type));
  t.nbytes = tensor_bytes(t, *info, r);
  *offset = r.read<uint64_t>("a tensor's offset");
  return t;
}

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

File::~File() = default;

std::unique_ptr<File> File::open(const std::string &path) {
  std::unique_ptr<MappedFile> mapped = MappedFile::open(path);
  std::unique_ptr<File> file(new File());
  file->source_ = path;
  file->parse_all(mapped->data(), mapped->size());
  file->file_ = std::move(mapped);
  return file;
}

std::unique_ptr<File> File::parse(const uint8_t *data, size_t size, const std::string &source) {
  std::unique_ptr<File> file(new File());
  file->source_ = source;
  file->parse_all(data, size);
  return file;
}

void File::parse_all(const uint8_t *data, size_t size) {
  Reader r(data, size, source_);
  if (r.read<uint32_t>("the magic") != kMagic) r.bad("not a GGUF file (no GGUF magic)");
  version_ = r.read<uint32_t>("the version");
  if (version_ == 1 || version_ > 0xffff)
    fail(VEGAS_ERR_UNSUPPORTED, source_ + ": GGUF version " + std::to_string(version_) +
                                    " (big-endian or version 1) is not supported; 2 and 3 are");
  if (version_ != 2 && version_ != 3)
    r.bad("GGUF version " + std::to_string(version_) + " is not known (2 and 3 are)");
  const uint64_t n_tensors = r.read<uint64_t>("the tensor count");
  const uint64_t n_metadata = r.read<uint64_t>("the metadata count");
  // Each entry takes at least 12 (metadata) or 28 (tensor) bytes.
  if (n_metadata > r.remaining() / 12 || n_tensors > r.remaining() / 28)
    r.bad("the counts (" + std::to_string(n_metadata) + " metadata, " + std::to_string(n_tensors) +
          " tensors) exceed what the file can hold");
  for (uint64_t i = 0; i < n_metadata; ++i) {
    std::string key = r.read_string("a metadata key");
    if (metadata_.contains(key)) r.bad("metadata key " + key + " appears twice");
    const uint32_t type = r.read<uint32_t>(key.c_str());
    metadata_[key] = r.read_value(type, key, 0);
  }
  uint64_t alignment = kDefaultAlignment;
  if (has("general.alignment")) {
    const json &a = metadata_["general.alignment"];
    if (!a.is_number_unsigned() || a.get<uint64_t>() == 0 ||
        (a.get<uint64_t>() & (a.get<uint64_t>() - 1)) != 0 || a.get<uint64_t>() > (1u << 20))
      r.bad("general.alignment is not a power of two up to 1 MiB");
    alignment = a.get<uint64_t>();
  }
  tensors_.reserve(static_cast<size_t>(n_tensors));
  std::vector<uint64_t> offsets(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t = read_tensor_info(r, &offsets[static_cast<size_t>(i)]);
    if (index_.count(t.name) != 0) r.bad("tensor " + t.name + " appears twice");
    index_[t.name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }
  const uint64_t data_start = (r.offset() + alignment - 1) / alignment * alignment;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    TensorInfo &t = tensors_[i];
    const uint64_t offset = offsets[i];
    if (offset % alignment != 0)
      r.bad("tensor " + t.name + ": offset " + std::to_string(offset) + " is not aligned to " +
            std::to_string(alignment));
    if (data_start > size || offset > size - data_start || t.nbytes > size - data_start - offset)
      r.bad("tensor " + t.name + ": its " + std::to_string(t.nbytes) + " bytes at offset " +
            std::to_string(offset) + " lie past the end of the file");
    t.data = data + data_start + offset;
  }
}

const TensorInfo *File::find(const std::string &name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

[[noreturn]] void bad_key(const std::string &source, const std::string &key,
                          const std::string &what) {
  fail(VEGAS_ERR_FORMAT, source + ": metadata " + key + " " + what);
}

}  // namespace

std::string File::get_string(const std::string &key) const {
  const auto it = metadata_.find(key);
  if (it == metadata_.end()) bad_key(source_, key, "is missing");
  if (!it->is_string()) bad_key(source_, key, "is not a string");
  return it->get<std::string>();
}

int64_t File::get_int(const std::string &key) const {
  const auto it = metadata_.find(key);
  if (it == metadata_.end()) bad_key(source_, key, "is missing");
  if (it->is_number_unsigned()) {
    if (it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) bad_key(source_, key, "is too big");
    return static_cast<int64_t>(it->get<uint64_t>());
  }
  if (!it->is_number_integer()) bad_key(source_, key, "is not an integer");
  return it->get<int64_t>();
}

double File::get_float(const std::string &key) const {
  const auto it = metadata_.find(key);
  if (it == metadata_.end()) bad_key(source_, key, "is missing");
  if (!it->is_number()) bad_key(source_, key, "is not a number");
  return it->get<double>();
}

bool File::get_bool(const std::string &key) const {
  const auto it = metadata_.find(key);
  if (it == metadata_.end()) bad_key(source_, key, "is missing");
  if (!it->is_boolean()) bad_key(source_, key, "is not a bool");
  return it->get<bool>();
}

const nlohmann::json &File::get_array(const std::string &key) const {
  const auto it = metadata_.find(key);
  if (it == metadata_.end()) bad_key(source_, key, "is missing");
  if (!it->is_array()) bad_key(source_, key, "is not an array");
  return *it;
}

}  // namespace vegas::gguf
