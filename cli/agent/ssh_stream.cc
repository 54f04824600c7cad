#include "cli/agent/ssh_stream.h"

#include <fmt/format.h>

#include "common/text.h"

#include "cli/output/line_splitter.h"
#include "cli/output/log.h"

namespace hora::cli::agent {

SshStream::~SshStream() {
  // The link that the handlers point at is going away with this stream.
  channel_->set_handlers({});
  if (!channel_->done()) channel_->close();
  session_.pump();  // sends the close, so the agent sees EOF at once
}

std::string SshStream::kill_agent(std::uint32_t pid, Liveness::Clock::time_point deadline) {
  // A SIGKILLed agent's guards get their parent-death signal and end their ranks; a relaying
  // agent's SSH connections close with it, and the agents behind it end on their stdin's EOF.
  try {
    const ssh::RunResult r = session_.run(fmt::format("kill -KILL {}", pid), "", deadline);
    if (r.exit_status == 0 && r.exit_signal.empty()) return "";
    return fmt::format("`kill -KILL {}` ended with exit status {}{}: {}", pid, r.exit_status,
                       r.exit_signal.empty() ? "" : " (signal " + r.exit_signal + ")", trim(r.err));
  } catch (const std::exception& e) {
    return fmt::format("`kill -KILL {}` failed: {}", pid, e.what());
  }
}

Stream::Interest SshStream::interest() const {
  const ssh::Session::Interest in = session_.interest();
  return Interest{in.read, in.write, in.again};
}

std::unique_ptr<AgentLink> link_over_ssh(const std::string& host, ssh::Session& session,
                                         std::shared_ptr<ssh::Channel> channel,
                                         const std::string& rest) {
  auto s = std::make_unique<SshStream>(session, channel);
  auto link = std::make_unique<AgentLink>(host, std::move(s));
  AgentLink* l = link.get();
  ssh::Channel::Handlers h;
  h.on_stdout = [l](std::string_view d) { l->on_data(d); };
  // The agent writes to its stderr only about itself (a protocol error, a failed poll).
  auto err_lines = std::make_shared<LineSplitter>();
  h.on_stderr = [l, err_lines](std::string_view d) {
    err_lines->feed(d, [l](std::string_view line) {
      launcher_log()->warn("{}: {}", l->host(), line);
    });
  };
  h.on_exit = [l](const ssh::ExitInfo& e) {
    l->on_closed(e.error.empty()
                     ? "the agent on " + l->host() + " ended (" + e.describe() + ")"
                     : "the connection to the agent on " + l->host() + " ended: " + e.error);
  };
  channel->set_handlers(std::move(h));
  if (!rest.empty()) l->on_data(rest);
  if (channel->done()) l->on_closed("the agent on " + host + " ended before it was used");
  return link;
}

}  // namespace hora::cli::agent
