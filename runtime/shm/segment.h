// One POSIX shared-memory segment (shm_open + mmap), mapped read-write by this process.
//
// The creator makes it with O_EXCL and mode 0600 (another user on the host cannot open it, and
// a name that already exists is an error, never a silent share). Anyone may unlink the name;
// the mapping stays valid until this object is destroyed, so a segment whose name was unlinked
// right after every process mapped it leaves nothing behind however the processes end.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace hora::detail::shm {

class Segment {
 public:
  // "/hora-<16 hex digits>-<pid>-<n>": the digits hash the job secret and the host index (so
  // two jobs, or two hosts of one job sharing a kernel, never meet; common/shm_name.h, which the
  // rank's guard uses to remove what a dead creator left: cli/spawn/shm_cleanup.h), the pid and a
  // counter of this process make every creation unique (several groups, or init() after
  // shutdown()).
  static std::string make_name(const void* secret, std::size_t secret_size, int host_index);

  // Creates `name` with `bytes` bytes (zero-filled) and maps it. Throws std::runtime_error with
  // the name and errno text (EEXIST: the name is in use).
  static Segment create(const std::string& name, std::size_t bytes);
  // Opens and maps `name`, retrying while it does not exist yet or is still shorter than
  // `bytes` (its creator sizes it right after creating it) until `deadline`. Throws
  // std::runtime_error naming what was missing.
  static Segment open(const std::string& name, std::size_t bytes,
                      std::chrono::steady_clock::time_point deadline);
  // shm_unlink; a name already gone is fine. Returns false on another error.
  static bool unlink(const std::string& name);

  Segment() = default;
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();  // unmaps

  void* data() const { return data_; }
  std::size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  Segment(std::string name, void* data, std::size_t size);

  std::string name_;
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace hora::detail::shm
