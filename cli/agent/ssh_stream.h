// An agent's channel over SSH: the exec channel the preflight started `horarun --agent` on
// (ssh::Session::start_until), wired to an AgentLink. The stream pumps the host's session, which
// carries nothing but this channel.
#pragma once

#include <memory>
#include <string>

#include "cli/agent/agent_link.h"
#include "ssh/channel.h"
#include "ssh/session.h"

namespace hora::cli::agent {

class SshStream : public Stream {
 public:
  // `session` must outlive the stream.
  SshStream(ssh::Session& session, std::shared_ptr<ssh::Channel> channel)
      : session_(session), channel_(std::move(channel)) {}
  ~SshStream() override;

  void write(std::string_view data) override { channel_->write(data); }
  void close() override { channel_->close(); }
  int fd() const override { return session_.fd(); }
  Interest interest() const override;
  void pump() override { session_.pump(); }
  std::string kill_agent(std::uint32_t pid, Liveness::Clock::time_point deadline) override;

 private:
  ssh::Session& session_;
  std::shared_ptr<ssh::Channel> channel_;
};

// An AgentLink over `channel` on `session`, which runs the agent past its ready line; `rest` is
// what the agent sent after that line (normally nothing). The agent's own stderr lines are logged
// as warnings naming `host`.
std::unique_ptr<AgentLink> link_over_ssh(const std::string& host, ssh::Session& session,
                                         std::shared_ptr<ssh::Channel> channel,
                                         const std::string& rest);

}  // namespace hora::cli::agent
