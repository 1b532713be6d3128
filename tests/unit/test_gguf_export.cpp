// `vegas quantize` (runtime/gguf/gguf_export.h): a Hugging Face directory
// written as a GGUF file. What it proves:
//   - the encoders: f16 rounds to nearest even, Q8_0, Q4_0, Q4_K, Q5_K and Q6_K
//     blocks decode (ggml_types.h) within their step;
//   - bf16 files of the tiny golden models hold, tensor for tensor, what
//     llama.cpp's own converter wrote for the same checkpoints (names, dims,
//     bytes; Llama's rotary row order, its rope_freqs) and give its config;
//   - the embedded model's tokenizer metadata is llama.cpp's for the same
//     tokenizer, and the file tokenizes as the model's tokenizer.json;
//   - Q8_0, Q4_K, Q5_K, Q6_K, Q4_K_M and Q5_K_M files load with every tensor
//     within its type's error of the checkpoint, and a bf16 one exactly; the
//     K_M mixes put Q6_K where llama.cpp's recipe does;
//   - bad arguments, a missing model and an unwritable output are errors, and
//     a write that fails half-way leaves no file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/bf16.h"
#include "common/error.h"
#include "gguf/ggml_quantize.h"
#include "gguf/ggml_types.h"
#include "gguf/gguf_export.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_model.h"
#include "gguf/gguf_tokenizer.h"
#include "gguf/gguf_writer.h"
#include "model/model_config.h"
#include "model/model_weights.h"
#include "support/model_dir.h"
#include "tokenizer/tokenizer.h"
#include "vegas.h"

namespace vegas::gguf {
namespace {

namespace fs = std::filesystem;

std::string temp_path(const std::string &name) {
  return (fs::temp_directory_path() / ("vegas-export-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

std::string fixtures_dir() {
  return std::string(VEGAS_SOURCE_DIR) + "/tests/fixtures";
}

TEST(GgufExport, F16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(-2.5f), 0xc100);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);            // past the largest half: infinity
  EXPECT_EQ(f32_to_f16(1.0f + 1.0f / 2048), 0x3c00);  // a tie: to the even mantissa
  EXPECT_EQ(f32_to_f16(1.0f + 3.0f / 2048), 0x3c02);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);  // the smallest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -26)), 0x0001);  // 0.75 of it rounds up
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> bits(0, 0xffff);
  for (int i = 0; i < 20000; ++i) {  // every finite half converts back to itself
    const uint16_t h = static_cast<uint16_t>(bits(rng));
    if (((h >> 10) & 0x1f) == 0x1f) continue;
    ASSERT_EQ(f32_to_f16(f16_to_f32(h)), h) << std::hex << h;
  }
}

TEST(GgufExport, QuantizedBlocksDecodeWithinTheirStep) {
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(32 * 64), y(x.size());
  for (float &v : x) v = g(rng) * (1.0f + 10.0f * (&v - x.data()) / 2048.0f);
  std::fill(x.begin() + 64, x.begin() + 96, 0.0f);  // an all-zero block
  for (uint32_t type : {kGgmlQ8_0, kGgmlQ4_0}) {
    const std::vector<uint8_t> q = quantize(type, x.data(), static_cast<int64_t>(x.size()));
    ASSERT_EQ(q.size(), x.size() / 32 * (type == kGgmlQ8_0 ? 34 : 18));
    dequantize(type, q.data(), static_cast<int64_t>(x.size()), y.data());
    for (size_t b = 0; b < x.size() / 32; ++b) {
      float amax = 0.0f;
      for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
      // Q8_0 rounds to a step d = amax / 127 (half a step off at most); Q4_0
      // steps by d = amax / 8 and clamps the far end of the range by up to one
      // step. The scale is stored as fp16 (2^-11 relative), which moves the
      // largest level (127 or 8 steps) by that much more.
      const float d = type == kGgmlQ8_0 ? amax / 127 : amax / 8;
      const float step = type == kGgmlQ8_0 ? d * (0.5f + 127.0f / 2048) : d * (1.0f + 8.0f / 2048);
      for (size_t j = 0; j < 32; ++j)
        ASSERT_LE(std::fabs(y[b * 32 + j] - x[b * 32 + j]), step + 1e-7f)
            << "type " << type << " block " << b;
    }
  }
  // Q4_K (Q5_K): per sub-block of 32 a step of its range / 15 (31) from its
  // minimum (0 when all are positive), as 6-bit multiples of the
  // super-block's fp16 d and dmin. A value is off by half a step (the step
  // itself rounded by d / 2), the range's far end by the step's rounding
  // times the steps (7.5 d, 15.5 d) and the offset's rounding (dmin / 2).
  // Q5_K keeps the fifth bits in qh (bytes 16..47 of its 176).
  for (const auto &[type, steps, block_bytes] :
       {std::tuple{kGgmlQ4_K, 15, 144}, std::tuple{kGgmlQ5_K, 31, 176}}) {
    const std::vector<uint8_t> k = quantize(type, x.data(), static_cast<int64_t>(x.size()));
    ASSERT_EQ(k.size(), x.size() / 256 * static_cast<size_t>(block_bytes));
    dequantize(type, k.data(), static_cast<int64_t>(x.size()), y.data());
    int64_t high_bits = 0;
    for (size_t b = 0; b < x.size() / 256; ++b) {
      const uint8_t *block = k.data() + b * static_cast<size_t>(block_bytes);
      uint16_t dh, mh;
      std::memcpy(&dh, block, 2);
      std::memcpy(&mh, block + 2, 2);
      const float d = f16_to_f32(dh), dmin = f16_to_f32(mh);
      if (type == kGgmlQ5_K)
        for (size_t l = 0; l < 32; ++l) high_bits += __builtin_popcount(block[16 + l]);
      for (size_t j = 0; j < 8; ++j) {
        const float *v = x.data() + b * 256 + j * 32;
        const float lo = std::min(0.0f, *std::min_element(v, v + 32)),
                    hi = *std::max_element(v, v + 32);
        const float bound = 0.5f * (hi - lo) / static_cast<float>(steps) +
                            (0.5f * static_cast<float>(steps) + 0.5f) * d + dmin + 1e-6f;
        for (size_t l = 0; l < 32; ++l)
          ASSERT_LE(std::fabs(y[b * 256 + j * 32 + l] - v[l]), bound)
              << "type " << type << " block " << b;
      }
    }
    if (type == kGgmlQ5_K) {
      EXPECT_GT(high_bits, static_cast<int64_t>(x.size()) / 8);  // the fifth bit is used
    }
  }
  // Q6_K: per sub-block of 16 a step of its largest magnitude / 31, as an
  // int8 multiple of the super-block's fp16 d. A value is off by half its
  // step, and by up to 15.5 d where the stored step falls short of the
  // magnitude (31 steps rounded down by d / 2 each) or rounds to zero.
  const std::vector<uint8_t> six = quantize(kGgmlQ6_K, x.data(), static_cast<int64_t>(x.size()));
  ASSERT_EQ(six.size(), x.size() / 256 * 210);
  dequantize(kGgmlQ6_K, six.data(), static_cast<int64_t>(x.size()), y.data());
  for (size_t b = 0; b < x.size() / 256; ++b) {
    uint16_t dh;
    std::memcpy(&dh, &six[b * 210 + 208], 2);
    const float d = f16_to_f32(dh);
    for (size_t j = 0; j < 16; ++j) {
      const float ds = d * static_cast<float>(static_cast<int8_t>(six[b * 210 + 192 + j]));
      const float bound = 0.5f * ds + 15.5f * d + 1e-6f;
      for (size_t l = 0; l < 16; ++l) {
        const size_t i = b * 256 + j * 16 + l;
        ASSERT_LE(std::fabs(y[i] - x[i]), bound) << "Q6_K block " << b << " sub-block " << j;
      }
    }
  }
  EXPECT_THROW(quantize(kGgmlQ8_0, x.data(), 31), Error);
  EXPECT_THROW(quantize(kGgmlQ4_K, x.data(), 255), Error);
  EXPECT_THROW(quantize(kGgmlQ6_K, x.data(), 128), Error);
  EXPECT_THROW(quantize(kGgmlQ5_K, x.data(), 255), Error);
  EXPECT_THROW(quantize(kGgmlQ4_1, x.data(), 256), Error);  // no encoder
}

// The tiny golden models as bf16: llama.cpp's file, tensor for tensor.
TEST(GgufExport, TinyModelsMatchLlamaCppsConverter) {
  for (const std::string &name : {std::string("qwen3"), std::string("llama3")}) {
    const std::string out = temp_path(name + ".gguf");
    export_gguf(fixtures_dir() + "/" + name, out, kGgmlBF16);
    const auto ours = File::open(out);
    const auto theirs = File::open(test::gguf_tiny_file(name + "-bf16"));
    for (const TensorInfo &t : theirs->tensors()) {
      const TensorInfo *o = ours->find(t.name);
      ASSERT_NE(o, nullptr) << name << ": " << t.name << " missing";
      ASSERT_EQ(o->dims, t.dims) << name << ": " << t.name;
      std::vector<float> a(static_cast<size_t>(t.numel())), b(a.size());
      dequantize(o->type, o->data, o->numel(), a.data());
      dequantize(t.type, t.data, t.numel(), b.data());
      if (o->type == t.type) {
        EXPECT_EQ(std::memcmp(o->data, t.data, t.nbytes), 0) << name << ": " << t.name;
        continue;
      }
      // rope_freqs: the same factors from the same formula, in float.
      for (size_t i = 0; i < a.size(); ++i)
        EXPECT_NEAR(a[i], b[i], 1e-6 * std::fabs(b[i])) << name << ": " << t.name << " " << i;
    }
    EXPECT_EQ(ours->tensors().size(), theirs->tensors().size()) << name;
    const ModelConfig co = model_config_from_gguf(*ours), ct = model_config_from_gguf(*theirs);
    EXPECT_EQ(co.arch, ct.arch);
    EXPECT_EQ(co.hidden_size, ct.hidden_size);
    EXPECT_EQ(co.n_layers, ct.n_layers);
    EXPECT_EQ(co.n_kv_heads, ct.n_kv_heads);
    EXPECT_EQ(co.head_dim, ct.head_dim);
    EXPECT_EQ(co.max_position, ct.max_position);
    EXPECT_EQ(co.tie_word_embeddings, ct.tie_word_embeddings);
    EXPECT_FLOAT_EQ(static_cast<float>(co.rms_norm_eps), static_cast<float>(ct.rms_norm_eps));
    EXPECT_FLOAT_EQ(static_cast<float>(co.rope.theta), static_cast<float>(ct.rope.theta));
    fs::remove(out);
  }
}

// llama.cpp wrote the embedded model's tokenizer into its tiny qwen3 file.
TEST(GgufExport, TokenizerMetadataIsLlamaCpps) {
  const std::string out = temp_path("embedded.gguf");
  export_gguf(test::embedded_model_dir(), out, kGgmlBF16);
  const auto ours = File::open(out);
  const auto theirs = File::open(test::gguf_tiny_file("qwen3-bf16"));
  for (const char *key :
       {"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
        "tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.ggml.eos_token_id"})
    EXPECT_EQ(ours->metadata().at(key), theirs->metadata().at(key)) << key;
  const auto from_file = tokenizer_from_gguf(*ours);
  const auto hf = Tokenizer::load(test::embedded_model_dir());
  for (const std::string &text :
       {std::string("def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1)\n"),
        std::string("<|im_start|>user\nÜbergrößenträger — 東京 🚀\t\t x += 0x1F;<|im_end|>"),
        std::string("   leading spaces and   runs\r\n\r\nof whitespace")})
    EXPECT_EQ(from_file->encode(text, true, false), hf->encode(text, true, false)) << text;
  fs::remove(out);
}

// Q8_0 and bf16 files of the embedded model, loaded back.
TEST(GgufExport, EmbeddedModelLoadsBack) {
  const auto hf = WeightStore::open(test::embedded_model_dir());
  const std::vector<std::pair<std::string, ExportType>> types = {{"q8_0", kGgmlQ8_0},
                                                                 {"q4_k", kGgmlQ4_K},
                                                                 {"q6_k", kGgmlQ6_K},
                                                                 {"q5_k", kGgmlQ5_K},
                                                                 {"q4_k_m", ExportType::q4_k_m()},
                                                                 {"q5_k_m", ExportType::q5_k_m()},
                                                                 {"bf16", kGgmlBF16}};
  for (const auto &[type_name, type] : types) {
    const std::string out = temp_path("embedded-" + type_name + ".gguf");
    export_gguf(test::embedded_model_dir(), out, type);
    std::shared_ptr<const File> file = File::open(out);
    const ModelConfig config = model_config_from_gguf(*file);
    const auto store = weights_from_gguf(file, config);
    (void)bind_model_weights(config, *store);  // every shape the model binds
    for (const auto &[name, view] : hf->tensors()) {
      const TensorView *t = store->find(name);
      ASSERT_NE(t, nullptr) << name;
      std::vector<float> a(static_cast<size_t>(view.numel())), b(a.size());
      view.to_f32(a.data());
      t->to_f32(b.data());
      double diff = 0, norm = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
        norm += double(a[i]) * a[i];
      }
      const double rel = std::sqrt(diff / std::max(norm, 1e-30));
      // Q8_0: a step of amax / 127 per block of 32 (~0.5% of an RMS); Q6_K:
      // amax / 31 per 16 values (~2%); Q4_K: 15 steps over a sub-block's
      // range of 32 values (~4 RMS), rounding error ~ step / sqrt(12) ~ 8% of
      // the RMS, with outliers' wider ranges; the Q4_K_M mix is Q4_K at
      // worst; vectors stay f32 and bf16 matrices are the checkpoint's bits.
      const bool matrix = view.shape.size() == 2;
      const double bound = !matrix                    ? 0.0
                           : type.matrix == kGgmlQ8_0 ? 0.01
                           : type.matrix == kGgmlQ6_K ? 0.03
                           : type.matrix == kGgmlQ4_K ? 0.12
                           : type.matrix == kGgmlQ5_K ? 0.06
                                                      : 0.0;
      EXPECT_LE(rel, bound) << type_name << " " << name;
      if (matrix && (type.matrix == kGgmlQ4_K || type.matrix == kGgmlQ5_K) &&
          name == "model.layers.0.mlp.down_proj.weight")
        std::printf("[gguf-export] %s %s: relative L2 %.4f\n", type_name.c_str(), name.c_str(),
                    rel);
    }
    if (type.k_m_mix) {
      // llama.cpp's recipe at 8 layers: v and down in Q6_K in layers 0, 3, 6
      // and 7 ("more bits": the first and last eighth, every third between),
      // every other matrix Q4_K or Q5_K (the head is tied: no output.weight).
      int checked = 0;
      for (const TensorInfo &t : file->tensors()) {
        if (t.dims.size() != 2) continue;
        const bool v_or_down = t.name.find(".attn_v.") != std::string::npos ||
                               t.name.find(".ffn_down.") != std::string::npos;
        const int layer = t.name.rfind("blk.", 0) == 0 ? std::atoi(t.name.c_str() + 4) : -1;
        const bool more = layer == 0 || layer == 3 || layer == 6 || layer == 7;
        EXPECT_EQ(t.type, v_or_down && more ? kGgmlQ6_K : type.matrix) << t.name;
        checked += v_or_down && more;
      }
      EXPECT_EQ(checked, 8);
      EXPECT_EQ(file->get_int("general.file_type"), type.matrix == kGgmlQ5_K ? 17 : 15);
    }
    fs::remove(out);
  }
}

TEST(GgufExport, ErrorsAreStatuses) {
  const std::string out = temp_path("bad.gguf");
  EXPECT_EQ(vegas_model_quantize(nullptr, out.c_str(), "q8_0"), VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(vegas_model_quantize(test::embedded_model_dir().c_str(), nullptr, "q8_0"),
            VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(vegas_model_quantize(test::embedded_model_dir().c_str(), out.c_str(), "q3_k"),
            VEGAS_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(vegas_last_error()).find("q3_k"), std::string::npos);
  EXPECT_EQ(vegas_model_quantize("/nonexistent-model-dir", out.c_str(), "q8_0"), VEGAS_ERR_IO);
  EXPECT_EQ(vegas_model_quantize(test::embedded_model_dir().c_str(),
                                 "/nonexistent-dir/x/model.gguf", "Q4_0"),
            VEGAS_ERR_IO);
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(vegas_model_quantize(test::embedded_model_dir().c_str(), out.c_str(), "Q4_0"),
            VEGAS_OK);
  EXPECT_GT(fs::file_size(out), 0u);
  fs::remove(out);
}

// A tensor that cannot be made leaves no half-written file behind, and its
// error reaches the caller.
TEST(GgufExport, AFailedWriteLeavesNoFile) {
  const std::string out = temp_path("half.gguf");
  Writer w;
  w.set_string("general.architecture", "qwen3");
  const float x[32] = {};
  w.add_tensor("a", {32}, kGgmlF32, 128, [&] { return quantize(kGgmlF32, x, 32); });
  w.add_tensor("b", {32}, kGgmlF32, 128,
               []() -> std::vector<uint8_t> { fail(VEGAS_ERR_OUT_OF_MEMORY, "no room for b"); });
  try {
    w.write(out);
    ADD_FAILURE() << "the write succeeded";
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), VEGAS_ERR_OUT_OF_MEMORY);
  }
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace vegas::gguf
