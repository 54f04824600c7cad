// The launcher's end of one host's agent (cli/agent/agent.h): the frames over the agent's channel,
// and an AgentChannel per command started through it. AgentChannel behaves like an ssh::Channel
// (same handlers, write/close_stdin/close, ExitInfo), so the discovery probes and the rank
// processes use it the way they used exec channels — but no new channel, no new login shell.
//
// Transport: a Stream — the SSH exec channel the preflight left open (ssh_stream.h), or a
// local child's socket (pipe_stream.h: srun, or the launcher's own host's agent). Threading:
// single-threaded; handlers run inside the transport's delivery (Session::pump(), or the io_context
// for pipes). Nothing here blocks.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/agent/frame.h"
#include "cli/agent/liveness.h"
#include "cli/agent/process_state.h"
#include "ssh/channel.h"

namespace hora::cli::agent {

// What AgentLink needs from the channel that carries its frames, and what an event loop needs to
// drive it: wait on fd() for interest(), then call pump(), which delivers what arrived to the
// link (on_data/on_closed) and sends what is queued. Writers call kick() afterwards so the owner's
// loop (discovery's poll, the supervisor's StreamDriver) notices new output.
class Stream {
 public:
  struct Interest {
    bool read = false;
    bool write = false;
    bool again = false;  // pump() stopped early: call it again without waiting
  };

  virtual ~Stream() = default;
  // Queues bytes for the agent's stdin.
  virtual void write(std::string_view data) = 0;
  // Ends the agent: closes its stdin (and the channel). The agent stops every child.
  virtual void close() = 0;
  virtual int fd() const = 0;
  virtual Interest interest() const = 0;
  virtual void pump() = 0;
  // Kills the agent process `pid` by another way than this stream (an agent that stopped
  // answering, SIGSTOPped or hung, does not read the close): over SSH, a second exec channel on
  // the host's session runs `kill -KILL`, bounded by `deadline`. Returns what went wrong (empty:
  // killed); a stream with no such way says so.
  virtual std::string kill_agent(std::uint32_t pid, Liveness::Clock::time_point deadline) {
    (void)pid;
    (void)deadline;
    return "this transport cannot reach the agent's host by another way";
  }

  void set_kick(std::function<void()> kick) { kick_ = std::move(kick); }
  void kick() {
    if (kick_) kick_();
  }

 private:
  std::function<void()> kick_;
};

class AgentLink;
class RelayHub;

// One command the agent runs (a guard, a probe).
class AgentChannel {
 public:
  using Handlers = ssh::Channel::Handlers;

  void write(std::string_view data);
  void close_stdin();
  // Closes the child's stdin/stdout/stderr now; on_exit follows with error "closed by us" unless
  // the command had already finished.
  void close();
  bool done() const { return exit_.has_value(); }
  const std::optional<ssh::ExitInfo>& exit() const { return exit_; }
  // The child's pid on the agent's host, once its STARTED frame came (agents started with
  // --report-pids only); -1 before or without.
  int pid() const { return pid_; }
  // What the agent last said of the child's rank (a STATE frame): stopped, traced or in D, with
  // its pid on the agent's host; nullopt while it runs.
  const std::optional<StuckProcess>& reported_state() const { return reported_state_; }

 private:
  friend class AgentLink;
  AgentChannel(AgentLink* link, std::uint32_t id, Handlers handlers)
      : link_(link), id_(id), handlers_(std::move(handlers)) {}
  void complete(ssh::ExitInfo info);

  AgentLink* link_;
  std::uint32_t id_;
  Handlers handlers_;
  bool stdin_closed_ = false;
  bool closed_ = false;
  int pid_ = -1;
  std::optional<StuckProcess> reported_state_;
  std::optional<ssh::ExitInfo> exit_;
};

class AgentLink {
 public:
  // `host` names the host in messages ("h1 (198.18.0.11:12345)").
  AgentLink(std::string host, std::unique_ptr<Stream> stream);
  ~AgentLink();
  AgentLink(const AgentLink&) = delete;
  AgentLink& operator=(const AgentLink&) = delete;

  // Starts `<horarun> ARGS...` on the host in `cwd` (empty: the agent's directory).
  std::shared_ptr<AgentChannel> exec(const std::string& cwd, const std::vector<std::string>& args,
                                     AgentChannel::Handlers handlers);

  // From the transport: bytes the agent wrote on stdout, and the end of the channel (`why`
  // says how; every command still running completes with it as its error).
  void on_data(std::string_view data);
  void on_closed(const std::string& why);

  // How completions that must not run inside the caller's call (AgentChannel::close) are run
  // later; default: at the next on_data/on_closed. The launcher posts them to its io_context.
  void set_defer(std::function<void(std::function<void()>)> defer) { defer_ = std::move(defer); }

  // Sends a RELAY_* frame (the fan-out tree, relay_stream.h), split into chunks when it is data.
  void send_relay(FrameType type, std::uint32_t id, std::string_view payload);
  // The hub that sorts this agent's RELAY_* frames by relayed host; made on first use.
  std::shared_ptr<RelayHub> relay_hub();

  // Stops the agent (closes the channel).
  void close();
  // Ends the link because of the agent (its liveness timeout): closes the channel, and every
  // command completes with `why`, which failure() then gives.
  void fail(const std::string& why);

  // Liveness (liveness.h): when something last came from the agent; the launcher's watchdog
  // reads it.
  const Liveness& liveness() const { return liveness_; }
  void heard_now() { liveness_.heard(Liveness::Clock::now()); }
  // The agent's pid on its host, from its heartbeats (0 before the first).
  std::uint32_t agent_pid() const { return agent_pid_; }
  // The agent as the cause of its commands' end, for the job's verdict: "the agent on h2 (...)
  // was terminated by signal 15 (SIGTERM)", "... ended (killed by signal KILL)", "... stopped
  // answering ...", or the relaying host's for a relayed one; a relaying agent's names the hosts
  // it relayed. Empty while the agent runs normally and after horarun stopped it.
  std::string failure() const;
  // A relayed host's link: the hub of its relaying host (failure() defers to that host's).
  void set_relay_via(std::shared_ptr<RelayHub> hub) { via_ = std::move(hub); }
  bool closed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  const std::string& host() const { return host_; }
  Stream& stream() { return *stream_; }
  std::size_t active() const { return channels_.size(); }

 private:
  friend class AgentChannel;
  void send(FrameType type, std::uint32_t id, std::string_view payload);
  void forget(std::uint32_t id) { channels_.erase(id); }
  void run_deferred();

  std::string host_;
  std::unique_ptr<Stream> stream_;
  FrameDecoder decoder_;
  std::uint32_t next_id_ = 1;
  std::map<std::uint32_t, std::weak_ptr<AgentChannel>> channels_;
  std::function<void(std::function<void()>)> defer_;
  std::vector<std::function<void()>> deferred_;
  std::string error_;
  std::shared_ptr<RelayHub> relay_;
  Liveness liveness_{Liveness::Clock::now()};
  std::uint32_t agent_pid_ = 0;
  std::string ending_;   // the agent's ENDING: why it ends by itself
  bool failed_ = false;  // ended by the agent's side (not by close())
  std::shared_ptr<RelayHub> via_;
};

}  // namespace hora::cli::agent
