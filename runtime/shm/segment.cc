#include "runtime/shm/segment.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <utility>

#include "common/shm_name.h"
#include "common/unique_fd.h"

namespace hora::detail::shm {
namespace {

std::string errno_text(int error) { return std::strerror(error); }

void* map(int fd, std::size_t bytes, const std::string& name) {
  void* data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    throw std::runtime_error(fmt::format("mmap of shared-memory segment {} ({} bytes): {}", name,
                                         bytes, errno_text(errno)));
  }
  return data;
}

}  // namespace

std::string Segment::make_name(const void* secret, std::size_t secret_size, int host_index) {
  static std::atomic<unsigned> counter{0};
  return fmt::format("{}-{}-{}", shm_name_prefix(secret, secret_size, host_index), ::getpid(),
                     counter.fetch_add(1));
}

Segment Segment::create(const std::string& name, std::size_t bytes) {
  UniqueFd fd(::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd) {
    throw std::runtime_error(
        fmt::format("creating shared-memory segment {}: {}", name, errno_text(errno)));
  }
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) {
    const int error = errno;
    unlink(name);
    throw std::runtime_error(
        fmt::format("sizing shared-memory segment {} to {} bytes: {} (is /dev/shm large enough?)",
                    name, bytes, errno_text(error)));
  }
  try {
    return Segment(name, map(fd.get(), bytes, name), bytes);
  } catch (...) {
    unlink(name);
    throw;
  }
}

Segment Segment::open(const std::string& name, std::size_t bytes,
                      std::chrono::steady_clock::time_point deadline) {
  std::string missing;
  for (;;) {
    UniqueFd fd(::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600));
    if (fd) {
      struct stat st {};
      if (::fstat(fd.get(), &st) != 0) {
        throw std::runtime_error(
            fmt::format("fstat of shared-memory segment {}: {}", name, errno_text(errno)));
      }
      if (static_cast<std::size_t>(st.st_size) >= bytes) {
        return Segment(name, map(fd.get(), bytes, name), bytes);
      }
      missing = fmt::format("it has {} of its {} bytes", st.st_size, bytes);
    } else if (errno == ENOENT) {
      missing = "it does not exist";
    } else {
      throw std::runtime_error(
          fmt::format("opening shared-memory segment {}: {}", name, errno_text(errno)));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      throw std::runtime_error(
          fmt::format("opening shared-memory segment {}: {} (its creator, local rank 0, did not "
                      "finish creating it in time)",
                      name, missing));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

bool Segment::unlink(const std::string& name) {
  return ::shm_unlink(name.c_str()) == 0 || errno == ENOENT;
}

Segment::Segment(std::string name, void* data, std::size_t size)
    : name_(std::move(name)), data_(data), size_(size) {}

Segment::Segment(Segment&& other) noexcept
    : name_(std::move(other.name_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(data_, size_);
    name_ = std::move(other.name_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

Segment::~Segment() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

}  // namespace hora::detail::shm
