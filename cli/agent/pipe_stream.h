// An agent's channel to a local child process: the child's stdin and stdout are one end of a
// socketpair, its stderr is horarun's. The child is `srun ... horarun --agent` under Slurm (one
// per node), or `horarun --agent --report-pids` for the launcher's own host (and in tests). The
// child runs in a process group of its own (a terminal's Ctrl-C reaches horarun alone, which ends
// the job in order, as for the guards) and gets no descriptor of horarun's but 0, 1 and 2. start()
// runs the child and reads up to the agent's ready line, like the SSH preflight does; link() then
// hands the socket to an AgentLink.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "cli/agent/agent_link.h"
#include "common/unique_fd.h"

namespace hora::cli::agent {

class PipeStream : public Stream {
 public:
  using Clock = std::chrono::steady_clock;

  // What start() read before the ready line (the agent's interface report, after any lines a
  // wrapper such as srun printed), and whether the line came.
  struct Started {
    bool ready = false;
    std::string before;   // stdout before the ready line
    std::string failure;  // when not ready: how the child ended or why it could not start
  };

  // `argv`: the command (argv[0] looked up in PATH, unless `file` names the program to run).
  explicit PipeStream(std::vector<std::string> argv, std::string file = {});
  ~PipeStream() override;
  // spawn() then wait_ready(): runs the command and reads its stdout up to kReadyLine or the
  // deadline. Never throws for the child's failure: it goes in Started::failure. Spawning many
  // first and then waiting for each starts them all at once.
  Started start(Clock::time_point deadline);
  // false with `error` set when the command could not be started.
  bool spawn(std::string& error);
  Started wait_ready(Clock::time_point deadline);

  void write(std::string_view data) override;
  void close() override;
  int fd() const override { return socket_.get(); }
  Interest interest() const override;
  void pump() override;
  // SIGKILLs the child when it is the agent `pid` itself (this machine's agent); under srun the
  // agent runs on another node and `pid` is not the child's.
  std::string kill_agent(std::uint32_t pid, Liveness::Clock::time_point deadline) override;

  // Where pump() delivers the agent's bytes; set by link().
  void attach(AgentLink* link) { link_ = link; }
  pid_t pid() const { return pid_; }

 private:
  void ended(const std::string& why);
  std::string reap_description();

  std::vector<std::string> argv_;
  std::string file_;
  UniqueFd socket_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int wstatus_ = 0;
  std::string out_;   // not yet written
  std::string rest_;  // read past the ready line, delivered at the first pump()
  bool closed_ = false;
  bool eof_ = false;
  AgentLink* link_ = nullptr;
};

// An AgentLink over `stream`, which start() brought to the ready line; `host` names it in
// messages.
std::unique_ptr<AgentLink> link_over_pipe(const std::string& host,
                                          std::unique_ptr<PipeStream> stream);

}  // namespace hora::cli::agent
