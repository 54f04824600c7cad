// An LD_PRELOAD shim for test/runtime/shm/shm_lifetime_test.sh and scripts/soak.sh: wraps shm_open
// so a test can name the segments of its own job and hold a rank back from mapping them.
//   HORA_TEST_SHM_LOG=FILE     appends "create NAME" or "open NAME" for every "/hora-" name
//   HORA_TEST_SHM_DELAY=SECS   sleeps that long before an open without O_CREAT (a local rank
//                              other than 0 joining its host's segment)
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

using ShmOpen = int (*)(const char*, int, mode_t);

void log_name(const char* what, const char* name) {
  const char* path = std::getenv("HORA_TEST_SHM_LOG");
  if (path == nullptr || *path == '\0') return;
  const int fd = ::open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return;
  const std::string line = std::string(what) + " " + name + "\n";
  // One write with O_APPEND: lines of concurrent ranks never interleave.
  [[maybe_unused]] const ssize_t n = ::write(fd, line.data(), line.size());
  ::close(fd);
}

}  // namespace

extern "C" int shm_open(const char* name, int flags, mode_t mode) {
  static const auto real = reinterpret_cast<ShmOpen>(::dlsym(RTLD_NEXT, "shm_open"));
  const bool ours = name != nullptr && std::strncmp(name, "/hora-", 6) == 0;
  if (ours && (flags & O_CREAT) == 0) {
    static bool delayed = false;  // only the first open: the group's attach retries after it
    const char* delay = std::getenv("HORA_TEST_SHM_DELAY");
    if (!delayed && delay != nullptr) {
      delayed = true;
      ::sleep(static_cast<unsigned>(std::atoi(delay)));
    }
  }
  const int fd = real(name, flags, mode);
  if (ours && fd >= 0) log_name((flags & O_CREAT) != 0 ? "create" : "open", name);
  return fd;
}
