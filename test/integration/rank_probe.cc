// A rank program for horarun's integration tests (test/integration/horarun_test.sh), public
// API only. Modes:
//   env                 init(), then check hora's view against the launcher's variables
//   output LINES        print LINES long, rank-tagged lines to stdout and to stderr, no init
//   exit CODE RANK      init(); rank RANK exits CODE; the others wait in allreduces until aborted
//   kill-in-allreduce   init(); rank 1 SIGKILLs itself while the others are in an allreduce
//   crash               init(); rank 1 writes through a null pointer in a thread named
//                       "probe-crasher" (libhora's crash report, then SIGSEGV); the others wait
//                       in an allreduce until aborted
//   overflow | sent-fpe  init(); rank 1 dies of a stack overflow / of a SIGFPE it sends itself
//   hang DIR            init(); write DIR/<rank>.pid; block in a barrier rank 0 never enters
//   spin DIR            init(); write DIR/<rank>.pid; every rank in allreduces until aborted
//                       (a test SIGSTOPs one of them)
//   sleep DIR           no init(); write DIR/<rank>.pid; sleep (for signal tests of plain jobs)
//   noinit RANK         rank RANK never calls init() (sleeps); the others init()
//   garbage             rank 0 sends junk to the rendezvous port and sees it closed; then
//                       every rank runs checked allreduces
#include <hora/hora.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

int env_int(const char* name) { return std::atoi(env(name).c_str()); }

void write_pid(const std::string& dir) {
  const std::string rank = env("HORA_RANK");
  std::ofstream(dir + "/" + rank + ".pid") << ::getpid() << "\n";
}

// Blocks in allreduces until the job is aborted (throws) or a minute passes.
int wait_in_allreduces() {
  const auto end = std::chrono::steady_clock::now() + std::chrono::minutes(1);
  std::vector<float> v(1024, 1.0f);
  while (std::chrono::steady_clock::now() < end) {
    hora::allreduce(v.data(), v.data(), v.size(), hora::DataType::kFloat32, hora::ReduceOp::kMax);
  }
  std::fprintf(stderr, "rank %d: never aborted\n", hora::rank());
  return 2;
}

int mode_env() {
  hora::init();
  int bad = 0;
  auto expect = [&](const char* what, long got, const char* var) {
    if (got != std::atol(env(var).c_str())) {
      std::fprintf(stderr, "%s=%ld but %s=%s\n", what, got, var, env(var).c_str());
      ++bad;
    }
  };
  expect("rank()", hora::rank(), "HORA_RANK");
  expect("size()", hora::size(), "HORA_SIZE");
  expect("local_rank()", hora::local_rank(), "HORA_LOCAL_RANK");
  expect("local_size()", hora::local_size(), "HORA_LOCAL_SIZE");
  expect("cross_rank()", hora::cross_rank(), "HORA_CROSS_RANK");
  expect("cross_size()", hora::cross_size(), "HORA_CROSS_SIZE");
  expect("rank()", hora::rank(), "RANK");
  expect("size()", hora::size(), "WORLD_SIZE");
  if (hora::hostname() != env("HORA_HOSTNAME")) {
    std::fprintf(stderr, "hostname()=%s but HORA_HOSTNAME=%s\n", hora::hostname().c_str(),
                 env("HORA_HOSTNAME").c_str());
    ++bad;
  }
  // Every rank must agree on the job facts that are the same everywhere.
  std::vector<std::int64_t> mine = {std::atoll(env("MASTER_PORT").c_str()),
                                    static_cast<std::int64_t>(env("HORA_RENDEZVOUS").size())};
  std::vector<std::int64_t> lo = mine, hi = mine;
  hora::allreduce(lo, hora::ReduceOp::kMin);
  hora::allreduce(hi, hora::ReduceOp::kMax);
  if (lo != hi) {
    std::fprintf(stderr, "ranks disagree on MASTER_PORT or HORA_RENDEZVOUS\n");
    ++bad;
  }
  std::printf("env ok=%d rank=%d size=%d local_rank=%d cross_rank=%d\n", bad == 0, hora::rank(),
              hora::size(), hora::local_rank(), hora::cross_rank());
  hora::shutdown();
  return bad == 0 ? 0 : 1;
}

int mode_output(int lines) {
  const int rank = env_int("HORA_RANK");
  // Long lines written in several pieces: a launcher that does not cut at newlines would mix
  // ranks inside a line.
  const std::string body(3000, static_cast<char>('a' + rank % 26));
  for (int i = 0; i < lines; ++i) {
    std::fprintf(stdout, "rank=%d line=%d ", rank, i);
    std::fflush(stdout);
    std::fprintf(stdout, "%s end\n", body.c_str());
    std::fprintf(stderr, "rank=%d err=%d %s end\n", rank, i, body.c_str());
  }
  std::fprintf(stdout, "rank=%d last line without newline", rank);
  return 0;
}

int mode_exit(int code, int which) {
  hora::init();
  hora::barrier();
  if (hora::rank() == which) {
    std::fprintf(stderr, "rank %d exiting with %d\n", which, code);
    std::fflush(stderr);
    std::_Exit(code);
  }
  try {
    return wait_in_allreduces();
  } catch (const hora::Error& e) {
    std::fprintf(stderr, "rank %d: %s\n", hora::rank(), e.what());
    return 1;
  }
}

int mode_kill_in_allreduce() {
  hora::init();
  hora::barrier();
  if (hora::rank() == 1) {
    // The others are about to enter (or are in) the allreduce below, which cannot complete
    // without this rank.
    ::kill(::getpid(), SIGKILL);
  }
  try {
    std::vector<float> v(1 << 20, 1.0f);
    hora::allreduce(v.data(), v.data(), v.size(), hora::DataType::kFloat32, hora::ReduceOp::kSum);
    std::fprintf(stderr, "rank %d: allreduce completed without rank 1\n", hora::rank());
    return 2;
  } catch (const hora::Error& e) {
    std::fprintf(stderr, "rank %d failed as expected: %s\n", hora::rank(), e.what());
    return 1;
  }
}

// Recurses until the stack's guard page: a SIGSEGV that can only be reported from an alternate
// signal stack. Not a tail call (the frame's array is used after the call), at -O0 anyway.
// The bound is read at run time (so the compiler sees no infinite recursion) and far beyond any
// stack: 4 KiB frames, 2^30 of them.
volatile int g_overflow_depth = 1 << 30;
int overflow(int depth) {
  volatile char frame[4096];
  frame[0] = static_cast<char>(depth);
  if (depth >= g_overflow_depth) return frame[0];
  return overflow(depth + 1) + frame[0];
}

// Rank 1 dies of a stack overflow on the program's thread (`overflow`), or of a SIGFPE sent to
// itself with kill() (`sent-fpe`): a signal that no fault raised, whose siginfo holds the
// sender's pid where a fault's address would be. The others wait in an allreduce.
int mode_fatal(const std::string& how) {
  hora::init();
  hora::barrier();
  if (hora::rank() == 1) {
    if (how == "overflow") return overflow(0);
    ::kill(::getpid(), SIGFPE);
    return 2;  // not reached
  }
  std::vector<float> v(1024, 1.0f);
  try {
    hora::allreduce(v.data(), v.data(), v.size(), hora::DataType::kFloat32, hora::ReduceOp::kSum);
  } catch (const hora::Error& e) {
    std::fprintf(stderr, "rank %d failed as expected: %s\n", hora::rank(), e.what());
  }
  return 1;
}

int mode_crash() {
  hora::init();
  hora::barrier();
  if (hora::rank() == 1) {
    std::thread crasher([] {
      pthread_setname_np(pthread_self(), "probe-crasher");
      volatile int* nowhere = nullptr;
      *nowhere = 1;
    });
    crasher.join();
    return 2;  // not reached
  }
  std::vector<float> v(1024, 1.0f);
  try {
    hora::allreduce(v.data(), v.data(), v.size(), hora::DataType::kFloat32, hora::ReduceOp::kSum);
  } catch (const hora::Error& e) {
    std::fprintf(stderr, "rank %d failed as expected: %s\n", hora::rank(), e.what());
    return 1;
  }
  return 2;
}

int mode_hang(const std::string& dir) {
  hora::init();
  write_pid(dir);
  std::printf("rank %d ready\n", hora::rank());
  std::fflush(stdout);
  if (hora::rank() == 0) {
    ::pause();  // until a signal ends it
    return 0;
  }
  try {
    return wait_in_allreduces();
  } catch (const hora::Error& e) {
    std::fprintf(stderr, "rank %d: %s\n", hora::rank(), e.what());
    return 1;
  }
}

int mode_spin(const std::string& dir) {
  hora::init();
  write_pid(dir);
  std::printf("rank %d ready\n", hora::rank());
  std::fflush(stdout);
  try {
    return wait_in_allreduces();
  } catch (const hora::Error& e) {
    std::fprintf(stderr, "rank %d: %s\n", hora::rank(), e.what());
    return 1;
  }
}

int mode_sleep(const std::string& dir) {
  write_pid(dir);
  std::printf("rank %s ready\n", env("HORA_RANK").c_str());
  std::fflush(stdout);
  ::sleep(120);
  return 0;
}

int mode_noinit(int which) {
  if (env_int("HORA_RANK") == which) {
    ::sleep(120);
    return 0;
  }
  try {
    hora::init();
    hora::barrier();
    return 0;
  } catch (const hora::Error& e) {
    std::fprintf(stderr, "rank %s: %s\n", env("HORA_RANK").c_str(), e.what());
    return 1;
  }
}

// Sends junk to the rendezvous port and waits (with a deadline) for the server to close it.
bool garbage_rejected() {
  const std::string rv = env("HORA_RENDEZVOUS");
  const auto colon = rv.rfind(':');
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(std::atoi(rv.substr(colon + 1).c_str())));
  if (::inet_pton(AF_INET, rv.substr(0, colon).c_str(), &addr.sin_addr) != 1) return false;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    std::perror("connect to the rendezvous");
    ::close(fd);
    return false;
  }
  std::string junk = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  junk += std::string(4096, '\xff');
  (void)::send(fd, junk.data(), junk.size(), MSG_NOSIGNAL);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  char buf[4096];
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {  // closed by the server (EOF or reset)
      ::close(fd);
      return true;
    }
  }
  ::close(fd);
  return false;
}

int mode_garbage() {
  bool rejected = true;
  if (env_int("HORA_RANK") == 0) rejected = garbage_rejected();
  hora::init();
  std::vector<std::int32_t> v(1000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::int32_t>(i) + hora::rank();
  hora::allreduce(v, hora::ReduceOp::kSum);
  const int n = hora::size();
  int bad = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (v[i] != static_cast<std::int32_t>(i) * n + n * (n - 1) / 2) ++bad;
  }
  std::printf("garbage rejected=%d allreduce_ok=%d\n", rejected ? 1 : 0, bad == 0 ? 1 : 0);
  hora::shutdown();
  return rejected && bad == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  auto arg = [&](int i) { return argc > i ? std::string(argv[i]) : std::string(); };
  try {
    if (mode == "env") return mode_env();
    if (mode == "output") return mode_output(std::atoi(arg(2).c_str()));
    if (mode == "exit") return mode_exit(std::atoi(arg(2).c_str()), std::atoi(arg(3).c_str()));
    if (mode == "kill-in-allreduce") return mode_kill_in_allreduce();
    if (mode == "crash") return mode_crash();
    if (mode == "overflow" || mode == "sent-fpe") return mode_fatal(mode);
    if (mode == "hang") return mode_hang(arg(2));
    if (mode == "sleep") return mode_sleep(arg(2));
    if (mode == "spin") return mode_spin(arg(2));
    if (mode == "noinit") return mode_noinit(std::atoi(arg(2).c_str()));
    if (mode == "garbage") return mode_garbage();
  } catch (const hora::Error& e) {
    std::fprintf(stderr, "rank_probe %s: %s\n", mode.c_str(), e.what());
    return 1;
  }
  std::fprintf(stderr,
               "usage: rank_probe env|output N|exit CODE RANK|kill-in-allreduce|crash|overflow|"
               "sent-fpe|hang DIR|"
               "spin DIR|sleep DIR|noinit RANK|garbage\n");
  return 2;
}
