#include "fuzz/scratch_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "common/unique_fd.h"

namespace hora::fuzz {

ScratchDir::ScratchDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/hora-fuzz-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    std::perror("hora fuzz: mkdtemp");
    std::abort();
  }
  path_ = buf.data();
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string ScratchDir::write(const std::string& name, std::string_view contents) const {
  const std::string file = path_ + "/" + name;
  const UniqueFd fd(::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd) {
    std::perror(("hora fuzz: open " + file).c_str());
    std::abort();
  }
  std::size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd.get(), contents.data() + done, contents.size() - done);
    if (n <= 0) {
      std::perror(("hora fuzz: write " + file).c_str());
      std::abort();
    }
    done += static_cast<std::size_t>(n);
  }
  return file;
}

void ScratchDir::remove(const std::string& name) const { ::unlink((path_ + "/" + name).c_str()); }

}  // namespace hora::fuzz
