#include "test/runtime/shm/shm_job.h"

#include <dirent.h>
#include <hora/error.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <exception>
#include <random>
#include <thread>

#include "runtime/shm/segment.h"

namespace hora::test {

using detail::shm::Segment;
using detail::shm::ShmGroup;
using detail::shm::ShmOptions;

std::string fresh_segment_name() {
  std::random_device rd;
  std::array<unsigned, 8> secret{};
  for (auto& w : secret) w = rd();
  return Segment::make_name(secret.data(), sizeof secret, 0);
}

ShmOptions shm_options(int rank, int size, std::size_t region_bytes,
                       std::chrono::milliseconds timeout) {
  ShmOptions o;
  o.local_rank = rank;
  o.local_size = size;
  o.global_rank = 10 + rank;
  o.host = "host0";
  o.timeout = timeout;
  o.region_bytes = region_bytes;
  return o;
}

std::string describe_current_exception() {
  try {
    throw;
  } catch (const hora::PeerFailure& e) {
    return "PeerFailure peer=" + std::to_string(e.peer()) + ": " + e.what();
  } catch (const hora::TimeoutError& e) {
    return std::string("TimeoutError: ") + e.what();
  } catch (const hora::MismatchError& e) {
    return std::string("MismatchError: ") + e.what();
  } catch (const hora::AbortedError& e) {
    return std::string("AbortedError: ") + e.what();
  } catch (const hora::Error& e) {
    return std::string("Error: ") + e.what();
  } catch (const std::exception& e) {
    return std::string("std::exception: ") + e.what();
  }
}

namespace {

std::string run_rank(int rank, int size, const std::string& name, std::size_t region_bytes,
                     std::chrono::milliseconds timeout, const ShmBody& body) {
  try {
    ShmGroup group(name, shm_options(rank, size, region_bytes, timeout),
                   std::chrono::steady_clock::now() + std::chrono::seconds(10));
    return body(group, rank);
  } catch (...) {
    return describe_current_exception();
  }
}

}  // namespace

std::vector<ChildOutcome> run_forked(
    int size, const std::string& name, std::size_t region_bytes, std::chrono::milliseconds timeout,
    const ShmBody& body, const std::function<void(const std::vector<pid_t>&)>& meanwhile) {
  std::vector<ChildOutcome> out(static_cast<std::size_t>(size));
  std::vector<int> read_ends;
  std::vector<pid_t> pids;
  for (int r = 0; r < size; ++r) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    const auto start = std::chrono::steady_clock::now();
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      for (int fd : read_ends) ::close(fd);
      std::string report = run_rank(r, size, name, region_bytes, timeout, body);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      report = std::to_string(seconds) + "\n" + report;
      std::size_t at = 0;
      while (at < report.size()) {
        const ssize_t n = ::write(fds[1], report.data() + at, report.size() - at);
        if (n <= 0) break;
        at += static_cast<std::size_t>(n);
      }
      ::_exit(0);
    }
    ::close(fds[1]);
    read_ends.push_back(fds[0]);
    pids.push_back(pid);
    out[static_cast<std::size_t>(r)].pid = pid;
  }
  if (meanwhile) meanwhile(pids);
  for (int r = 0; r < size; ++r) {
    std::string text;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(read_ends[static_cast<std::size_t>(r)], buf, sizeof buf);
      if (n <= 0) break;
      text.append(buf, static_cast<std::size_t>(n));
    }
    ::close(read_ends[static_cast<std::size_t>(r)]);
    const auto nl = text.find('\n');
    if (nl != std::string::npos) {
      out[static_cast<std::size_t>(r)].seconds = std::stod(text.substr(0, nl));
      out[static_cast<std::size_t>(r)].report = text.substr(nl + 1);
    }
  }
  for (auto& o : out) ::waitpid(o.pid, &o.status, 0);
  return out;
}

std::vector<std::string> run_threads(int size, const std::string& name, std::size_t region_bytes,
                                     std::chrono::milliseconds timeout, const ShmBody& body) {
  std::vector<std::string> out(static_cast<std::size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      out[static_cast<std::size_t>(r)] = run_rank(r, size, name, region_bytes, timeout, body);
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

std::vector<std::string> shm_entries(const std::string& prefix) {
  std::vector<std::string> names;
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return names;
  while (dirent* entry = ::readdir(dir)) {
    const std::string n = entry->d_name;
    if (n.rfind(prefix, 0) == 0) names.push_back(n);
  }
  ::closedir(dir);
  return names;
}

}  // namespace hora::test
