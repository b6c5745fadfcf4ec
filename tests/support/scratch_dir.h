// A scratch folder for tests that write case folders or logs.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace tbe::test {

/// A fresh (removed if present) folder <temp>/tbe_<suite>_<pid>_<name>, private to this process;
/// the caller creates what it needs inside.
inline std::filesystem::path scratch_dir(const std::string& suite, const std::string& name) {
  const std::filesystem::path p = std::filesystem::temp_directory_path() /
                                  ("tbe_" + suite + "_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(p);
  return p;
}

}  // namespace tbe::test
