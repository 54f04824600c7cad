// The launch pipeline driven directly (cli/launch/launcher.h): whole local jobs
// of real processes, their rank output and verdict captured through the
// context's descriptors. Local guards are the built horarun ($HORARUN), since
// this test program is not one.
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "cli/base/errors.h"
#include "cli/launch/launcher.h"
#include "test/read_file.h"

using namespace hora::cli;
using Catch::Matchers::Contains;

namespace {

// A launch whose stdout and stderr are files in a fresh directory.
struct Job {
  std::string dir;
  LaunchContext ctx;

  explicit Job(std::vector<std::string> args) {
    char tmpl[] = "/tmp/hora-launcher-test-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    const char* horarun = std::getenv("HORARUN");
    REQUIRE(horarun != nullptr);
    ctx.args = std::move(args);
    ctx.env = {{"PATH", std::getenv("PATH") != nullptr ? std::getenv("PATH") : "/usr/bin:/bin"}};
    ctx.cwd = dir;
    ctx.local_guard = horarun;
    ctx.stdout_fd = ::open((dir + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ctx.stderr_fd = ::open((dir + "/err").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    REQUIRE(ctx.stdout_fd >= 0);
    REQUIRE(ctx.stderr_fd >= 0);
  }
  ~Job() {
    ::close(ctx.stdout_fd);
    ::close(ctx.stderr_fd);
    std::system(("rm -rf '" + dir + "'").c_str());
  }
  std::string out() const { return hora::test::slurp(dir + "/out"); }
  std::string err() const { return hora::test::slurp(dir + "/err"); }
};

}  // namespace

TEST_CASE("a local job of `true` exits 0 with nothing to say") {
  Job job({"-np", "2", "true"});
  CHECK(run_launcher(job.ctx) == 0);
  CHECK(job.err().empty());
}

TEST_CASE("a local job of `false` exits 1 and names the rank that failed") {
  Job job({"-np", "2", "-H", "localhost:2", "sh", "-c", "exit $HORA_RANK"});
  CHECK(run_launcher(job.ctx) == 1);
  CHECK_THAT(job.err(), Contains("horarun: rank 1 on localhost exited with code 1"));

  Job all_fail({"-np", "1", "false"});
  CHECK(run_launcher(all_fail.ctx) == 1);
  CHECK_THAT(all_fail.err(), Contains("horarun: rank 0 on localhost exited with code 1"));
}

TEST_CASE("rank output reaches the context's stdout, tagged with the rank") {
  Job job({"-np", "2", "sh", "-c", "echo hello from $HORA_RANK"});
  REQUIRE(run_launcher(job.ctx) == 0);
  CHECK_THAT(job.out(), Contains("hello from 0"));
  CHECK_THAT(job.out(), Contains("hello from 1"));
}

TEST_CASE("--dry-run prints the rank table and starts nothing") {
  Job job({"--dry-run", "-np", "2", "sh", "-c", "touch started"});
  REQUIRE(run_launcher(job.ctx) == 0);
  CHECK_THAT(job.out(), Contains("local_rank"));
  CHECK(::access((job.dir + "/started").c_str(), F_OK) != 0);
}

TEST_CASE(
    "bad input is a UsageError before anything starts; --check-build "
    "needs no command") {
  Job job({"-np", "2", "-H", "localhost:1", "true"});
  CHECK_THROWS_AS(run_launcher(job.ctx), UsageError);
  Job cb({"-cb"});
  CHECK(run_launcher(cb.ctx) == 0);
  CHECK_THAT(cb.out(), Contains("Gloo"));
  CHECK_THAT(cb.out(), Contains("PyTorch (hora.torch)"));
}

TEST_CASE("this machine under two names is a usage error naming both") {
  Job job({"-H", "localhost:2,127.0.0.1:2", "sh", "-c", "touch started"});
  CHECK_THROWS_AS(run_launcher(job.ctx), UsageError);
  CHECK_THROWS_WITH(run_launcher(job.ctx),
                    Contains("hosts localhost and 127.0.0.1 are both this machine") &&
                        Contains("localhost:4"));
  CHECK(::access((job.dir + "/started").c_str(), F_OK) != 0);
  // A host that receives no rank is no second name for it.
  Job one({"-np", "2", "-H", "localhost:2,127.0.0.1:2", "true"});
  CHECK(run_launcher(one.ctx) == 0);
}

TEST_CASE(
    "a rank whose command cannot run says why: missing #! interpreter, a "
    "directory") {
  Job script({"-np", "1", "./train.sh"});
  { std::ofstream(script.dir + "/train.sh") << "#!/nonexistent/python9\n"; }
  REQUIRE(::chmod((script.dir + "/train.sh").c_str(), 0755) == 0);
  CHECK(run_launcher(script.ctx) == 126);
  CHECK_THAT(script.err(), Contains("#! interpreter '/nonexistent/python9' does not exist"));

  Job dir({"-np", "1", "/tmp"});
  CHECK(run_launcher(dir.ctx) == 126);
  CHECK_THAT(dir.err(), Contains("/tmp is a directory"));
}

// An elastic job takes the fixed job's launch steps: the interface choice (and
// its
// --network-interfaces check) and the supervisor's configuration
// (cli/launch/job_config.h).
TEST_CASE(
    "an elastic job chooses its network and configuration as a fixed job "
    "does") {
  const std::vector<std::string> elastic = {"--min-np", "1", "-np", "1", "-H", "localhost:1"};
  auto with = [](std::vector<std::string> a, const std::vector<std::string>& more) {
    a.insert(a.end(), more.begin(), more.end());
    return a;
  };
  // --dry-run prints the same choice for both.
  Job fixed_plan(
      {"--dry-run", "-np", "1", "-H", "localhost:1", "--network-interfaces", "lo", "true"});
  REQUIRE(run_launcher(fixed_plan.ctx) == 0);
  Job elastic_plan(with(elastic, {"--dry-run", "--network-interfaces", "lo", "true"}));
  REQUIRE(run_launcher(elastic_plan.ctx) == 0);
  const std::string choice = "network: interfaces from --network-interfaces:\n  localhost: lo ";
  CHECK_THAT(fixed_plan.out(), Contains(choice));
  CHECK_THAT(elastic_plan.out(), Contains(choice));

  // An interface no host has is the same usage error, before anything starts.
  Job fixed_bad({"-np", "1", "-H", "localhost:1", "--network-interfaces", "nosuch0", "sh", "-c",
                 "touch started"});
  Job elastic_bad(with(elastic, {"--network-interfaces", "nosuch0", "sh", "-c", "touch started"}));
  std::string fixed_error, elastic_error;
  try {
    run_launcher(fixed_bad.ctx);
  } catch (const UsageError& e) {
    fixed_error = e.what();
  }
  try {
    run_launcher(elastic_bad.ctx);
  } catch (const UsageError& e) {
    elastic_error = e.what();
  }
  CHECK_THAT(fixed_error, Contains("nosuch0"));
  CHECK(elastic_error == fixed_error);
  CHECK(::access((elastic_bad.dir + "/started").c_str(), F_OK) != 0);

  // The chosen interface reaches the rank (an elastic job of this machine alone
  // used to get loopback whatever --network-interfaces said): one with an IPv4
  // address other than loopback.
  std::string nic;
  ifaddrs* list = nullptr;
  REQUIRE(::getifaddrs(&list) == 0);
  for (ifaddrs* a = list; a != nullptr && nic.empty(); a = a->ifa_next) {
    if (a->ifa_addr != nullptr && a->ifa_addr->sa_family == AF_INET &&
        (a->ifa_flags & IFF_UP) != 0 && (a->ifa_flags & IFF_LOOPBACK) == 0) {
      nic = a->ifa_name;
    }
  }
  ::freeifaddrs(list);
  if (nic.empty()) {
    WARN(
        "no interface but loopback has an IPv4 address: not checked with a "
        "job");
    return;
  }
  Job run(with(elastic, {"--network-interfaces", nic, "sh", "-c", "echo iface=$HORA_IFACE"}));
  REQUIRE(run_launcher(run.ctx) == 0);
  CHECK_THAT(run.out(), Contains("iface=" + nic + "\n"));
}
