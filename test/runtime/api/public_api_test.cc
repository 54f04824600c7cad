// The public API (hora.h) as a program uses it: the process's runtime created by hora::init()
// from the environment. A world of one in this process; a launched job of separate rank
// processes (rank_child) against a rendezvous server here, with HORA_* variables set as horarun
// sets them.
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <hora/hora.h>
#include <catch2/catch.hpp>

#include "test/runtime/test_job.h"

extern char** environ;

namespace {

void clear_hora_environment() {
  for (const char* name : {"HORA_RANK", "HORA_SIZE", "HORA_LOCAL_RANK", "HORA_LOCAL_SIZE",
                           "HORA_CROSS_RANK", "HORA_CROSS_SIZE", "HORA_HOST_INDEX", "HORA_HOSTNAME",
                           "HORA_RENDEZVOUS", "HORA_SECRET", "HORA_IFACE"}) {
    ::unsetenv(name);
  }
}

struct Child {
  pid_t pid = -1;
  std::string output_path;
};

// Starts rank_child with `env` added to this process's environment; stdout and stderr go to a
// file (read after it exits).
Child spawn_rank(const std::vector<std::string>& env, const std::vector<std::string>& args,
                 const std::string& output_path) {
  const char* program = std::getenv("HORA_TEST_RANK_CHILD");
  if (program == nullptr)
    throw std::runtime_error("HORA_TEST_RANK_CHILD is not set (run via meson test)");
  std::vector<std::string> strings;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "HORA_", 5) != 0) strings.emplace_back(*e);
  }
  strings.insert(strings.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (auto& s : strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_strings{program};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  Child child;
  child.output_path = output_path;
  const int rc = posix_spawn(&child.pid, program, &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0)
    throw std::runtime_error(fmt::format("posix_spawn {}: {}", program, std::strerror(rc)));
  return child;
}

// Waits for the child's exit with a deadline (a pidfd becomes readable when it exits); kills it
// when the deadline passes. Returns the wait status.
int wait_child(const Child& child, std::chrono::milliseconds deadline) {
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, child.pid, 0));
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(deadline.count())) == 0) ::kill(child.pid, SIGKILL);
    ::close(pidfd);
  }
  int status = 0;
  ::waitpid(child.pid, &status, 0);
  return status;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string hex(const hora::rdv::Secret& secret) {
  std::string out;
  for (auto byte : secret) out += fmt::format("{:02x}", byte);
  return out;
}

}  // namespace

TEST_CASE("before init, calls are usage errors that say so", "[public]") {
  REQUIRE_FALSE(hora::is_initialized());
  CHECK_THROWS_WITH(hora::rank(), Catch::Contains("hora::rank() called before hora::init()"));
  CHECK_THROWS_AS(hora::barrier(), hora::UsageError);
}

TEST_CASE("without horarun a program runs as a world of one", "[public]") {
  clear_hora_environment();
  hora::init();
  hora::init();  // twice: harmless
  REQUIRE(hora::is_initialized());
  CHECK(hora::rank() == 0);
  CHECK(hora::size() == 1);
  CHECK(hora::local_rank() == 0);
  CHECK(hora::local_size() == 1);
  CHECK(hora::cross_size() == 1);
  CHECK_FALSE(hora::hostname().empty());

  std::vector<float> v{1.5f, -2.0f};
  std::vector<float> out(2);
  hora::allreduce(v.data(), out.data(), 2, hora::DataType::kFloat32, hora::ReduceOp::kAverage);
  CHECK(out == v);
  std::vector<std::int64_t> g{4, 5, 6};
  CHECK(hora::allgather(g) == g);
  hora::broadcast(v, 0);
  CHECK_THROWS_AS(hora::broadcast(v, 1), hora::UsageError);
  const std::vector<std::size_t> splits{3};
  std::vector<std::int64_t> a(3);
  CHECK(hora::alltoall_splits(splits) == splits);
  hora::alltoall(g.data(), splits, a.data(), splits, hora::DataType::kInt64);
  CHECK(a == g);
  std::vector<std::int64_t> rs(3);
  hora::reducescatter(g.data(), 3, rs.data(), hora::DataType::kInt64, hora::ReduceOp::kMax);
  CHECK(rs == g);
  hora::barrier(hora::Scope::kLocal);

  hora::shutdown();
  CHECK_FALSE(hora::is_initialized());
  CHECK_THROWS_AS(hora::size(), hora::UsageError);
  hora::shutdown();  // again: nothing to do
  hora::init();      // a world of one may start again
  CHECK(hora::size() == 1);
  hora::shutdown();
}

TEST_CASE("reducescatter_count splits evenly, the first count % n ranks get one more", "[public]") {
  CHECK(hora::reducescatter_count(10, 0, 4) == 3);
  CHECK(hora::reducescatter_count(10, 1, 4) == 3);
  CHECK(hora::reducescatter_count(10, 2, 4) == 2);
  CHECK(hora::reducescatter_count(10, 3, 4) == 2);
  CHECK(hora::reducescatter_count(2, 3, 4) == 0);
  CHECK_THROWS_AS(hora::reducescatter_count(10, 4, 4), hora::UsageError);
}

TEST_CASE(
    "rank processes join through their environment and leave with a goodbye, even "
    "without calling shutdown()",
    "[public][process]") {
  const int n = 3;
  std::mutex mutex;
  std::vector<std::pair<int, bool>> left;  // (rank, clean)
  hora::rdv::ServerEvents events;
  events.on_disconnected = [&](int rank, bool clean, const std::string&) {
    std::lock_guard<std::mutex> lock(mutex);
    left.emplace_back(rank, clean);
  };
  hora::test::TestServer server(n, events);
  // Two fake hosts: ranks 0,1 on host 0 and rank 2 on host 1.
  const auto worlds = hora::test::make_worlds({0, 0, 1}, server, std::chrono::seconds(20));
  char dir_template[] = "/tmp/hora_public_api_XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  std::vector<Child> children;
  for (const auto& w : worlds) {
    std::vector<std::string> env = {
        fmt::format("HORA_RANK={}", w.rank),
        fmt::format("HORA_SIZE={}", w.size),
        fmt::format("HORA_LOCAL_RANK={}", w.local_rank),
        fmt::format("HORA_LOCAL_SIZE={}", w.local_size),
        fmt::format("HORA_CROSS_RANK={}", w.cross_rank),
        fmt::format("HORA_CROSS_SIZE={}", w.cross_size),
        fmt::format("HORA_HOST_INDEX={}", w.host_index),
        fmt::format("HORA_HOSTNAME={}", w.hostname),
        fmt::format("HORA_RENDEZVOUS=127.0.0.1:{}", server.port()),
        fmt::format("HORA_SECRET={}", hex(server.secret())),
        "HORA_START_TIMEOUT=20",
        "HORA_TIMEOUT_SECONDS=20",
    };
    const std::vector<std::string> args =
        w.rank == 0 ? std::vector<std::string>{"shutdown"} : std::vector<std::string>{};
    children.push_back(spawn_rank(env, args, fmt::format("{}/rank{}.out", dir_template, w.rank)));
  }
  for (int r = 0; r < n; ++r) {
    const int status = wait_child(children[r], std::chrono::seconds(60));
    const std::string output = read_file(children[r].output_path);
    INFO("rank " << r << " output: " << output);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    const auto& w = worlds[r];
    CHECK_THAT(output,
               Catch::Contains(fmt::format(
                   "rank {} of 3 local {}/{} cross {}/{} host host{} sum 6 gathered 6 async 9", r,
                   w.local_rank, w.local_size, w.cross_rank, w.cross_size, w.host_index)));
    ::unlink(children[r].output_path.c_str());
  }
  ::rmdir(dir_template);
  // Every rank said goodbye (ranks 1 and 2 from the atexit handler) before the server stops.
  for (int tries = 0; tries < 1000; ++tries) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (left.size() == static_cast<std::size_t>(n)) break;
    }
    server.waits();  // a round trip through the io thread, where on_disconnected runs
  }
  std::lock_guard<std::mutex> lock(mutex);
  REQUIRE(left.size() == static_cast<std::size_t>(n));
  for (const auto& [rank, clean] : left) {
    INFO("rank " << rank);
    CHECK(clean);
  }
}
