// The rank-process core of the supervisor, for fixed-size and elastic jobs
// (cli/spawn/rank_processes.h), with fake processes that record what they were asked and answer as
// scripted on the io_context: output relayed line by line under the rank's prefix (which an elastic
// worker's new round changes), the end of a job (terminate now or after the abort grace, kill after
// the graces), stop() of one process, and "every one exited and drained" with the drain timeout.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <functional>
#include <sstream>

#include <spdlog/sinks/ostream_sink.h>

#include "cli/base/errors.h"
#include "cli/output/log.h"
#include "cli/spawn/rank_processes.h"

using namespace hora::cli;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

struct Record {
  int terminates = 0;
  int kills = 0;
  int close_outputs = 0;
};

// Exits by SIGTERM when asked to terminate (unless stubborn), by SIGKILL when killed.
class Fake : public RankProcess {
 public:
  Fake(boost::asio::io_context& io, Record& record, bool stubborn = false,
       bool keep_output_open = false, bool fail_start = false)
      : io_(io),
        record_(record),
        stubborn_(stubborn),
        keep_open_(keep_output_open),
        fail_start_(fail_start) {}

  void start(const GuardRequest&, Events events) override {
    if (fail_start_) throw SpawnError("fake spawn failure");
    events_ = std::move(events);
    running_ = true;
  }
  void terminate() override {
    ++record_.terminates;
    if (!stubborn_ && running_) {
      boost::asio::post(io_, [this] { finish(ExitStatus{true, 0, SIGTERM}); });
    }
  }
  void kill() override {
    ++record_.kills;
    if (running_) boost::asio::post(io_, [this] { finish(ExitStatus{true, 0, SIGKILL}); });
  }
  void close_output() override {
    ++record_.close_outputs;
    boost::asio::post(io_, [this] { close_streams(); });
  }
  bool running() const override { return running_; }

  void print(std::string_view text) { events_.on_output(Stream::kStdout, text); }
  void finish(const ExitStatus& st) {
    if (!running_) return;
    running_ = false;
    if (!keep_open_) close_streams();
    events_.on_exit(st);
  }

 private:
  void close_streams() {
    if (closed_) return;
    closed_ = true;
    events_.on_output_closed(Stream::kStdout);
    events_.on_output_closed(Stream::kStderr);
  }

  boost::asio::io_context& io_;
  Record& record_;
  bool stubborn_, keep_open_, fail_start_;
  Events events_;
  bool running_ = false;
  bool closed_ = false;
};

struct Pipe {
  int fd[2];
  Pipe() { REQUIRE(::pipe2(fd, O_CLOEXEC) == 0); }
  ~Pipe() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
  std::string drain() {
    ::close(fd[1]);
    fd[1] = -1;
    std::string s;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd[0], buf, sizeof buf)) > 0) s.append(buf, static_cast<std::size_t>(n));
    return s;
  }
};

// Processes 0..n-1 under one RankProcesses; each run() turns the loop until `done()` or 10 s.
struct Core {
  boost::asio::io_context io;
  Pipe out, err;
  Output output{OutputOptions{}, 8, out.fd[1], err.fd[1]};
  std::vector<Record> records = std::vector<Record>(8);
  std::vector<Fake*> fakes = std::vector<Fake*>(8, nullptr);
  std::vector<std::pair<int, int>> exits;  // (id, horarun's code) in the order heard
  int closed_events = 0;
  std::ostringstream log;
  std::shared_ptr<spdlog::logger> logger = launcher_log();
  std::vector<spdlog::sink_ptr> saved = logger->sinks();
  RankProcesses procs{io, output, ProcessGraces{50ms, 100ms, 50ms, 100ms},
                      RankProcesses::Hooks{[](int id) { return "rank " + std::to_string(id); },
                                           [this](int id, const ExitStatus& st) {
                                             exits.emplace_back(id, st.exit_code());
                                           },
                                           [this] { ++closed_events; }}};

  Core() { logger->sinks() = {std::make_shared<spdlog::sinks::ostream_sink_st>(log)}; }
  ~Core() { logger->sinks() = saved; }

  Fake& start(int id, bool stubborn = false, bool keep_open = false) {
    auto p = std::make_unique<Fake>(io, records[static_cast<std::size_t>(id)], stubborn, keep_open);
    fakes[static_cast<std::size_t>(id)] = p.get();
    procs.start(id, std::move(p), GuardRequest{}, id);
    return *fakes[static_cast<std::size_t>(id)];
  }
  // Runs the loop until done() holds (checked after every handler), at most 10 s.
  void run_until(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    io.restart();
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      if (io.run_one_for(50ms) == 0) io.restart();
    }
    REQUIRE(done());
  }
};

}  // namespace

TEST_CASE("output is relayed line by line under the process's current rank") {
  Core c;
  Fake& f = c.start(3);
  f.print("first li");
  f.print("ne\nsecond");
  c.procs.set_output_rank(3, 1);  // an elastic worker's new round: its new rank from now on
  f.print(" line\nthird\n");
  f.finish(ExitStatus{});
  CHECK(c.procs.exited_and_drained());
  const std::string out = c.out.drain();
  CHECK_THAT(out, Contains("[3]<stdout>:first line\n"));
  CHECK_THAT(out, Contains("[1]<stdout>:second line\n"));
  CHECK_THAT(out, Contains("[1]<stdout>:third\n"));
  CHECK(c.exits == std::vector<std::pair<int, int>>{{3, 0}});
  CHECK(c.closed_events == 2);
}

TEST_CASE("the end of a job: the unconnected now, the others after the abort grace, kill last") {
  Core c;
  c.start(0);
  c.start(1);
  c.start(2, /*stubborn=*/true);
  c.procs.end_all({1, 2}, 50ms);
  // Rank 0 does not hear the abort: asked at once. Ranks 1 and 2 get the abort grace first.
  CHECK(c.records[0].terminates == 1);
  CHECK(c.records[1].terminates == 0);
  CHECK(c.records[2].terminates == 0);
  c.run_until([&] { return c.procs.all_exited(); });
  CHECK(c.records[1].terminates == 1);
  CHECK(c.records[2].terminates == 1);
  CHECK(c.records[0].kills == 0);
  CHECK(c.records[1].kills == 0);
  CHECK(c.records[2].kills == 1);  // ignored SIGTERM: killed after kill_grace + guard_slack
  CHECK(c.procs.exit_status(2)->signal == SIGKILL);
  CHECK_THAT(c.log.str(), Contains("rank 2 did not end after SIGTERM; killing its guard"));
  CHECK_FALSE(c.log.str().find("rank 1 did not end") != std::string::npos);
}

TEST_CASE("without an abort grace every process is asked to end at once") {
  Core c;
  c.start(0);
  c.start(1);
  c.procs.end_all({0, 1}, 0ms);
  CHECK(c.records[0].terminates == 1);
  CHECK(c.records[1].terminates == 1);
  c.run_until([&] { return c.procs.all_exited(); });
  CHECK(c.records[0].kills + c.records[1].kills == 0);
}

TEST_CASE("stop() ends one process and kills it when it outlives the graces") {
  Core c;
  c.start(0, /*stubborn=*/true);
  c.start(1);
  c.procs.stop(0);
  CHECK(c.records[0].terminates == 1);
  CHECK(c.procs.running(1));
  c.run_until([&] { return !c.procs.running(0); });
  CHECK(c.records[0].kills == 1);
  CHECK(c.records[1].terminates == 0);
  CHECK(c.procs.running(1));
  CHECK_FALSE(c.procs.all_exited());
}

TEST_CASE("output held open after the exit is given up after the drain timeout, with a warning") {
  Core c;
  Fake& f = c.start(0, false, /*keep_open=*/true);
  f.print("partial");
  f.finish(ExitStatus{false, 3, 0});
  CHECK(c.procs.all_exited());
  CHECK_FALSE(c.procs.exited_and_drained());
  c.run_until([&] { return c.procs.exited_and_drained(); });
  CHECK(c.records[0].close_outputs == 1);
  CHECK_THAT(c.out.drain(), Contains("[0]<stdout>:partial\n"));
  CHECK_THAT(c.log.str(), Contains("rank 0's output is still open"));
  CHECK(c.procs.exit_status(0)->exit_code() == 3);
}

TEST_CASE("a process that fails to start counts as never started") {
  Core c;
  Record r;
  CHECK_THROWS_AS(c.procs.start(5, std::make_unique<Fake>(c.io, r, false, false, true),
                                GuardRequest{}, 5),
                  SpawnError);
  CHECK_FALSE(c.procs.started(5));
  CHECK_FALSE(c.procs.running(5));
  CHECK_FALSE(c.procs.exit_status(5));
  CHECK(c.procs.exited_and_drained());  // nothing to wait for
}
