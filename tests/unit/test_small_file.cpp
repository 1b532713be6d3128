// read_small_file (common/small_file.h) and the loaders that use it against
// paths that are not what they claim (issue P1, hostile files): a FIFO as
// config.json or tokenizer.json hung the load, /dev/zero read until memory
// ran out. Each case below failed (hung, or read on) before the fix.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <string>

#include "common/error.h"
#include "common/small_file.h"
#include "model/model_config.h"
#include "model/weight_store.h"
#include "safetensors_writer.h"
#include "tokenizer/tokenizer.h"

namespace vegas {
namespace {

// The status and message fn throws, or FAIL when it throws nothing.
void expect_error(const std::function<void()> &fn, vegas_status status, const std::string &needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected " << needle;
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), status) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

// Runs fn on another thread and fails if it has not returned in 10 s; a
// reader blocked on the FIFO is then released by opening its write end.
void expect_returns_soon(const std::string &fifo, const std::function<void()> &fn) {
  auto done = std::async(std::launch::async, fn);
  if (done.wait_for(std::chrono::seconds(10)) == std::future_status::timeout) {
    ADD_FAILURE() << "still blocked on the FIFO after 10 s";
    const int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (w >= 0) ::close(w);
  }
  done.get();
}

TEST(SmallFile, ReadsARegularFileWhole) {
  test::TempDir dir;
  const std::string path = (std::filesystem::path(dir.path()) / "a.json").string();
  std::ofstream(path) << "{\"x\": 1}";
  EXPECT_EQ(read_small_file(path, 64, "test file"), "{\"x\": 1}");
  expect_error([&] { read_small_file(path, 4, "test file"); }, VEGAS_ERR_FORMAT, "more than the 4");
  expect_error([&] { read_small_file(path + ".none", 64, "test file"); }, VEGAS_ERR_IO,
               "cannot open test file");
}

TEST(SmallFile, RefusesDevicesDirectoriesAndFifos) {
  test::TempDir dir;
  expect_error([] { read_small_file("/dev/zero", 64, "model config"); }, VEGAS_ERR_IO,
               "not a regular file");
  expect_error([&] { read_small_file(dir.path(), 64, "model config"); }, VEGAS_ERR_IO,
               "not a regular file");
  const std::string link = (std::filesystem::path(dir.path()) / "config.json").string();
  std::filesystem::create_symlink("/dev/zero", link);
  expect_error([&] { load_model_config(link); }, VEGAS_ERR_IO, "not a regular file");
  const std::string fifo = (std::filesystem::path(dir.path()) / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_returns_soon(fifo, [&] {
    expect_error([&] { read_small_file(fifo, 64, "model config"); }, VEGAS_ERR_IO,
                 "not a regular file");
  });
}

// The loaders themselves: a tokenizer.json that is a FIFO is an IO error at once.
TEST(SmallFile, TokenizerFromAFifoIsRefusedAtOnce) {
  test::TempDir dir;
  const std::string fifo = (std::filesystem::path(dir.path()) / "tokenizer.json").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_returns_soon(fifo, [&] {
    expect_error([&] { Tokenizer::load(dir.path()); }, VEGAS_ERR_IO, "not a regular file");
  });
}

// ... and so is a model.safetensors that is one (mapped, not read).
TEST(SmallFile, SafetensorsFromAFifoIsRefusedAtOnce) {
  test::TempDir dir;
  const std::string fifo = (std::filesystem::path(dir.path()) / "model.safetensors").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_returns_soon(fifo, [&] {
    expect_error([&] { WeightStore::open(dir.path()); }, VEGAS_ERR_IO, "not a regular file");
  });
}

}  // namespace
}  // namespace vegas
