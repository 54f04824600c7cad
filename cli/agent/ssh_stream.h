// An agent's channel over SSH: the exec channel the preflight started `horarun --agent` on
// (ssh::Session::start_until), wired to an AgentLink. The session is pumped by its owner —
// discovery's poll loop, then the supervisor's SessionDriver — which set_kick() tells the stream
// about, so frames written between pumps go out.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cli/agent/agent_link.h"
#include "ssh/channel.h"

namespace hora::cli::agent {

class SshStream : public Stream {
 public:
  SshStream(std::shared_ptr<ssh::Channel> channel) : channel_(std::move(channel)) {}
  ~SshStream() override;

  void write(std::string_view data) override;
  void close() override;
  // Called after every write/close; default none (the owner pumps the session anyway).
  void set_kick(std::function<void()> kick) { kick_ = std::move(kick); }

 private:
  std::shared_ptr<ssh::Channel> channel_;
  std::function<void()> kick_;
};

// An AgentLink over `channel`, which runs the agent past its ready line; `rest` is what the
// agent sent after that line (normally nothing). The agent's own stderr lines are logged as
// warnings naming `host`. `stream` (optional) receives the stream, for set_kick().
std::unique_ptr<AgentLink> link_over_ssh(const std::string& host,
                                         std::shared_ptr<ssh::Channel> channel,
                                         const std::string& rest, SshStream** stream = nullptr);

}  // namespace hora::cli::agent
