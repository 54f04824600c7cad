#include "cli/agent/relay_children.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "cli/agent/frame.h"

namespace hora::cli::agent {

RelayChildren::~RelayChildren() {
  hosts_.clear();
  // The preflight ends by its own deadline; its sessions go with its results.
  if (thread_.joinable()) thread_.join();
}

std::string RelayChildren::open(std::string_view payload) {
  if (running_ || thread_.joinable()) return "a RELAY_OPEN is already being handled";
  std::optional<RelayOpen> req = decode_relay_open(payload);
  if (!req) return "malformed RELAY_OPEN (install the same hora on every host)";
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
    return fmt::format("pipe: {}", std::strerror(errno));
  }
  wake_read_.reset(p[0]);
  wake_write_.reset(p[1]);
  pending_ = std::make_shared<Pending>();
  pending_->targets = std::move(req->hosts);
  const auto deadline = ssh::Clock::now() + req->timeout;
  ssh::PreflightOptions options;
  options.connect = ssh::ConnectOptions::from_environment();
  options.keep_sessions = true;
  options.max_connecting = req->max_connecting;
  std::shared_ptr<Pending> pending = pending_;
  const int wake = wake_write_.get();
  try {
    thread_ = std::thread([pending, options, deadline, wake] {
      std::vector<ssh::ProbeRequest> requests;
      for (const RelayTarget& t : pending->targets) {
        requests.emplace_back(t.target, t.command, std::string(), t.marker);
      }
      std::vector<ssh::ProbeResult> results = ssh::probe_hosts(requests, options, deadline);
      {
        std::lock_guard<std::mutex> lock(pending->mu);
        pending->results = std::move(results);
        pending->done = true;
      }
      (void)!::write(wake, "x", 1);
    });
  } catch (const std::system_error& e) {
    pending_.reset();
    return fmt::format("cannot start a thread: {}", e.what());
  }
  running_ = true;
  return {};
}

void RelayChildren::take_results() {
  char buf[16];
  while (::read(wake_read_.get(), buf, sizeof buf) > 0) {
  }
  {
    std::lock_guard<std::mutex> lock(pending_->mu);
    if (!pending_->done) return;
  }
  thread_.join();
  running_ = false;
  std::shared_ptr<Pending> pending = std::move(pending_);
  for (std::size_t i = 0; i < pending->results.size(); ++i) {
    ssh::ProbeResult& r = pending->results[i];
    const std::uint32_t id = pending->targets[i].id;
    RelayReady ready;
    ready.error = r.ok() ? std::string() : r.error_message;
    ready.ran = r.run.has_value();
    if (r.run) ready.run = *r.run;
    ready.started = r.started != nullptr && !closing_;
    ready.started_rest = r.started_rest;
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
  if (it->second.channel) it->second.channel->set_handlers({});
  // Dropping the session closes the connection: the host's agent sees its stdin end.
  hosts_.erase(it);
}

void RelayChildren::close_all() {
  closing_ = true;
  for (auto& [id, host] : hosts_) {
    if (host.channel) host.channel->set_handlers({});
  }
  hosts_.clear();
}

bool RelayChildren::add_pollfds(std::vector<pollfd>& fds, bool room) const {
  bool again = false;
  if (running_) fds.push_back({wake_read_.get(), POLLIN, 0});
  for (const auto& [id, host] : hosts_) {
    if (!host.session) continue;
    const ssh::Session::Interest in = host.session->interest();
    short events = 0;
    if (in.read && room) events |= POLLIN;
    if (in.write) events |= POLLOUT;
    again = again || (in.again && room);
    fds.push_back({host.session->fd(), events, 0});
  }
  return again;
}

void RelayChildren::pump(bool room) {
  if (running_) take_results();
  for (auto it = hosts_.begin(); it != hosts_.end();) {
    Host& host = it->second;
    if (host.session && (room || host.session->interest().write)) host.session->pump();
    if (!host.channel) {
      it = hosts_.erase(it);  // ended: RELAY_ENDED is queued
    } else {
      ++it;
    }
  }
}

}  // namespace hora::cli::agent
