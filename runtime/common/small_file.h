// Reading a whole small file (config.json, tokenizer.json, an index, a tuning
// profile) without trusting what the path names: a FIFO made the open wait
// for a writer forever and /dev/zero read until memory ran out (issue P1,
// hostile files). Only a regular file, of at most `max_bytes`, is read.
#pragma once

#include <cstddef>
#include <string>

namespace vegas {

// The file's bytes. Throws IO when it cannot be opened or read or is not a
// regular file (FIFOs, devices, directories; a symlink counts as its
// target), FORMAT when it holds more than max_bytes. `what` names the file
// in messages ("model config", "tokenizer.json", ...).
std::string read_small_file(const std::string &path, size_t max_bytes, const std::string &what);

}  // namespace vegas
