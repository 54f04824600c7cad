#include "test/ssh/local_sshd.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace hora::ssh::test {

std::string sh(const std::string& command) {
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) throw std::runtime_error("popen failed: " + command);
  std::string out;
  std::array<char, 4096> buf{};
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = ::pclose(p);
  if (status != 0)
    throw std::runtime_error("`" + command + "` failed (status " + std::to_string(status) + ")");
  return out;
}

std::string LocalSshd::unavailable_reason() {
  if (::geteuid() != 0) return "not root (sshd -i needs root for privilege separation)";
  if (::access("/usr/sbin/sshd", X_OK) != 0) return "/usr/sbin/sshd not installed (openssh-server)";
  if (::access("/usr/bin/ssh-keygen", X_OK) != 0) return "ssh-keygen not installed";
  return {};
}

LocalSshd::LocalSshd(const std::string& extra_config) {
  ::mkdir("/run/sshd", 0755);  // sshd's privilege separation directory; EEXIST is fine
  sh("ssh-keygen -q -t ed25519 -N '' -C hora-test-host -f " + (dir_ / "host_ed25519"));
  sh("ssh-keygen -q -t ed25519 -N '' -C hora-test-client -f " + client_key());
  sh("ssh-keygen -q -t ed25519 -N '' -C hora-test-stranger -f " + stranger_key());
  sh("cp " + client_key() + ".pub " + (dir_ / "authorized_keys"));
  dir_.write("sshd_config", "HostKey " + (dir_ / "host_ed25519") +
                                "\n"
                                "AuthorizedKeysFile " +
                                (dir_ / "authorized_keys") +
                                "\n"
                                "PermitRootLogin prohibit-password\n"
                                "UsePAM no\n"
                                "StrictModes no\n"
                                "PasswordAuthentication no\n"
                                "KbdInteractiveAuthentication no\n"
                                "PidFile none\n"
                                "LogLevel VERBOSE\n" +
                                extra_config);

  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(listen_fd_, 64) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0 ||
      ::pipe2(stop_pipe_, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("LocalSshd: cannot listen on 127.0.0.1:0: ") +
                             std::strerror(errno));
  }
  port_ = ntohs(a.sin_port);
  std::ofstream(known_hosts()) << known_hosts_line() << "\n";
  acceptor_ = std::thread([this] { accept_loop(); });
}

LocalSshd::~LocalSshd() {
  if (stop_pipe_[1] >= 0) (void)!::write(stop_pipe_[1], "x", 1);
  if (acceptor_.joinable()) acceptor_.join();
  // sshd -i children end when their connection closes; the ones still serving a session the
  // test left open are ours to stop.
  for (pid_t pid : children_) {
    ::kill(pid, SIGTERM);
    ::waitpid(pid, nullptr, 0);
  }
  for (int fd : {listen_fd_, stop_pipe_[0], stop_pipe_[1]}) {
    if (fd >= 0) ::close(fd);
  }
}

void LocalSshd::accept_loop() {
  const std::string cfg = dir_ / "sshd_config";
  const std::string log = dir_ / "sshd.log";
  while (true) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[1].revents != 0) return;
    const int conn = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    // argv is built before fork(): the child of a threaded process may only exec.
    const char* argv[] = {"/usr/sbin/sshd", "-i", "-f", cfg.c_str(), "-E", log.c_str(), nullptr};
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(conn, 0);
      ::dup2(conn, 1);
      ::execv(argv[0], const_cast<char* const*>(argv));
      ::_exit(127);
    }
    ::close(conn);
    std::lock_guard<std::mutex> lock(mu_);
    if (pid > 0) children_.push_back(pid);
    // Reap the children whose connection already ended.
    std::erase_if(children_, [](pid_t c) { return ::waitpid(c, nullptr, WNOHANG) == c; });
  }
}

std::string LocalSshd::known_hosts_line() const {
  std::istringstream pub(sh("cat " + host_pub()));
  std::string type, b64;
  pub >> type >> b64;
  return "[127.0.0.1]:" + std::to_string(port_) + " " + type + " " + b64;
}

std::string LocalSshd::host_fingerprint() const {
  std::istringstream out(sh("ssh-keygen -l -f " + host_pub()));
  std::string bits, fp;
  out >> bits >> fp;
  return fp;
}

void LocalSshd::regenerate_host_key() {
  sh("rm -f " + (dir_ / "host_ed25519") + " " + host_pub() +
     " && ssh-keygen -q -t ed25519 -N '' -C hora-test-host2 -f " + (dir_ / "host_ed25519"));
}

Target LocalSshd::target() const {
  Target t;
  t.alias = "127.0.0.1";
  t.hostname = "127.0.0.1";
  t.user = "root";
  t.port = port_;
  t.identity_files = {client_key()};
  t.connect_timeout = std::chrono::seconds(5);
  t.host_key_policy = HostKeyPolicy::kYes;
  t.known_hosts_files = {known_hosts()};
  return t;
}

}  // namespace hora::ssh::test
