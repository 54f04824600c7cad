// A real OpenSSH server for tests, on 127.0.0.1 with a port chosen by the kernel.
//
// The fixture listens on 127.0.0.1:0 itself and, for every connection it accepts, starts
// `/usr/sbin/sshd -i` (inetd mode) with the connection as its stdin/stdout, so there is no port
// race and no daemon to wait for. sshd runs with a config, host key and authorized_keys in a
// temp dir; logins are as root with the fixture's client key. Needs root (sshd -i privilege
// separation) — available() says whether this machine can run it.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ssh/config.h"
#include "test/ssh/temp_dir.h"

namespace hora::ssh::test {

// Runs a command through /bin/sh and returns its stdout; throws when it exits non-zero.
std::string sh(const std::string& command);

class LocalSshd {
 public:
  // Empty when this machine can run the fixture, else why not (the test then exits 77).
  static std::string unavailable_reason();

  // `extra_config` is appended to sshd_config (later lines do not override earlier ones in
  // sshd, so the defaults below that it must be able to change are left out: MaxSessions).
  explicit LocalSshd(const std::string& extra_config = "MaxSessions 50\n");
  ~LocalSshd();
  LocalSshd(const LocalSshd&) = delete;
  LocalSshd& operator=(const LocalSshd&) = delete;

  int port() const { return port_; }
  const TempDir& dir() const { return dir_; }
  std::string client_key() const { return dir_ / "client_ed25519"; }      // authorised
  std::string stranger_key() const { return dir_ / "stranger_ed25519"; }  // not authorised
  std::string host_pub() const { return dir_ / "host_ed25519.pub"; }
  std::string known_hosts() const { return dir_ / "known_hosts"; }
  // "[127.0.0.1]:port ssh-ed25519 AAAA..." for the current host key.
  std::string known_hosts_line() const;
  // ssh-keygen -l's fingerprint of the current host key ("SHA256:...").
  std::string host_fingerprint() const;
  // Replaces the host key: later connections see a new key (an "reinstalled host").
  void regenerate_host_key();

  // A Target for this server: root@127.0.0.1:port, the client key, known_hosts() pre-filled with
  // the host key, StrictHostKeyChecking yes, connect timeout 5 s.
  Target target() const;

 private:
  void accept_loop();

  TempDir dir_;
  int listen_fd_ = -1;
  int stop_pipe_[2] = {-1, -1};
  int port_ = 0;
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<pid_t> children_;
};

}  // namespace hora::ssh::test
