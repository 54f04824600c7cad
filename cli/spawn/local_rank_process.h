// A rank on this machine: posix_spawn of `/proc/self/exe --guard` with three pipes.
//
// The guard's stdin pipe carries the GuardRequest and later `terminate`; horarun keeps its
// write end for the whole job, so if horarun dies (even by SIGKILL) the kernel closes it and
// the guard ends the rank. stdout/stderr pipes are read with posix::stream_descriptor. The
// guard's exit is watched through a pidfd (readable when the process exits), then reaped with
// waitpid, so no SIGCHLD handler is needed.
#pragma once

#include <sys/types.h>

#include <array>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include "cli/spawn/rank_process.h"
#include "common/unique_fd.h"

namespace hora::cli {

class LocalRankProcess : public RankProcess {
 public:
  // `self_exe`: the horarun binary to run as the guard ("/proc/self/exe" works even if the
  // file was replaced on disk). `argv0`: what `ps` shows.
  LocalRankProcess(boost::asio::io_context& io, int rank, std::string host,
                   std::string self_exe = "/proc/self/exe", std::string argv0 = "horarun");
  ~LocalRankProcess() override;

  void start(const GuardRequest& request, Events events) override;
  void terminate() override;
  void kill() override;
  void close_output() override;
  bool running() const override { return pid_ > 0 && !exit_; }

  pid_t pid() const { return pid_; }
  int local_guard_pid() const override { return running() ? pid_ : -1; }

 private:
  void read_output(Stream stream);
  void watch_exit();
  std::string who() const;

  boost::asio::io_context& io_;
  int rank_;
  std::string host_;
  std::string self_exe_;
  std::string argv0_;
  Events events_;
  pid_t pid_ = -1;
  UniqueFd stdin_;  // write end of the guard's stdin
  std::array<std::unique_ptr<boost::asio::posix::stream_descriptor>, 2> out_;
  std::array<std::array<char, 65536>, 2> buffers_{};
  std::unique_ptr<boost::asio::posix::stream_descriptor> pidfd_;
  std::optional<ExitStatus> exit_;
  // Handlers hold a weak reference: the process object may be destroyed with reads pending.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

class LocalRankProcessFactory : public RankProcessFactory {
 public:
  explicit LocalRankProcessFactory(boost::asio::io_context& io) : io_(io) {}
  std::unique_ptr<RankProcess> create(int rank, const HostSpec& host) override {
    return std::make_unique<LocalRankProcess>(io_, rank, host.name);
  }

 private:
  boost::asio::io_context& io_;
};

}  // namespace hora::cli
