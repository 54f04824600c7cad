#include "cli/agent/agent_link.h"

#include <string.h>

#include <fmt/format.h>

#include "cli/agent/relay_stream.h"

namespace hora::cli::agent {

// ---- AgentChannel ---------------------------------------------------------------------------

void AgentChannel::write(std::string_view data) {
  if (done() || stdin_closed_ || closed_ || link_->closed()) return;
  std::string out;
  append_chunked(out, FrameType::kStdin, id_, data);
  link_->stream_->write(out);
  link_->stream_->kick();
}

void AgentChannel::close_stdin() {
  if (done() || stdin_closed_ || closed_) return;
  stdin_closed_ = true;
  link_->send(FrameType::kStdinEof, id_, {});
}

void AgentChannel::close() {
  if (done() || closed_) return;
  closed_ = true;
  link_->send(FrameType::kClose, id_, {});
  // Like ssh::Channel::close(): the command's end is not waited for; the handler runs later,
  // never inside this call.
  AgentLink* link = link_;
  std::weak_ptr<AgentChannel> self;
  if (auto it = link->channels_.find(id_); it != link->channels_.end()) self = it->second;
  link->forget(id_);
  auto finish = [self] {
    if (auto ch = self.lock()) {
      ssh::ExitInfo info;
      info.error = "closed by us";
      ch->complete(info);
    }
  };
  if (link->defer_) {
    link->defer_(finish);
  } else {
    link->deferred_.push_back(finish);
  }
}

void AgentChannel::complete(ssh::ExitInfo info) {
  if (exit_) return;
  exit_ = std::move(info);
  if (handlers_.on_exit) handlers_.on_exit(*exit_);
}

// ---- AgentLink ------------------------------------------------------------------------------

AgentLink::AgentLink(std::string host, std::unique_ptr<Stream> stream)
    : host_(std::move(host)), stream_(std::move(stream)) {}

AgentLink::~AgentLink() {
  if (relay_) relay_->detach_parent(fmt::format("the link to the agent on {} was dropped", host_));
  if (!closed()) stream_->close();
}

std::shared_ptr<RelayHub> AgentLink::relay_hub() {
  if (!relay_) relay_ = std::make_shared<RelayHub>(this);
  return relay_;
}

void AgentLink::send_relay(FrameType type, std::uint32_t id, std::string_view payload) {
  if (closed()) return;
  std::string out;
  if (type == FrameType::kRelayData) {
    append_chunked(out, type, id, payload);
  } else {
    append_frame(out, type, id, payload);
  }
  stream_->write(out);
  stream_->kick();
}

std::shared_ptr<AgentChannel> AgentLink::exec(const std::string& cwd,
                                              const std::vector<std::string>& args,
                                              AgentChannel::Handlers handlers) {
  const std::uint32_t id = next_id_++;
  std::shared_ptr<AgentChannel> ch(new AgentChannel(this, id, std::move(handlers)));
  if (closed()) {
    ssh::ExitInfo info;
    info.error = error_;
    auto finish = [ch, info] { ch->complete(info); };
    if (defer_) {
      defer_(finish);
    } else {
      deferred_.push_back(finish);
    }
    return ch;
  }
  channels_.emplace(id, ch);
  send(FrameType::kOpen, id, encode_open(OpenRequest{cwd, args}));
  return ch;
}

void AgentLink::send(FrameType type, std::uint32_t id, std::string_view payload) {
  if (closed()) return;
  std::string out;
  append_frame(out, type, id, payload);
  stream_->write(out);
  stream_->kick();
}

void AgentLink::run_deferred() {
  std::vector<std::function<void()>> now;
  now.swap(deferred_);
  for (auto& f : now) f();
}

void AgentLink::on_data(std::string_view data) {
  run_deferred();
  if (!data.empty()) liveness_.heard(Liveness::Clock::now());
  decoder_.feed(data);
  while (std::optional<Frame> f = decoder_.next()) {
    if (f->type == FrameType::kHeartbeat) {
      if (const std::optional<std::uint32_t> pid = decode_pid(f->payload)) agent_pid_ = *pid;
      continue;
    }
    if (f->type == FrameType::kEnding) {
      if (ending_.empty()) ending_ = f->payload.empty() ? std::string("is ending") : f->payload;
      continue;
    }
    if (f->type == FrameType::kRelayReady || f->type == FrameType::kRelayOutput ||
        f->type == FrameType::kRelayStderr || f->type == FrameType::kRelayEnded ||
        f->type == FrameType::kRelayKilled) {
      if (relay_) relay_->on_frame(*f);
      continue;
    }
    const auto it = channels_.find(f->id);
    if (it == channels_.end()) continue;  // closed by us: what it still sends is dropped
    std::shared_ptr<AgentChannel> ch = it->second.lock();
    if (!ch) {
      if (f->type == FrameType::kExit || f->type == FrameType::kFailed) channels_.erase(it);
      continue;
    }
    switch (f->type) {
      case FrameType::kStdout:
        if (ch->handlers_.on_stdout) ch->handlers_.on_stdout(f->payload);
        break;
      case FrameType::kStderr:
        if (ch->handlers_.on_stderr) ch->handlers_.on_stderr(f->payload);
        break;
      case FrameType::kExit: {
        channels_.erase(f->id);
        ssh::ExitInfo info;
        const std::optional<ExitCode> code = decode_exit(f->payload);
        if (!code) {
          info.error = fmt::format("the agent on {} sent a malformed EXIT", host_);
        } else if (code->signal != 0) {
          const char* name = ::sigabbrev_np(static_cast<int>(code->signal));
          info.exit_signal = name != nullptr ? name : fmt::format("{}", code->signal);
        } else {
          info.exit_status = static_cast<int>(code->status);
        }
        ch->complete(info);
        break;
      }
      case FrameType::kStarted:
        if (const std::optional<std::uint32_t> pid = decode_pid(f->payload)) {
          ch->pid_ = static_cast<int>(*pid);
        }
        break;
      case FrameType::kState:
        if (f->payload.empty()) {
          ch->reported_state_.reset();
        } else if (const std::optional<std::uint32_t> pid =
                       decode_pid(std::string_view(f->payload).substr(1))) {
          ch->reported_state_ = StuckProcess{static_cast<pid_t>(*pid), f->payload[0]};
        }
        break;
      case FrameType::kFailed: {
        channels_.erase(f->id);
        ssh::ExitInfo info;
        info.error = fmt::format("the agent on {} could not start it: {}", host_, f->payload);
        ch->complete(info);
        break;
      }
      default: break;
    }
  }
  if (!decoder_.error().empty()) {
    const std::string why = fmt::format(
        "the agent on {} sent something that is not a frame ({}); install the same "
        "hora on every host",
        host_, decoder_.error());
    stream_->close();
    on_closed(why);
  }
}

void AgentLink::on_closed(const std::string& why) {
  run_deferred();
  if (!closed()) {
    failed_ = true;
    if (!ending_.empty()) {
      error_ = fmt::format("the agent on {} {}", host_, ending_);
    } else {
      error_ = why.empty() ? fmt::format("the agent on {} ended", host_) : why;
    }
  }
  auto open = std::move(channels_);
  channels_.clear();
  for (auto& [id, weak] : open) {
    if (auto ch = weak.lock()) {
      ssh::ExitInfo info;
      info.error = error_;
      ch->complete(info);
    }
  }
  // The hosts this agent carried end after its own commands: the first error names the cause.
  if (relay_) {
    const std::string cause = failure();
    relay_->on_parent_closed(cause.empty() ? error_ : cause);
  }
}

void AgentLink::close() {
  if (closed()) return;
  stream_->close();
  stream_->kick();
  error_ = fmt::format("the agent on {} was stopped by horarun", host_);
  on_closed(error_);
}

void AgentLink::fail(const std::string& why) {
  if (closed()) return;
  stream_->close();
  stream_->kick();
  on_closed(why);
}

std::string AgentLink::failure() const {
  if (via_) {
    std::string parent = via_->parent_failure();
    if (!parent.empty()) return parent;
  }
  std::string what;
  if (!ending_.empty()) {
    what = fmt::format("the agent on {} {}", host_, ending_);
  } else if (failed_) {
    what = error_;
  } else {
    return "";
  }
  if (relay_) {
    const std::vector<std::string> behind = relay_->host_names();
    if (!behind.empty()) {
      std::string list;
      for (const std::string& h : behind) list += (list.empty() ? "" : ", ") + h;
      what += fmt::format(" (it relayed {}, whose ranks were lost with it)", list);
    }
  }
  return what;
}

}  // namespace hora::cli::agent
