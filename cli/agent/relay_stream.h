// The launcher's side of the fan-out tree (relay.h): a relayed host's agent, reached through the
// agent of the host that started it. RelayHub sits on the relaying host's AgentLink and sorts the
// RELAY_* frames that come back by host; a RelayStream is one relayed host's Stream, so an
// AgentLink runs over it exactly as over SSH or srun, and discovery's probes and the guards go
// through it unchanged.
//
// A RelayStream has no descriptor of its own (fd() is -1): its bytes arrive while the relaying
// host's stream is pumped, which every event loop of horarun does anyway (the relaying host is a
// host of the job), and what it writes goes out through that stream, whose kick is called.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/agent/agent_link.h"
#include "cli/agent/relay.h"
#include "cli/output/line_splitter.h"

namespace hora::cli::agent {

class RelayStream;

class RelayHub : public std::enable_shared_from_this<RelayHub> {
 public:
  explicit RelayHub(AgentLink* parent) : parent_(parent) {}

  // Asks the relaying agent to start agents on `open.hosts` (RELAY_OPEN).
  void open(const RelayOpen& open);
  // The host's RELAY_READY, once it came.
  const std::optional<RelayReady>& ready(std::uint32_t id) const;
  bool all_ready() const { return waiting_ == 0; }

  // Called by the parent's AgentLink for each RELAY_* frame, and when it ends or goes away.
  void on_frame(const Frame& f);
  void on_parent_closed(const std::string& why);
  // The relaying host's link is being destroyed: every relayed link learns it at its next pump(),
  // not from inside that destructor.
  void detach_parent(const std::string& why);

  // The relayed hosts' names (their links' host names), in id order.
  std::vector<std::string> host_names() const;
  // The relaying host's agent as the cause of a relayed host's end (AgentLink::failure()); ""
  // while it runs normally.
  std::string parent_failure() const;
  // Why the relaying host's agent ended ("" while it runs).
  const std::string& parent_error() const { return parent_error_; }

  // Kills relayed host `id`'s agent `pid` through the relaying agent (RELAY_KILL: `kill -KILL`
  // over its SSH session there), pumping the relaying host's stream until RELAY_KILLED answers
  // or `deadline`. Returns what went wrong (empty: killed).
  std::string kill(std::uint32_t id, std::uint32_t pid, Liveness::Clock::time_point deadline);

  // The stream of host `id`, which started (its RelayReady says so); it delivers first what the
  // host's agent printed after its ready line.
  std::unique_ptr<RelayStream> stream(std::uint32_t id);

 private:
  friend class RelayStream;
  // Every relayed host not ended yet ends because the relaying agent did (`why`); with
  // tell_streams, their links learn it now, else at their next pump().
  void end_all(const std::string& why, bool tell_streams);

  struct Host {
    std::optional<RelayReady> ready;
    RelayStream* stream = nullptr;
    std::string early;  // RELAY_OUTPUT before a stream was made
    std::optional<std::string> ended;
    std::string name;                   // for the agent's stderr lines (the link's host name)
    LineSplitter err_lines;             // its stderr, logged line by line
    std::optional<std::string> killed;  // RELAY_KILLED's answer, once it came
  };

  AgentLink* parent_;
  std::map<std::uint32_t, Host> hosts_;
  int waiting_ = 0;
  std::string parent_error_;
};

class RelayStream : public Stream {
 public:
  RelayStream(std::shared_ptr<RelayHub> hub, std::uint32_t id) : hub_(std::move(hub)), id_(id) {}
  ~RelayStream() override;

  void write(std::string_view data) override;
  void close() override;
  int fd() const override { return -1; }
  Interest interest() const override { return {}; }
  void pump() override;
  // Through the relaying agent (RelayHub::kill).
  std::string kill_agent(std::uint32_t pid, Liveness::Clock::time_point deadline) override;

  // Where the host's bytes go; set by link_over_relay().
  void attach(AgentLink* link) { link_ = link; }

 private:
  friend class RelayHub;
  void deliver(std::string_view data);
  // The hub marked this host ended: the link hears it (with its reason) at once if attached.
  void ended();

  std::shared_ptr<RelayHub> hub_;
  std::uint32_t id_;
  AgentLink* link_ = nullptr;
  bool closed_ = false;
  std::string pending_;  // arrived before attach(); delivered at the first pump()
};

// An AgentLink for relayed host `id` of `hub`, named `host` in messages. The agent's own stderr
// lines are logged as warnings naming `host`.
std::unique_ptr<AgentLink> link_over_relay(const std::string& host,
                                           const std::shared_ptr<RelayHub>& hub, std::uint32_t id);

}  // namespace hora::cli::agent
