// A private temporary directory for harnesses whose parser reads files (ssh_config, known_hosts):
// created once per fuzzing process under $TMPDIR, removed at exit. Files are rewritten per input.
#pragma once

#include <string>
#include <string_view>

namespace hora::fuzz {

class ScratchDir {
 public:
  ScratchDir();  // mkdtemp("$TMPDIR/hora-fuzz-XXXXXX"); aborts when it cannot
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  // Writes `contents` to path()/name (name relative; sub-directories must exist); aborts on error.
  std::string write(const std::string& name, std::string_view contents) const;
  // Removes path()/name if it exists.
  void remove(const std::string& name) const;

 private:
  std::string path_;
};

}  // namespace hora::fuzz
