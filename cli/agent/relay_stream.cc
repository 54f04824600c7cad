#include "cli/agent/relay_stream.h"

#include <fmt/format.h>

#include "cli/agent/stream_poll.h"
#include "cli/output/log.h"
#include "common/duration.h"

namespace hora::cli::agent {

// ---- RelayHub -------------------------------------------------------------------------------

void RelayHub::open(const RelayOpen& open) {
  for (const RelayTarget& t : open.hosts) {
    Host& h = hosts_[t.id];
    h.name = t.target.describe();
    ++waiting_;
  }
  if (parent_ == nullptr || parent_->closed()) {
    // Also when an earlier RELAY_OPEN already learnt it: these hosts end and are not waited for.
    std::string why = parent_error_;
    if (why.empty() && parent_ != nullptr) why = parent_->error();
    end_all(why.empty() ? "the relaying agent ended" : why, true);
    return;
  }
  parent_->send_relay(FrameType::kRelayOpen, 0, encode_relay_open(open));
}

const std::optional<RelayReady>& RelayHub::ready(std::uint32_t id) const {
  static const std::optional<RelayReady> kNone;
  const auto it = hosts_.find(id);
  return it == hosts_.end() ? kNone : it->second.ready;
}

void RelayHub::on_frame(const Frame& f) {
  const auto it = hosts_.find(f.id);
  if (it == hosts_.end()) return;
  Host& h = it->second;
  switch (f.type) {
    case FrameType::kRelayReady: {
      if (h.ready) return;
      std::optional<RelayReady> r = decode_relay_ready(f.payload);
      if (!r) {
        r.emplace();
        r->error = fmt::format(
            "{}: the relaying agent sent a malformed RELAY_READY; install the "
            "same hora on every host",
            h.name);
      }
      h.ready = std::move(r);
      --waiting_;
      break;
    }
    case FrameType::kRelayOutput:
      if (h.ended) return;  // nothing follows RELAY_ENDED; a link that ended takes nothing
      if (h.stream != nullptr) {
        h.stream->deliver(f.payload);
      } else {
        h.early += f.payload;
      }
      break;
    case FrameType::kRelayStderr:
      // The agent writes to its stderr only about itself (a protocol error, a failed poll).
      h.err_lines.feed(f.payload, [&](std::string_view line) {
        launcher_log()->warn("{}: {}", h.name, line);
      });
      break;
    case FrameType::kRelayKilled: h.killed = f.payload; break;
    case FrameType::kRelayEnded:
      if (h.ended) return;
      h.ended = f.payload.empty() ? std::string("its agent ended") : f.payload;
      if (h.stream != nullptr) h.stream->ended();
      break;
    default: break;
  }
}

std::vector<std::string> RelayHub::host_names() const {
  std::vector<std::string> names;
  for (const auto& [id, h] : hosts_) {
    if (!h.name.empty()) names.push_back(h.name);
  }
  return names;
}

std::string RelayHub::parent_failure() const {
  if (parent_ != nullptr) {
    std::string f = parent_->failure();
    if (!f.empty()) return f;
  }
  return parent_error_;
}

void RelayHub::on_parent_closed(const std::string& why) {
  if (!parent_error_.empty()) return;
  end_all(why.empty() ? "the relaying agent ended" : why, true);
}

void RelayHub::detach_parent(const std::string& why) {
  parent_ = nullptr;
  if (parent_error_.empty()) end_all(why, false);
}

void RelayHub::end_all(const std::string& why, bool tell_streams) {
  parent_error_ = why;
  waiting_ = 0;
  for (auto& [id, h] : hosts_) {
    if (h.ended) continue;
    h.ended = fmt::format("it was reached through another host, and {}", why);
    if (tell_streams && h.stream != nullptr) h.stream->ended();
  }
}

std::string RelayHub::kill(std::uint32_t id, std::uint32_t pid,
                           Liveness::Clock::time_point deadline) {
  const auto it = hosts_.find(id);
  if (it == hosts_.end()) return "this host is not relayed by that agent";
  if (parent_ == nullptr || parent_->closed()) {
    return "its relaying agent ended, and with it the only way there";
  }
  it->second.killed.reset();
  const auto started = Liveness::Clock::now();
  parent_->send_relay(FrameType::kRelayKill, id, encode_pid(pid));
  AgentLink* parent = parent_;
  const bool answered = pump_streams_until({&parent->stream()}, deadline, [&] {
    const auto h = hosts_.find(id);
    return h == hosts_.end() || h->second.killed.has_value() || parent_ == nullptr ||
           parent->closed();
  });
  const auto h = hosts_.find(id);
  if (h != hosts_.end() && h->second.killed) return *h->second.killed;
  if (!answered) {
    return fmt::format("the relaying agent on {} did not answer RELAY_KILL within {}",
                       parent->host(),
                       hora::format_duration(std::chrono::duration_cast<std::chrono::milliseconds>(
                           Liveness::Clock::now() - started)));
  }
  return "its relaying agent ended before it answered";
}

std::unique_ptr<RelayStream> RelayHub::stream(std::uint32_t id) {
  // Each stream holds the hub: it outlives the relaying host's link if need be.
  Host& h = hosts_.at(id);
  auto s = std::make_unique<RelayStream>(shared_from_this(), id);
  if (h.ready) s->pending_ = h.ready->started_rest;
  s->pending_ += h.early;
  h.early.clear();
  h.stream = s.get();
  return s;
}

// ---- RelayStream ----------------------------------------------------------------------------

RelayStream::~RelayStream() {
  if (auto it = hub_->hosts_.find(id_); it != hub_->hosts_.end()) it->second.stream = nullptr;
  link_ = nullptr;
  close();
}

void RelayStream::write(std::string_view data) {
  if (closed_ || hub_->parent_ == nullptr) return;
  hub_->parent_->send_relay(FrameType::kRelayData, id_, data);
}

void RelayStream::close() {
  if (closed_) return;
  closed_ = true;
  if (hub_->parent_ != nullptr) {
    hub_->parent_->send_relay(FrameType::kRelayClose, id_, {});
  }
}

void RelayStream::pump() {
  if (link_ == nullptr) return;
  if (!pending_.empty()) {
    std::string now;
    now.swap(pending_);
    link_->on_data(now);
  }
  const auto it = hub_->hosts_.find(id_);
  if (it != hub_->hosts_.end() && it->second.ended && !link_->closed()) {
    link_->on_closed(fmt::format("the agent on {} ended: {}", link_->host(), *it->second.ended));
  }
}

std::string RelayStream::kill_agent(std::uint32_t pid, Liveness::Clock::time_point deadline) {
  return hub_->kill(id_, pid, deadline);
}

void RelayStream::deliver(std::string_view data) {
  if (link_ == nullptr || !pending_.empty()) {
    pending_.append(data);
    if (link_ != nullptr) pump();
    return;
  }
  link_->on_data(data);
}

void RelayStream::ended() {
  closed_ = true;  // the relaying agent dropped the host already: no RELAY_CLOSE
  pump();          // delivers what came before, then tells the link (once it is attached)
}

std::unique_ptr<AgentLink> link_over_relay(const std::string& host,
                                           const std::shared_ptr<RelayHub>& hub, std::uint32_t id) {
  std::unique_ptr<RelayStream> s = hub->stream(id);
  RelayStream* raw = s.get();
  auto link = std::make_unique<AgentLink>(host, std::move(s));
  link->set_relay_via(hub);
  raw->attach(link.get());
  raw->pump();
  return link;
}

}  // namespace hora::cli::agent
