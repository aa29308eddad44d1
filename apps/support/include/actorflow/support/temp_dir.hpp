#pragma once

// A scratch directory for programs that write files for a while: the
// tests, and the bench's TLS certificates. Header-only: the unit tests use
// it without the apps' library.

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace actorflow::support {

/// A fresh directory under the system temp dir (mkdtemp, so unique even
/// across parallel test processes), removed with everything in it.
class temp_dir {
public:
  explicit temp_dir(const std::string& prefix = "actorflow") {
    auto tmpl = (std::filesystem::temp_directory_path()
                 / (prefix + "-XXXXXX"))
                  .string();
    if (::mkdtemp(tmpl.data()) == nullptr)
      throw std::runtime_error("mkdtemp failed for " + tmpl);
    path = tmpl;
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  /// The path of `name` in the directory.
  std::string operator/(const std::string& name) const {
    return (path / name).string();
  }

  /// Writes `bytes` to `name`; returns its path.
  std::string write(const std::string& name, const std::string& bytes) const {
    auto file = *this / name;
    std::ofstream out{file, std::ios::binary | std::ios::trunc};
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out)
      throw std::runtime_error("cannot write " + file);
    return file;
  }

  std::filesystem::path path;
};

} // namespace actorflow::support
