#include "cli/agent/relay_children.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "cli/agent/frame.h"

namespace hora::cli::agent {

namespace {

// What a RELAY_READY carries of a probe's output: the launcher reads the probe lines and the
// interface report; a flood on stderr must not push the frame past kMaxPayload.
constexpr std::size_t kMaxReadyOutput = 256u << 10;
constexpr std::size_t kMaxReadyError = 16u << 10;
// How long a closed host's session stays for a RELAY_KILL (the launcher sends it right after the
// RELAY_CLOSE of an agent that stopped answering, and waits kAgentKillTimeout for the answer):
// longer than that wait, so the kill still has its way there when it comes late.
constexpr auto kCloseLinger = std::chrono::seconds(20);

std::string capped(const std::string& s, std::size_t max) {
  return s.size() <= max ? s : s.substr(0, max) + "\n[... cut by the relaying agent]";
}

}  // namespace

RelayChildren::~RelayChildren() {
  hosts_.clear();
  // Each preflight ends by its own deadline; its sessions go with its results.
  for (auto& b : batches_) {
    if (b->thread.joinable()) b->thread.join();
  }
}

std::string RelayChildren::open(std::string_view payload) {
  std::optional<RelayOpen> req = decode_relay_open(payload);
  if (!req) return "malformed RELAY_OPEN (install the same hora on every host)";
  auto batch = std::make_unique<Batch>();
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
    return fmt::format("pipe: {}", std::strerror(errno));
  }
  batch->wake_read.reset(p[0]);
  batch->wake_write.reset(p[1]);
  batch->pending = std::make_shared<Pending>();
  batch->pending->targets = std::move(req->hosts);
  const auto deadline = ssh::Clock::now() + req->timeout;
  ssh::PreflightOptions options;
  options.connect = ssh::ConnectOptions::from_environment();
  options.keep_sessions = true;
  options.max_connecting = req->max_connecting;
  std::shared_ptr<Pending> pending = batch->pending;
  const int wake = batch->wake_write.get();
  auto run = [pending, options, deadline, wake] {
    std::vector<ssh::ProbeResult> results;
    try {
      std::vector<ssh::ProbeRequest> requests;
      for (const RelayTarget& t : pending->targets) {
        requests.emplace_back(t.target, t.command, std::string(), t.marker);
      }
      results = ssh::probe_hosts(requests, options, deadline);
    } catch (const std::exception& e) {
      // No thread or no memory for the preflight: every host of it fails, saying so.
      results.clear();
      results.resize(pending->targets.size());
      for (std::size_t i = 0; i < results.size(); ++i) {
        results[i].target = pending->targets[i].target;
        results[i].error_message =
            fmt::format("{}: the relaying agent could not run its preflight: {}",
                        pending->targets[i].target.describe(), e.what());
        results[i].error = std::make_exception_ptr(std::runtime_error(results[i].error_message));
      }
    }
    {
      std::lock_guard<std::mutex> lock(pending->mu);
      pending->results = std::move(results);
      pending->done = true;
    }
    (void)!::write(wake, "x", 1);
  };
  try {
    batch->thread = std::thread(run);
  } catch (const std::system_error& e) {
    return fmt::format("cannot start a thread: {}", e.what());
  }
  batches_.push_back(std::move(batch));
  return {};
}

void RelayChildren::take_results(Batch& batch) {
  batch.thread.join();
  std::shared_ptr<Pending> pending = std::move(batch.pending);
  for (std::size_t i = 0; i < pending->results.size(); ++i) {
    ssh::ProbeResult& r = pending->results[i];
    const std::uint32_t id = pending->targets[i].id;
    RelayReady ready;
    ready.error = r.ok() ? std::string() : r.error_message;
    if (ready.error.empty() && hosts_.count(id) != 0) {
      ready.error = fmt::format("{}: relayed host id {} is already in use; this is a horarun bug",
                                r.target.describe(), id);
    }
    ready.ran = r.run.has_value();
    if (r.run) {
      ready.run = *r.run;
      ready.run.out = capped(ready.run.out, kMaxReadyOutput);
      ready.run.err = capped(ready.run.err, kMaxReadyError);
    }
    ready.started = ready.error.empty() && r.started != nullptr && !closing_;
    ready.started_rest = capped(r.started_rest, kMaxReadyOutput);
    ready.local_address = r.local_address;
    if (r.session) ready.remote_endpoint = r.session->remote_endpoint();
    append_frame(out_, FrameType::kRelayReady, id, encode_relay_ready(ready));
    if (!ready.started || !r.session) continue;
    ssh::Channel::Handlers h;
    h.on_stdout = [this, id](std::string_view d) {
      append_chunked(out_, FrameType::kRelayOutput, id, d);
    };
    h.on_stderr = [this, id](std::string_view d) {
      append_chunked(out_, FrameType::kRelayStderr, id, d);
    };
    h.on_exit = [this, id](const ssh::ExitInfo& e) {
      ended(id, e.error.empty() ? "its agent ended (" + e.describe() + ")"
                                : "the connection to its agent ended: " + e.error);
    };
    r.started->set_handlers(std::move(h));
    Host& host = hosts_[id];
    host.session = std::move(r.session);
    host.channel = std::move(r.started);
    if (host.channel->done()) ended(id, "its agent ended before it was used");
  }
}

void RelayChildren::ended(std::uint32_t id, const std::string& why) {
  const auto it = hosts_.find(id);
  if (it == hosts_.end()) return;
  append_frame(out_, FrameType::kRelayEnded, id, why);
  // The session goes at the next pump(): this may run inside it.
  it->second.channel.reset();
}

void RelayChildren::data(std::uint32_t id, std::string_view bytes) {
  const auto it = hosts_.find(id);
  if (it != hosts_.end() && it->second.channel) it->second.channel->write(bytes);
}

void RelayChildren::close(std::uint32_t id) {
  const auto it = hosts_.find(id);
  if (it == hosts_.end()) return;
  Host& host = it->second;
  if (!host.channel || host.channel->done()) {
    hosts_.erase(it);
    return;
  }
  // Closing the channel ends the agent's stdin (it stops its ranks); the session goes when the
  // channel is done. A stopped agent reads nothing, and the launcher's RELAY_KILL follows this
  // close: the session stays for it a while (pump()).
  host.channel->set_handlers({});
  host.channel->close();
  host.closed_until = std::chrono::steady_clock::now() + kCloseLinger;
  host.session->pump();
}

void RelayChildren::kill(std::uint32_t id, std::string_view payload) {
  const std::optional<std::uint32_t> pid = decode_pid(payload);
  const auto it = hosts_.find(id);
  if (!pid || *pid == 0) {
    append_frame(out_, FrameType::kRelayKilled, id, "malformed RELAY_KILL");
    return;
  }
  if (it == hosts_.end() || !it->second.session || it->second.kill) {
    append_frame(out_, FrameType::kRelayKilled, id,
                 it == hosts_.end() || !it->second.session
                     ? "the relaying agent has no connection to that host any more"
                     : "a kill is already running there");
    return;
  }
  // The answer comes from the command's end; the stopped agent's channel may end first (it
  // dies), so the host is kept until this channel is done (pump()).
  auto err = std::make_shared<std::string>();
  ssh::Channel::Handlers h;
  h.on_stderr = [err](std::string_view d) {
    if (err->size() < 4096) err->append(d);
  };
  h.on_exit = [this, id, pid = *pid, err](const ssh::ExitInfo& e) {
    std::string why;
    if (!e.error.empty()) {
      why = fmt::format("`kill -KILL {}` failed: {}", pid, e.error);
    } else if (e.exit_status != 0 || !e.exit_signal.empty()) {
      why = fmt::format("`kill -KILL {}` ended ({}): {}", pid, e.describe(), *err);
    }
    append_frame(out_, FrameType::kRelayKilled, id, why);
  };
  it->second.kill = it->second.session->exec(fmt::format("kill -KILL {}", *pid), std::move(h));
  it->second.session->pump();
}

void RelayChildren::close_all() {
  closing_ = true;
  for (auto& [id, host] : hosts_) {
    if (host.channel) host.channel->set_handlers({});
    if (host.kill) host.kill->set_handlers({});
  }
  hosts_.clear();
}

bool RelayChildren::add_pollfds(std::vector<pollfd>& fds, bool room) const {
  bool again = false;
  for (const auto& b : batches_) fds.push_back({b->wake_read.get(), POLLIN, 0});
  for (const auto& [id, host] : hosts_) {
    if (!host.session) continue;
    const ssh::Session::Interest in = host.session->interest();
    short events = 0;
    if (in.read && room) events |= POLLIN;
    if (in.write) events |= POLLOUT;
    const bool killing = host.kill && !host.kill->done();
    if (killing) events |= POLLIN;
    again = again || (in.again && (room || killing));
    // Without room nothing is read: a reset socket would report POLLHUP at once, every time.
    if (events != 0) fds.push_back({host.session->fd(), events, 0});
  }
  return again;
}

void RelayChildren::pump(bool room) {
  for (auto it = batches_.begin(); it != batches_.end();) {
    Batch& b = **it;
    char buf[16];
    while (::read(b.wake_read.get(), buf, sizeof buf) > 0) {
    }
    bool done = false;
    {
      std::lock_guard<std::mutex> lock(b.pending->mu);
      done = b.pending->done;
    }
    if (done) {
      take_results(b);
      it = batches_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = hosts_.begin(); it != hosts_.end();) {
    Host& host = it->second;
    // A kill is moved along even without room: its host's agent is stopped and sends little.
    const bool killing = host.kill && !host.kill->done();
    if (host.session && (room || killing || host.closed_until || host.session->interest().write)) {
      host.session->pump();
    }
    const bool closed =
        host.closed_until && (!host.channel || host.channel->done() ||
                              std::chrono::steady_clock::now() >= *host.closed_until);
    if ((!host.channel || closed) && !(host.kill && !host.kill->done())) {
      it = hosts_.erase(it);  // ended: RELAY_ENDED is queued
    } else {
      ++it;
    }
  }
}

}  // namespace hora::cli::agent
