// Pure parts of remote launching: which hosts are remote (through ssh_config, without DNS), the
// probe and guard command lines, and how sshd's exit reports map to exit statuses.
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "cli/base/errors.h"
#include "cli/remote/remote_hosts.h"
#include "cli/spawn/agent_rank_process.h"

using namespace hora::cli;

namespace {

struct TempConfig {
  std::string path;
  explicit TempConfig(const std::string& text) {
    char name[] = "/tmp/remote_hosts_test.XXXXXX";
    const int fd = ::mkstemp(name);
    REQUIRE(fd >= 0);
    ::close(fd);
    path = name;
    std::ofstream(path) << text;
  }
  ~TempConfig() { ::unlink(path.c_str()); }
};

RemoteOptions options_for(const TempConfig& cfg) {
  RemoteOptions o;
  o.config.file = cfg.path;
  o.config.system_file = "/nonexistent";
  return o;
}

}  // namespace

TEST_CASE("hosts are local by name or by ssh_config HostName, remote otherwise, without DNS") {
  TempConfig cfg(
      "Host self-alias\n  HostName 10.1.2.3\n"
      "Host far\n  HostName 198.18.200.11\n  Port 2222\n  User ann\n");
  const LocalHost local({"node7"}, {"10.1.2.3"});
  const std::vector<HostSpec> hosts = {
      {"", "localhost", 1},
      {"", "node7", 1},
      {"", "self-alias", 1},
      {"", "far", 2},
      // Not in the config and not this machine: remote, and resolution reads only the file.
      {"bob", "unknown-name-never-looked-up", 1}};
  const auto remote = resolve_remote_hosts(hosts, local, options_for(cfg));
  REQUIRE(remote.size() == 2);
  const auto& far = remote.at(3);
  CHECK(far.hostname == "198.18.200.11");
  CHECK(far.port == 2222);
  CHECK(far.user == "ann");
  CHECK(remote.at(4).user == "bob");
  CHECK(remote.at(4).hostname == "unknown-name-never-looked-up");
}

TEST_CASE("--force-ssh makes every host remote, this machine included") {
  TempConfig cfg("Host *\n  Port 12345\n");
  RemoteOptions o = options_for(cfg);
  o.force_ssh = true;
  o.overrides.port = 4022;  // -p wins over the file
  const LocalHost local({"node7"}, {});
  const auto remote = resolve_remote_hosts({{"", "localhost", 2}, {"", "node7", 1}}, local, o);
  REQUIRE(remote.size() == 2);
  CHECK(remote.at(0).hostname == "localhost");
  CHECK(remote.at(0).port == 4022);
}

TEST_CASE("a bad ssh_config value is a usage error naming the host and the file") {
  TempConfig cfg("Host far\n  Port abc\n");
  const LocalHost local({}, {});
  try {
    resolve_remote_hosts({{"", "far", 1}}, local, options_for(cfg));
    FAIL("no error");
  } catch (const UsageError& e) {
    const std::string what = e.what();
    CHECK(what.find("host far") != std::string::npos);
    CHECK(what.find(cfg.path) != std::string::npos);
  }
}

TEST_CASE("the probe command quotes the path, starts the agent and carries nothing secret") {
  const std::string probe = probe_command("/opt/my hora/horarun");
  CHECK(probe.find("'/opt/my hora/horarun'") != std::string::npos);
  CHECK(probe.find("exec '/opt/my hora/horarun' --agent") != std::string::npos);
  CHECK(probe.find("HORA_SECRET") == std::string::npos);
}

TEST_CASE("sshd's exit reports become the rank's exit status") {
  hora::ssh::ExitInfo code;
  code.exit_status = 7;
  CHECK(exit_status_from(code).exit_code() == 7);
  hora::ssh::ExitInfo sig;
  sig.exit_signal = "KILL";
  CHECK(exit_status_from(sig).signaled);
  CHECK(exit_status_from(sig).signal == SIGKILL);
  sig.exit_signal = "SIGSEGV";
  CHECK(exit_status_from(sig).exit_code() == 128 + SIGSEGV);
  hora::ssh::ExitInfo lost;
  lost.error = "connection to h1 lost";
  CHECK(exit_status_from(lost).exit_code() == 255);
}
