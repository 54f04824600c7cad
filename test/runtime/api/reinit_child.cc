// A rank process for reinit_test (public API only): three times hora::init(), a blocking and an
// async allreduce (checked), then hora::shutdown(). With two ranks on this host and shared
// memory on, each init() forms new segments; after each allreduce no segment of local rank 0 may
// be left in /dev/shm (their names end in "-<pid>-<n>": runtime/shm/segment.h).
#include <dirent.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <hora/async.h>
#include <hora/hora.h>

namespace {

// The names in /dev/shm that rank 0's process created ("hora-<hash>-<pid>-<n>").
std::vector<std::string> segments_of(std::int32_t pid) {
  std::vector<std::string> found;
  const std::string middle = "-" + std::to_string(pid) + "-";
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return found;
  while (const dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name.rfind("hora-", 0) == 0 && name.find(middle) != std::string::npos) {
      found.push_back(name);
    }
  }
  ::closedir(dir);
  return found;
}

int my_rank = -1;  // hora::rank() of the last init(): it throws after shutdown()

bool fail(int init, const std::string& what) {
  std::fprintf(stderr, "reinit_child: rank %d, init %d: %s\n", my_rank, init, what.c_str());
  return false;
}

bool one_init(int init, std::int32_t& pid0) {
  hora::init();
  my_rank = hora::rank();
  if (hora::local_size() < 2) return fail(init, "expected 2+ ranks on this host");
  const double n = hora::size();
  std::vector<double> v(1000, static_cast<double>((hora::rank() + 1) * init));
  hora::allreduce(v, hora::ReduceOp::kSum);
  const double want = init * n * (n + 1) / 2;
  for (double x : v) {
    if (x != want) return fail(init, "allreduce gave " + std::to_string(x));
  }
  std::vector<float> a(100, static_cast<float>(init));
  hora::Handle h = hora::allreduce_async("a", a, hora::ReduceOp::kSum);
  hora::synchronize(h);
  if (a[99] != static_cast<float>(init * n)) {
    return fail(init, "async allreduce gave " + std::to_string(a[99]));
  }
  const auto pids =
      hora::allgather(std::vector<std::int32_t>{static_cast<std::int32_t>(::getpid())});
  pid0 = pids.at(0);
  // Every rank has joined this init's segments (the allreduce needed them all): their names are
  // unlinked, and so are every earlier init's.
  for (const std::string& name : segments_of(pid0)) return fail(init, "left in /dev/shm: " + name);
  std::printf("rank %d init %d ok sum %g\n", hora::rank(), init, v[0]);
  std::fflush(stdout);
  hora::shutdown();
  return !hora::is_initialized() || fail(init, "still initialized after shutdown()");
}

}  // namespace

int main() {
  try {
    std::int32_t pid0 = -1;
    for (int init = 1; init <= 3; ++init) {
      if (!one_init(init, pid0)) return 1;
    }
    for (const std::string& name : segments_of(pid0)) {
      std::fprintf(stderr, "reinit_child: rank %d: left in /dev/shm at the end: %s\n", my_rank,
                   name.c_str());
      return 1;
    }
    std::printf("REINIT_OK\n");
    return 0;
  } catch (const hora::Error& e) {
    std::fprintf(stderr, "reinit_child: %s\n", e.what());
    return 1;
  }
}
