// The relaying agent's side of the fan-out tree (relay.h): the hosts a RELAY_OPEN gave this
// agent, their SSH sessions, and the agents running on them. The agent (agent.cc) owns one and
// calls it from its poll loop; everything runs on that loop's thread except the preflight, which
// runs ssh::probe_hosts on a thread of its own and hands its results over through a pipe.
//
// Frames for the launcher are appended to the agent's output queue: one RELAY_READY per host,
// then that host's agent's stdout (RELAY_OUTPUT) and stderr (RELAY_STDERR), and RELAY_ENDED when
// its channel ends. RELAY_DATA from the launcher goes to the host's agent's stdin; RELAY_CLOSE
// closes its channel; RELAY_KILL kills its agent by pid (RELAY_KILLED answers). Lifetime:
// close_all() (the agent's own shutdown) drops every session, so each relayed agent sees its stdin
// end and stops its ranks; if this agent is SIGKILLed, the kernel closes the connections and the
// same happens.
#pragma once

#include <poll.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cli/agent/relay.h"
#include "common/unique_fd.h"
#include "ssh/preflight.h"

namespace hora::cli::agent {

class RelayChildren {
 public:
  // Frames for the launcher go to the end of `out`.
  explicit RelayChildren(std::string& out) : out_(out) {}
  ~RelayChildren();
  RelayChildren(const RelayChildren&) = delete;
  RelayChildren& operator=(const RelayChildren&) = delete;

  // RELAY_OPEN: starts the preflight of its hosts (each RELAY_OPEN on a thread of its own; the
  // launcher splits a long list into several). Returns why not (a malformed payload, no pipe),
  // or "".
  std::string open(std::string_view payload);
  void data(std::uint32_t id, std::string_view bytes);
  void close(std::uint32_t id);
  // RELAY_KILL: runs `kill -KILL <pid>` on host `id` over its session (its agent stopped
  // answering); RELAY_KILLED follows with the outcome. The host's session stays until it ran.
  void kill(std::uint32_t id, std::string_view payload);
  // Drops every relayed host's session (their agents stop); a preflight still running is
  // dropped when it returns.
  void close_all();

  // Appends the descriptors to wait on; true when pump() should run again without waiting.
  // `room`: the output queue can take more (else relayed output is not read).
  bool add_pollfds(std::vector<pollfd>& fds, bool room) const;
  // Takes the preflight's results once it finished, and moves every session along.
  void pump(bool room);
  // No preflight running and no relayed host left.
  bool idle() const { return batches_.empty() && hosts_.empty(); }

 private:
  struct Host {
    std::unique_ptr<ssh::Session> session;
    std::shared_ptr<ssh::Channel> channel;
    std::shared_ptr<ssh::Channel> kill;  // a RELAY_KILL's `kill -KILL`, until it finished
    // Set by RELAY_CLOSE: the channel is closed, and the session kept until it is done or this
    // time, so that a RELAY_KILL right behind it (the launcher's watchdog) still has a way there.
    std::optional<std::chrono::steady_clock::time_point> closed_until;
  };
  struct Pending {  // shared with the preflight thread
    std::mutex mu;
    bool done = false;
    std::vector<RelayTarget> targets;
    std::vector<ssh::ProbeResult> results;
  };
  // One RELAY_OPEN's preflight: its thread, and the pipe it writes a byte to when it is done.
  struct Batch {
    std::shared_ptr<Pending> pending;
    std::thread thread;
    UniqueFd wake_read, wake_write;
  };

  // The finished batch's results: a RELAY_READY per host, and the started ones kept.
  void take_results(Batch& batch);
  void ended(std::uint32_t id, const std::string& why);

  std::string& out_;
  std::map<std::uint32_t, Host> hosts_;
  std::vector<std::unique_ptr<Batch>> batches_;
  bool closing_ = false;
};

}  // namespace hora::cli::agent
