// Writing the JSON files of `vegas tune` and `vegas bench --report`: checked
// before a long sweep starts, replaced atomically at the end.
#pragma once

#include <string>

namespace vegas_cli {

// Fails with a message naming `what` unless a file can be created in `dir`
// (made, with its parents, when missing).
void check_writable_dir(const std::string &dir, const char *command, const char *what);
// The directory part of `path` ("." when it has none).
std::string parent_dir(const std::string &path);
// Writes `text` to `path` through a temporary file in the same directory and
// a rename, so a reader never sees half a file. Fails with a message.
void write_file_atomically(const std::string &path, const std::string &text, const char *command);

}  // namespace vegas_cli
