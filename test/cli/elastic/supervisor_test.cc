// The supervisor running a fixed-size job (one round, cli/elastic/supervisor.h) under the fixed
// failure policy, with fake rank processes through its RankProcessFactory seam (the real
// rendezvous server runs on 127.0.0.1:0; a fake connects to it with a real client only when its
// script says so). Fakes record what the supervisor asked and answer as scripted, posting their
// events on the io_context like real processes do. Then the policy's parts by themselves
// (cli/spawn/failure_verdict.h, cli/spawn/stall_watch.h).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <spdlog/sinks/ostream_sink.h>

#include "cli/base/errors.h"
#include "cli/elastic/supervisor.h"
#include "cli/output/log.h"
#include "cli/spawn/failure_verdict.h"
#include "cli/spawn/stall_watch.h"
#include "common/endpoint.h"
#include "rendezvous/client.h"
#include "rendezvous/secret.h"
#include "rendezvous/wire.h"

using namespace hora::cli;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;

namespace {

struct Script {
  std::string stdout_text;  // delivered right after start, in two pieces
  std::optional<ExitStatus> exit_at_start;
  bool obey_terminate = true;     // exit by SIGTERM when asked to terminate
  bool keep_output_open = false;  // never close the streams (a leftover holds them)
  bool fail_start = false;
  bool connect_rendezvous = false;  // authenticate to the launcher's server, as hora::init() does
};

struct Record {
  int terminates = 0;
  int kills = 0;
  int close_outputs = 0;
  GuardRequest request;  // what start() was given (outlives the process object)
};

class FakeRankProcess : public RankProcess {
 public:
  FakeRankProcess(boost::asio::io_context& io, Script script, Record& record)
      : io_(io), script_(std::move(script)), record_(record) {}

  void start(const GuardRequest& request, Events events) override {
    if (script_.fail_start) throw SpawnError("fake spawn failure");
    record_.request = request;
    events_ = std::move(events);
    running_ = true;
    if (script_.connect_rendezvous) {
      // Client::connect blocks until the server (on the io_context thread) answers.
      connector_ = std::thread([this, env = request.env] {
        hora::rdv::ClientOptions o;
        for (const auto& [k, v] : env) {
          if (k == "HORA_RENDEZVOUS") {
            o.host = hora::endpoint_host(v);
            o.port = static_cast<std::uint16_t>(std::stoi(v.substr(v.rfind(':') + 1)));
          }
          if (k == "HORA_RANK") o.rank = std::stoi(v);
          if (k == "HORA_SIZE") o.size = std::stoi(v);
          if (k == "HORA_SECRET") o.secret = hora::rdv::parse_secret_hex(v);
        }
        rank_ = o.rank;
        client_ = hora::rdv::Client::connect(o);
        client_->set_abort_handler([](const std::string&) {});
        connected_ = true;
      });
    }
    boost::asio::post(io_, [this] {
      if (!script_.stdout_text.empty()) {
        const std::string& t = script_.stdout_text;
        events_.on_output(Stream::kStdout, std::string_view(t).substr(0, t.size() / 2));
        events_.on_output(Stream::kStdout, std::string_view(t).substr(t.size() / 2));
      }
      if (script_.exit_at_start) finish(*script_.exit_at_start);
    });
  }
  void terminate() override {
    ++record_.terminates;
    if (script_.obey_terminate && running_) {
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
  ~FakeRankProcess() override {
    if (connector_.joinable()) connector_.join();
  }

  bool connected() const { return connected_; }
  // The rank's rendezvous connection closes without goodbye, as when its process dies.
  void drop() {
    if (connector_.joinable()) connector_.join();
    client_.reset();
  }
  void exit_now(const ExitStatus& st) { finish(st); }
  // The rank's collective failed for peer `peer` (a PeerFailure): libhora stores whom it blames.
  void blame(int peer) {
    if (connector_.joinable()) connector_.join();
    const std::string v = std::to_string(peer);
    client_->set(hora::rdv::wire::peer_lost_key(rank_), hora::rdv::Bytes(v.begin(), v.end()),
                 std::chrono::milliseconds(2000));
  }
  // The rank's exit handler says goodbye (exit() after init): the connection closes cleanly.
  void goodbye_at_exit() {
    if (connector_.joinable()) connector_.join();
    client_->goodbye(/*at_exit=*/true);
  }

 private:
  void finish(const ExitStatus& st) {
    if (!running_) return;
    running_ = false;
    if (!script_.keep_output_open) close_streams();
    events_.on_exit(st);
  }
  void close_streams() {
    if (closed_) return;
    closed_ = true;
    events_.on_output_closed(Stream::kStdout);
    events_.on_output_closed(Stream::kStderr);
  }

  boost::asio::io_context& io_;
  Script script_;
  Record& record_;
  Events events_;
  bool running_ = false;
  bool closed_ = false;
  std::thread connector_;
  std::unique_ptr<hora::rdv::Client> client_;
  int rank_ = -1;  // set by the connector thread before connected_
  std::atomic<bool> connected_{false};
};

class FakeFactory : public RankProcessFactory {
 public:
  FakeFactory(boost::asio::io_context& io, std::vector<Script> scripts)
      : io_(io), scripts_(std::move(scripts)), records_(scripts_.size()) {}
  std::unique_ptr<RankProcess> create(int rank, const HostSpec&) override {
    auto p = std::make_unique<FakeRankProcess>(io_, scripts_.at(static_cast<std::size_t>(rank)),
                                               records_[static_cast<std::size_t>(rank)]);
    created_.push_back(p.get());
    return p;
  }
  const Record& record(int r) const { return records_.at(static_cast<std::size_t>(r)); }
  std::vector<FakeRankProcess*> created_;  // valid only while the supervisor runs

 private:
  boost::asio::io_context& io_;
  std::vector<Script> scripts_;
  std::vector<Record> records_;
};

// Captures the Output's two descriptors through pipes (small amounts: no deadlock).
struct Terminal {
  int out[2], err[2];
  Terminal() {
    REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(err, O_CLOEXEC) == 0);
  }
  ~Terminal() {
    for (int fd : {out[0], out[1], err[0], err[1]})
      if (fd >= 0) ::close(fd);
  }
  static std::string drain(int (&p)[2]) {
    ::close(p[1]);
    p[1] = -1;
    std::string s;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(p[0], buf, sizeof buf)) > 0) s.append(buf, static_cast<std::size_t>(n));
    return s;
  }
};

struct Job {
  boost::asio::io_context io;
  RankTable table;
  FakeFactory factory;
  Terminal term;
  Output output;
  SupervisorConfig config;
  std::string out, err;

  Job(int np, std::vector<Script> scripts)
      : table(parse_host_list("localhost:" + std::to_string(np)), np),
        factory(io, std::move(scripts)),
        output(OutputOptions{}, np, term.out[1], term.err[1]) {
    config.command = {"./train"};
    config.cwd = "/tmp";
    config.abort_grace = 50ms;
    config.kill_grace = 100ms;
    config.guard_slack = 50ms;
    config.drain_timeout = 100ms;
    config.facts.start_timeout = 30s;
  }
  std::ostringstream log;  // the launcher logger's warnings during run()

  // Runs `then` on the io thread once ranks 0 and 1 are connected to the rendezvous, polling
  // every 10 ms on `step` (which `then` may go on using).
  void when_two_connected(boost::asio::steady_timer& step, std::function<void()> then) {
    poll_ = [this, &step, then = std::move(then)](const boost::system::error_code& ec) {
      if (ec) return;
      auto& fakes = factory.created_;
      if (fakes.size() < 2 || !fakes[0]->connected() || !fakes[1]->connected()) {
        step.expires_after(10ms);
        step.async_wait(poll_);
        return;
      }
      then();
    };
    step.expires_after(10ms);
    step.async_wait(poll_);
  }
  std::function<void(const boost::system::error_code&)> poll_;

  int run() {
    auto logger = launcher_log();
    auto saved = logger->sinks();
    logger->sinks() = {std::make_shared<spdlog::sinks::ostream_sink_st>(log)};
    Supervisor s(io, table, config, factory, output);
    const auto t0 = std::chrono::steady_clock::now();
    const int rc = s.run();
    logger->sinks() = saved;
    REQUIRE(std::chrono::steady_clock::now() - t0 < 10s);
    out = Terminal::drain(term.out);
    err = Terminal::drain(term.err);
    return rc;
  }
};

}  // namespace

TEST_CASE("all ranks exit 0: exit 0, output prefixed, no verdict line") {
  Job job(2, {Script{"hello\nwor", ExitStatus{}}, Script{"x\n", ExitStatus{}}});
  CHECK(job.run() == 0);
  CHECK_THAT(job.out, Contains("[0]<stdout>:hello\n[0]<stdout>:wor\n"));
  CHECK_THAT(job.out, Contains("[1]<stdout>:x\n"));
  CHECK(job.err.empty());
  // The guard was given the contract and the command.
  const GuardRequest& req = job.factory.record(1).request;
  CHECK(req.argv == std::vector<std::string>{"./train"});
  CHECK(req.cwd == "/tmp");
  CHECK(req.grace == 100ms);
  bool has_rank = false;
  for (const auto& [k, v] : req.env) has_rank |= (k == "HORA_RANK" && v == "1");
  CHECK(has_rank);
}

TEST_CASE("the first failing rank decides the exit code; the others are terminated") {
  Job job(3, {Script{}, Script{"", ExitStatus{false, 3, 0}}, Script{}});
  CHECK(job.run() == 3);
  CHECK(job.factory.record(0).terminates >= 1);
  CHECK(job.factory.record(2).terminates >= 1);
  CHECK(job.factory.record(0).kills == 0);
  CHECK_THAT(job.err, EndsWith("horarun: rank 1 on localhost exited with code 3\n"));
}

TEST_CASE("a rank killed by a signal gives 128 + signal") {
  Job job(2, {Script{}, Script{"", ExitStatus{true, 0, SIGSEGV}}});
  CHECK(job.run() == 128 + SIGSEGV);
  CHECK_THAT(job.err, Contains("rank 1 on localhost was killed by signal 11 (SIGSEGV)"));
}

TEST_CASE("a rank that ignores terminate is killed after the grace") {
  Script stubborn;
  stubborn.obey_terminate = false;
  Job job(2, {stubborn, Script{"", ExitStatus{false, 1, 0}}});
  CHECK(job.run() == 1);
  CHECK(job.factory.record(0).terminates >= 1);
  CHECK(job.factory.record(0).kills == 1);
  CHECK_THAT(job.log.str(), Contains("rank 0 on localhost did not end after SIGTERM"));
}

TEST_CASE("output held open after exit is abandoned after the drain timeout") {
  Script leftover{"partial line", ExitStatus{}};
  leftover.keep_output_open = true;
  Job job(1, {leftover});
  CHECK(job.run() == 0);
  CHECK(job.factory.record(0).close_outputs == 1);
  CHECK_THAT(job.out, Contains("[0]<stdout>:partial line\n"));  // flushed when closed
  CHECK_THAT(job.log.str(), Contains("output is still open"));
}

TEST_CASE("a rank that cannot be started ends the job with exit 1") {
  Script broken;
  broken.fail_start = true;
  Job job(3, {Script{}, Script{}, broken});
  CHECK(job.run() == 1);
  CHECK(job.factory.record(0).terminates >= 1);
  CHECK(job.factory.record(1).terminates >= 1);
  CHECK_THAT(job.err, Contains("could not start rank 2 on localhost: fake spawn failure"));
}

TEST_CASE("SIGTERM to the launcher ends the job with 143") {
  Job job(2, {Script{}, Script{}});
  // Raised once the io_context runs: the supervisor's signal_set is installed by then.
  boost::asio::post(job.io, [] { ::raise(SIGTERM); });
  CHECK(job.run() == 143);
  CHECK(job.factory.record(0).terminates >= 1);
  CHECK_THAT(job.err, EndsWith("horarun: interrupted by SIGTERM; ended the job\n"));
}

TEST_CASE("start timeout is not enforced when no rank uses the rendezvous") {
  Job job(1, {Script{}});
  job.config.facts.start_timeout = 1s;
  // The rank exits 0 by itself 1.5 s in, after the start timeout passed.
  boost::asio::steady_timer later(job.io, 1500ms);
  later.async_wait([&](const boost::system::error_code&) {
    job.factory.created_.at(0)->terminate();  // obeyed: exits by SIGTERM...
  });
  // ...which is a failure; what matters is that the start timeout did not end the job first.
  CHECK(job.run() == 128 + SIGTERM);
  CHECK_THAT(job.err, Contains("was killed by signal 15"));
  CHECK_THAT(job.err, !Contains("did not reach the rendezvous"));
}

TEST_CASE(
    "the verdict names the rank that dropped its rendezvous connection first, though a "
    "peer's failure was heard first") {
  Script in_job;
  in_job.connect_rendezvous = true;
  Job job(2, {in_job, in_job});
  // Rank 1 dies and takes rank 0 down, but horarun hears rank 0's exit before it reads rank 1's
  // socket (an agent reported it first; under load both wait in one wake-up): rank 0's exit,
  // then rank 1's drop, rank 0's drop and rank 1's exit.
  boost::asio::steady_timer step(job.io);
  job.when_two_connected(step, [&] {
    auto& fakes = job.factory.created_;
    fakes[0]->exit_now(ExitStatus{false, 1, 0});
    boost::asio::post(job.io, [&] {
      fakes[1]->drop();
      step.expires_after(20ms);
      step.async_wait([&](const boost::system::error_code& e2) {
        if (e2) return;
        fakes[0]->drop();
        step.expires_after(20ms);
        step.async_wait([&](const boost::system::error_code& e3) {
          if (!e3) fakes[1]->exit_now(ExitStatus{false, 3, 0});
        });
      });
    });
  });
  CHECK(job.run() == 3);
  CHECK_THAT(job.err, EndsWith("horarun: rank 1 on localhost exited with code 3\n"));
}

TEST_CASE(
    "exit(1) after init: the rank whose exit handler said goodbye first is the cause, not the "
    "peer that lost it and failed first") {
  Script in_job;
  in_job.connect_rendezvous = true;
  Job job(2, {in_job, in_job});
  // Rank 1 calls exit(1): libhora's exit handler says goodbye, then closes the connections its
  // peer uses; rank 0 fails at once (PeerFailure, SIGABRT) and drops, and its exit is heard
  // while rank 1 is still finishing its exit handlers. Rank 1 then exits 1.
  boost::asio::steady_timer step(job.io);
  std::thread leaver;
  job.when_two_connected(step, [&] {
    auto& fakes = job.factory.created_;
    // goodbye() waits for the server's answer, which the io thread sends: not on the io thread.
    leaver = std::thread([&] {
      fakes[1]->goodbye_at_exit();
      boost::asio::post(job.io, [&] {
        fakes[0]->drop();
        fakes[0]->exit_now(ExitStatus{true, 0, SIGABRT});
        // Longer than the verdict's settling time (300 ms): the verdict must wait for rank 1.
        step.expires_after(600ms);
        step.async_wait([&](const boost::system::error_code& e2) {
          if (!e2) fakes[1]->exit_now(ExitStatus{false, 1, 0});
        });
      });
    });
  });
  const int rc = job.run();
  if (leaver.joinable()) leaver.join();
  CHECK(rc == 1);
  CHECK_THAT(job.err, EndsWith("horarun: rank 1 on localhost exited with code 1\n"));
}

TEST_CASE(
    "a rank that blames its lost peer points the verdict at that peer, though its own connection "
    "closed first") {
  Script in_job;
  in_job.connect_rendezvous = true;
  Job job(2, {in_job, in_job});
  // Rank 1 is killed; rank 0's collective fails for it, rank 0 stores its blame and dies, and
  // horarun happens to read rank 0's closed connection and exit before rank 1's.
  boost::asio::steady_timer step(job.io);
  std::thread victim;
  job.when_two_connected(step, [&] {
    auto& fakes = job.factory.created_;
    victim = std::thread([&] {
      fakes[0]->blame(1);  // waits for the server's answer: not on the io thread
      boost::asio::post(job.io, [&] {
        fakes[0]->drop();
        fakes[0]->exit_now(ExitStatus{true, 0, SIGABRT});
        step.expires_after(600ms);
        step.async_wait([&](const boost::system::error_code& e2) {
          if (e2) return;
          fakes[1]->drop();
          fakes[1]->exit_now(ExitStatus{true, 0, SIGKILL});
        });
      });
    });
  });
  const int rc = job.run();
  if (victim.joinable()) victim.join();
  CHECK(rc == 128 + SIGKILL);
  CHECK_THAT(job.err, EndsWith("horarun: rank 1 on localhost was killed by signal 9 (SIGKILL)\n"));
}

TEST_CASE("a rank lost with its host's agent: the verdict names the agent, exit 255") {
  ExitStatus lost{true, 0, SIGTERM};
  lost.agent_failure = "the agent on h2 was terminated by signal 15 (SIGTERM)";
  // The peer's failure is heard first; the agent is still the cause.
  Job job(3, {Script{"", ExitStatus{false, 1, 0}}, Script{"", lost}, Script{}});
  CHECK(job.run() == 255);
  CHECK_THAT(job.err, EndsWith("horarun: the agent on h2 was terminated by signal 15 (SIGTERM); "
                               "rank 1 on localhost was killed by signal 15 (SIGTERM) with it\n"));
}

// ---- the failure policy's parts, by themselves -----------------------------------------------

namespace {

FailureVerdict::Ranks ranks_of(int size, std::set<int> running, std::map<int, int> blames = {}) {
  FailureVerdict::Ranks r;
  r.size = size;
  r.running = [running](int q) { return running.count(q) != 0; };
  r.blamed_by = [blames](int q) {
    const auto it = blames.find(q);
    return it == blames.end() ? -1 : it->second;
  };
  return r;
}

using Kind = FailureVerdict::Decision::Kind;

}  // namespace

TEST_CASE("verdict: settles while others run, then names the rank that left first") {
  FailureVerdict v;
  v.left(1, /*clean=*/false, false);  // rank 1 dropped first...
  v.left(2, false, false);
  CHECK(v.failed(2, ExitStatus{false, 1, 0}));  // ...but rank 2's exit was heard first
  CHECK_FALSE(v.failed(1, ExitStatus{false, 3, 0}));
  CHECK(v.decide(ranks_of(3, {0})).kind == Kind::kNone);  // rank 0 still runs: settling
  v.settle();
  const auto d = v.decide(ranks_of(3, {0}));
  CHECK(d.kind == Kind::kVerdict);
  CHECK(d.cause.rank == 1);
  CHECK(d.cause.status.code == 3);
}

TEST_CASE("verdict: a running rank that dropped before the failed one is awaited, once") {
  FailureVerdict v;
  v.left(0, false, false);
  v.left(1, false, false);
  v.failed(1, ExitStatus{false, 1, 0});
  v.settle();
  auto d = v.decide(ranks_of(2, {0}));
  CHECK(d.kind == Kind::kAwait);
  CHECK(d.awaited == 0);
  CHECK(d.newly_awaited);
  CHECK_THAT(d.why, Contains("lost its rendezvous connection first"));
  CHECK_FALSE(v.decide(ranks_of(2, {0})).newly_awaited);
  v.stop_awaiting(0);  // it outlived the drop grace
  d = v.decide(ranks_of(2, {0}));
  CHECK(d.kind == Kind::kVerdict);
  CHECK(d.cause.rank == 1);
}

TEST_CASE("verdict: a goodbye from the exit handler orders a rank as a drop does") {
  FailureVerdict v;
  v.left(1, /*clean=*/true, /*at_exit=*/true);
  v.left(0, false, false);
  v.failed(0, ExitStatus{false, 1, 0});
  v.settle();
  auto d = v.decide(ranks_of(2, {1}));
  CHECK(d.kind == Kind::kAwait);
  CHECK(d.awaited == 1);
  CHECK_THAT(d.why, Contains("from its exit handler"));
  v.failed(1, ExitStatus{false, 7, 0});
  d = v.decide(ranks_of(2, {}));
  CHECK(d.kind == Kind::kVerdict);
  CHECK(d.cause.rank == 1);
}

TEST_CASE("verdict: the blame a failed rank stored leads to the peer that failed first") {
  FailureVerdict v;
  v.failed(0, ExitStatus{false, 1, 0});
  v.failed(2, ExitStatus{false, 1, 0});
  const auto d = v.decide(ranks_of(3, {}, {{0, 2}}));
  CHECK(d.kind == Kind::kVerdict);
  CHECK(d.cause.rank == 2);
  FailureVerdict w;
  w.failed(0, ExitStatus{false, 1, 0});
  w.settle();
  const auto a = w.decide(ranks_of(3, {1, 2}, {{0, 1}}));  // rank 1 still runs: await it
  CHECK(a.kind == Kind::kAwait);
  CHECK(a.awaited == 1);
  CHECK_THAT(a.why, Contains("its peer failed because of it"));
}

TEST_CASE("verdict: a host's agent that ended is the cause at once") {
  FailureVerdict v;
  v.left(0, false, false);
  v.failed(0, ExitStatus{false, 1, 0});
  ExitStatus lost{true, 0, SIGKILL};
  lost.agent_failure = "the agent on h2 was killed";
  v.failed(1, lost);
  const auto d = v.decide(ranks_of(3, {2}));  // not settled, rank 2 runs: no matter
  CHECK(d.kind == Kind::kAgent);
  CHECK(d.cause.rank == 1);
}

TEST_CASE("verdict: a rank that exited 0 early is named after the failure it caused") {
  FailureVerdict v;
  v.exited_early(2, /*reached_rendezvous=*/true);
  v.exited_early(0, false);  // only the first is kept
  auto who = [](int r) { return "rank " + std::to_string(r); };
  CHECK_THAT(v.early_exit_note(1, true, who),
             Contains("rank 2 had already exited with code 0 while the job was running"));
  CHECK(v.early_exit_note(2, true, who).empty());
  CHECK(v.early_exit_note(1, /*uses_rendezvous=*/false, who).empty());
}

TEST_CASE("stall watch: a stopped rank is named within seconds, a stuck one at the warning time") {
  StallWatch w(StallSettings{true, 10, 0});
  const auto t0 = StallWatch::Clock::now();
  auto who = [](int r) { return "rank " + std::to_string(r); };
  const std::map<int, StuckProcess> stuck{{1, StuckProcess{42, 'T'}}, {2, StuckProcess{43, 'D'}}};
  CHECK(w.look(t0, stuck, who).warnings.empty());
  auto f = w.look(t0 + 3s, stuck, who);
  REQUIRE(f.warnings.size() == 1);
  CHECK_THAT(f.warnings[0], Contains("rank 1 is state T") && Contains("kill -CONT 42"));
  CHECK(w.look(t0 + 4s, stuck, who).warnings.empty());  // named once
  CHECK(w.stuck_before(2));
  f = w.look(t0 + 11s, stuck, who);
  CHECK(f.warnings.size() == 2);
  CHECK_THAT(f.warnings[1], Contains("stall check: rank 2 stopped responding"));
  CHECK_FALSE(f.shutdown);
  w.look(t0 + 12s, {}, who);  // running again: forgotten
  CHECK_FALSE(w.stuck_before(2));
}

TEST_CASE("stall watch: a rank stuck for the shutdown time ends the job") {
  StallWatch w(StallSettings{true, 60, 5});
  const auto t0 = StallWatch::Clock::now();
  auto who = [](int r) { return "rank " + std::to_string(r); };
  const std::map<int, StuckProcess> stuck{{0, StuckProcess{7, 'D'}}};
  CHECK_FALSE(w.look(t0, stuck, who).shutdown);
  const auto f = w.look(t0 + 6s, stuck, who);
  REQUIRE(f.shutdown);
  CHECK_THAT(*f.shutdown, Contains("rank 0 stopped responding") &&
                              Contains("--stall-check-shutdown-time-seconds"));
}

TEST_CASE(
    "start timeout: not enforced without any rank at the rendezvous, else names the missing") {
  auto who = [](int r) { return "rank " + std::to_string(r); };
  auto f = start_timeout_finding({}, {0, 1}, 2, 5000ms, who);
  CHECK_THAT(f.not_enforced, Contains("not enforcing --start-timeout"));
  CHECK(f.failure.empty());
  f = start_timeout_finding({0, 2}, {0, 1, 2, 3}, 4, 5000ms, who);
  CHECK(f.not_enforced.empty());
  CHECK_THAT(f.failure, Contains("rank 1, rank 3 did not reach the rendezvous") &&
                            Contains("(2 of 4 ranks did)"));
  CHECK(start_timeout_finding({0, 1}, {0, 1}, 2, 5000ms, who).failure.empty());
}
