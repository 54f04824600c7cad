// The agent (`horarun --agent`, cli/agent/agent.h) run for real as a local child through a
// PipeStream, driven through AgentLink: the probes and guards it starts, what it refuses, and
// that nothing it started survives its channel or its own death.
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "cli/agent/agent.h"
#include "cli/agent/liveness.h"
#include "cli/agent/pipe_stream.h"
#include "cli/spawn/guard_request.h"

using namespace hora::cli;
using namespace hora::cli::agent;
using Clock = std::chrono::steady_clock;

namespace {

std::string horarun() {
  const char* p = std::getenv("HORARUN");
  REQUIRE(p != nullptr);
  return p;
}

bool alive(pid_t pid) { return ::kill(pid, 0) == 0; }

// Waits (bounded) until `pid` is gone.
bool gone(pid_t pid, std::chrono::seconds within = std::chrono::seconds(15)) {
  const auto until = Clock::now() + within;
  while (alive(pid)) {
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

struct Agent {
  PipeStream* stream = nullptr;
  std::unique_ptr<AgentLink> link;
  PipeStream::Started started;

  Agent() {
    auto s = std::make_unique<PipeStream>(std::vector<std::string>{horarun(), "--agent"});
    stream = s.get();
    started = s->start(Clock::now() + std::chrono::seconds(20));
    REQUIRE(started.ready);
    link = link_over_pipe("test-host", std::move(s));
  }

  // Pumps until `done()` (bounded).
  template <typename F>
  bool pump_until(F done, std::chrono::seconds within = std::chrono::seconds(20)) {
    const auto until = Clock::now() + within;
    while (!done()) {
      if (Clock::now() >= until) return false;
      link->stream().pump();
      if (done()) break;
      const auto in = link->stream().interest();
      pollfd p{link->stream().fd(),
               static_cast<short>((in.read ? POLLIN : 0) | (in.write ? POLLOUT : 0)), 0};
      ::poll(&p, 1, 50);
    }
    return true;
  }
};

struct Run {
  std::string out, err;
  std::optional<hora::ssh::ExitInfo> exit;
  AgentChannel::Handlers handlers() {
    AgentChannel::Handlers h;
    h.on_stdout = [this](std::string_view d) { out.append(d); };
    h.on_stderr = [this](std::string_view d) { err.append(d); };
    h.on_exit = [this](const hora::ssh::ExitInfo& e) { exit = e; };
    return h;
  }
};

GuardRequest shell(const std::string& script) {
  GuardRequest r;
  r.env = {{"PATH", "/usr/bin:/bin"}};
  r.argv = {"/bin/sh", "-c", script};
  return r;
}

}  // namespace

TEST_CASE("the agent reports the host's interfaces before its ready line") {
  Agent a;
  CHECK(a.started.before.rfind("hora-interfaces 1\n", 0) == 0);
  CHECK(a.started.before.find("\nend\n") != std::string::npos);
}

TEST_CASE("a probe started through the agent runs and reports its exit") {
  Agent a;
  Run r;
  auto ch = a.link->exec("", {"--probe-interfaces"}, r.handlers());
  REQUIRE(a.pump_until([&] { return r.exit.has_value(); }));
  CHECK(r.exit->ok());
  CHECK(r.out.rfind("hora-interfaces 1\n", 0) == 0);
}

TEST_CASE("a guard started through the agent runs its rank with the request from stdin") {
  Agent a;
  Run r;
  auto ch = a.link->exec("/tmp", {"--guard"}, r.handlers());
  GuardRequest req = shell("pwd; echo to-err >&2; exit 3");
  ch->write(req.encode());
  REQUIRE(a.pump_until([&] { return r.exit.has_value(); }));
  CHECK(r.exit->error.empty());
  CHECK(r.exit->exit_status == 3);
  CHECK(r.out == "/tmp\n");
  CHECK(r.err.find("to-err") != std::string::npos);
}

TEST_CASE("a rank killed by a signal is reported with the signal's name") {
  Agent a;
  Run r;
  auto ch = a.link->exec("", {"--guard"}, r.handlers());
  ch->write(shell("kill -SEGV $$").encode());
  REQUIRE(a.pump_until([&] { return r.exit.has_value(); }));
  CHECK(r.exit->exit_signal == "SEGV");
}

TEST_CASE("the agent refuses modes it does not start and directories that do not exist") {
  Agent a;
  Run bogus, nodir;
  auto c1 = a.link->exec("", {"--bogus"}, bogus.handlers());
  auto c2 =
      a.link->exec("/nonexistent-dir-for-agent-test", {"--probe-interfaces"}, nodir.handlers());
  REQUIRE(a.pump_until([&] { return bogus.exit && nodir.exit; }));
  CHECK(bogus.exit->error.find("'--bogus' is not a mode the agent starts") != std::string::npos);
  CHECK(nodir.exit->exit_status == 127);
  CHECK(nodir.err.find("cannot change to directory /nonexistent-dir-for-agent-test") !=
        std::string::npos);
}

TEST_CASE("closing a child's channel makes its guard stop the rank") {
  Agent a;
  Run r;
  auto ch = a.link->exec("", {"--guard"}, r.handlers());
  ch->write(shell("echo $$; exec sleep 600").encode());
  REQUIRE(a.pump_until([&] { return r.out.find('\n') != std::string::npos; }));
  const pid_t rank = std::stoi(r.out);
  REQUIRE(alive(rank));
  ch->close();
  REQUIRE(a.pump_until([&] { return r.exit.has_value(); }));
  CHECK(r.exit->error == "closed by us");
  CHECK(gone(rank));
}

TEST_CASE("the agent's end stops every rank: its channel closed, or the agent SIGKILLed") {
  for (const bool sigkill : {false, true}) {
    DYNAMIC_SECTION((sigkill ? "agent SIGKILLed" : "channel closed")) {
      Agent a;
      Run r1, r2;
      auto c1 = a.link->exec("", {"--guard"}, r1.handlers());
      auto c2 = a.link->exec("", {"--guard"}, r2.handlers());
      c1->write(shell("echo $$; exec sleep 600").encode());
      c2->write(shell("echo $$; exec sleep 600").encode());
      REQUIRE(a.pump_until([&] {
        return r1.out.find('\n') != std::string::npos && r2.out.find('\n') != std::string::npos;
      }));
      const pid_t rank1 = std::stoi(r1.out), rank2 = std::stoi(r2.out);
      if (sigkill) {
        ::kill(a.stream->pid(), SIGKILL);
      } else {
        a.link->close();
      }
      CHECK(gone(rank1));
      CHECK(gone(rank2));
      REQUIRE(a.pump_until([&] { return r1.exit && r2.exit; }));
      CHECK_FALSE(r1.exit->error.empty());
    }
  }
}

// Liveness (cli/agent/liveness.h, docs/agent.md "Liveness").

TEST_CASE("the agent sends heartbeats with its pid, and the link counts them as life") {
  Agent a;
  REQUIRE(a.pump_until([&] { return a.link->agent_pid() != 0; }, std::chrono::seconds(10)));
  CHECK(static_cast<pid_t>(a.link->agent_pid()) == a.stream->pid());
  CHECK(a.link->failure().empty());
}

TEST_CASE("a SIGTERMed agent says so before its ranks end, and is named as their cause") {
  Agent a;
  Run r;
  auto c = a.link->exec("", {"--guard"}, r.handlers());
  c->write(shell("echo $$; exec sleep 600").encode());
  REQUIRE(a.pump_until([&] { return r.out.find('\n') != std::string::npos; }));
  const pid_t rank = std::stoi(r.out);
  ::kill(a.stream->pid(), SIGTERM);
  REQUIRE(a.pump_until([&] { return r.exit.has_value(); }));
  CHECK(gone(rank));
  CHECK(a.link->failure() == "the agent on test-host was terminated by signal 15 (SIGTERM)");
}

TEST_CASE("a SIGSTOPped agent falls silent; horarun's own close is no failure") {
  Agent a;
  REQUIRE(a.pump_until([&] { return a.link->agent_pid() != 0; }, std::chrono::seconds(10)));
  ::kill(a.stream->pid(), SIGSTOP);
  // Drain what was sent before the stop; then nothing comes for several heartbeats.
  a.pump_until([] { return false; }, std::chrono::seconds(1));
  const auto quiet_from = Liveness::Clock::now();
  a.pump_until([] { return false; }, std::chrono::seconds(3));
  CHECK(a.link->liveness().silent(Liveness::Clock::now()) >= Liveness::Clock::now() - quiet_from);
  a.link->fail("the agent on test-host stopped answering");
  CHECK(a.link->failure() == "the agent on test-host stopped answering");
  ::kill(a.stream->pid(), SIGCONT);
  Agent b;
  b.link->close();
  CHECK(b.link->failure().empty());
}

TEST_CASE("a SIGSTOPped agent is killed by the stream's other way, and its ranks end") {
  Agent a;
  Run r;
  auto c = a.link->exec("", {"--guard"}, r.handlers());
  c->write(shell("echo $$; exec sleep 600").encode());
  REQUIRE(a.pump_until([&] { return r.out.find('\n') != std::string::npos; }));
  REQUIRE(a.pump_until([&] { return a.link->agent_pid() != 0; }, std::chrono::seconds(10)));
  const pid_t rank = std::stoi(r.out);
  ::kill(a.stream->pid(), SIGSTOP);
  a.link->fail("the agent on test-host stopped answering");
  // Closing the link does not reach a stopped agent; the kill does.
  CHECK(a.stream->kill_agent(a.link->agent_pid() + 1, Liveness::Clock::now()) != "");
  CHECK(alive(rank));
  CHECK(a.stream->kill_agent(a.link->agent_pid(), Liveness::Clock::now()) == "");
  CHECK(gone(rank));
  CHECK(a.link->failure() == "the agent on test-host stopped answering");
}

TEST_CASE("liveness: expiry and a relayed host's silence") {
  using namespace std::chrono_literals;
  const auto t0 = Liveness::Clock::time_point{} + 1000s;
  Liveness l(t0);
  CHECK_FALSE(l.expired(t0 + 14s, 15s));
  CHECK(l.expired(t0 + 15s, 15s));
  l.heard(t0 + 10s);
  CHECK_FALSE(l.expired(t0 + 15s, 15s));
  Liveness parent(t0 + 20s), relayed(t0);
  CHECK(relayed_silence_is_own(relayed, parent, t0 + 20s, 15s));
  Liveness silent_parent(t0);
  CHECK_FALSE(relayed_silence_is_own(relayed, silent_parent, t0 + 20s, 15s));
  CHECK(agent_timeout_from(nullptr) == kDefaultAgentTimeout);
  CHECK(agent_timeout_from("") == kDefaultAgentTimeout);
  CHECK(agent_timeout_from("abc") == kDefaultAgentTimeout);
  CHECK(agent_timeout_from("6") == 6s);
  CHECK(agent_timeout_from("0.5") == 3 * kHeartbeatInterval);
}
