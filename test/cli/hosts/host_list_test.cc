#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "cli/base/errors.h"
#include "cli/hosts/host_list.h"

using Catch::Matchers::Contains;
using hora::cli::HostSpec;
using hora::cli::parse_host_list;
using hora::cli::parse_hostfile;
using hora::cli::UsageError;

TEST_CASE("host list: horovodrun forms") {
  auto hosts = parse_host_list("server1:4,server2:2,server3");
  REQUIRE(hosts.size() == 3);
  CHECK(hosts[0] == HostSpec{"", "server1", 4});
  CHECK(hosts[1] == HostSpec{"", "server2", 2});
  CHECK(hosts[2] == HostSpec{"", "server3", 1});
  CHECK(hora::cli::total_slots(hosts) == 7);
}

TEST_CASE("host list: user@host and bracketed IPv6") {
  auto hosts = parse_host_list("alice@gpu-1.example.com:8, [fe80::1%eth0]:2,bob@[::1],10.0.0.7:3");
  REQUIRE(hosts.size() == 4);
  CHECK(hosts[0] == HostSpec{"alice", "gpu-1.example.com", 8});
  CHECK(hosts[1] == HostSpec{"", "fe80::1%eth0", 2});
  CHECK(hosts[1].address_for_display() == "[fe80::1%eth0]");
  CHECK(hosts[2] == HostSpec{"bob", "::1", 1});
  CHECK(hosts[3] == HostSpec{"", "10.0.0.7", 3});
}

TEST_CASE("host list: bad items name the item and the expected form") {
  struct Case {
    const char* input;
    const char* says;
  };
  const Case cases[] = {
      {"a:2,,b:2", "empty item"},
      {"a:x", "'x' is not a number"},
      {"a:0", "at least 1"},
      {"a:-1", "at least 1"},
      {"a:99999999999", "too large"},
      {"a:70000", "too large"},
      {"fe80::1:2", "write it in brackets"},
      {"[fe80::1:2", "never closes"},
      {"[abc]:2", "not an IPv6 address"},
      {"@host:2", "user name before '@' is empty"},
      {"a b:2", "has the character ' '"},
      {"a:2x", "not a number"},
      {"a:2,a:3", "listed twice"},
      {"", "is empty"},
      {"[::1]x", "unexpected 'x'"},
  };
  for (const Case& c : cases) {
    INFO("input: " << c.input);
    CHECK_THROWS_WITH(parse_host_list(c.input), Contains(c.says));
    if (std::string(c.input).size() > 0 && std::string(c.says) != "listed twice" &&
        std::string(c.says) != "empty item") {
      CHECK_THROWS_WITH(parse_host_list(c.input), Contains("expected host, host:slots"));
    }
  }
}

TEST_CASE("hostfile: slots, comments, blank lines, max_slots") {
  const char* text =
      "# cluster\n"
      "\n"
      "server1 slots=4\n"
      "  server2   slots=2 max_slots=8   # trailing comment\n"
      "alice@[fd00::5] slots=1\n"
      "server4\n"
      "\r\n";
  auto hosts = parse_hostfile(text, "hosts.txt");
  REQUIRE(hosts.size() == 4);
  CHECK(hosts[0] == HostSpec{"", "server1", 4});
  CHECK(hosts[1] == HostSpec{"", "server2", 2});
  CHECK(hosts[2] == HostSpec{"alice", "fd00::5", 1});
  CHECK(hosts[3] == HostSpec{"", "server4", 1});
}

TEST_CASE("hostfile: the `host:N` form of MPICH, Intel MPI and the Kubernetes MPI Operator") {
  // As the MPI Operator writes /etc/mpi/hostfile for mpiImplementation Intel or MPICH.
  const char* text =
      "pi-worker-0.pi.default.svc:2\n"
      "pi-worker-1.pi.default.svc:2\n"
      "bob@[fd00::6]:3 max_slots=3\n";
  auto hosts = parse_hostfile(text, "/etc/mpi/hostfile");
  REQUIRE(hosts.size() == 3);
  CHECK(hosts[0] == HostSpec{"", "pi-worker-0.pi.default.svc", 2});
  CHECK(hosts[1] == HostSpec{"", "pi-worker-1.pi.default.svc", 2});
  CHECK(hosts[2] == HostSpec{"bob", "fd00::6", 3});
  CHECK(hora::cli::total_slots(hosts) == 7);
}

TEST_CASE("hostfile: errors name the file, the line and the expected form") {
  CHECK_THROWS_WITH(parse_hostfile("a slots=2\nb slots=two\n", "hf"),
                    Contains("hostfile hf line 2") && Contains("'two' is not a number") &&
                        Contains("'host slots=N'"));
  CHECK_THROWS_WITH(parse_hostfile("a:2 slots=2\n", "hf"),
                    Contains("line 1") && Contains("given twice") && Contains("slots=N"));
  CHECK_THROWS_WITH(parse_hostfile("a:x\n", "hf"), Contains("line 1") && Contains("'x'"));
  CHECK_THROWS_WITH(parse_hostfile("a cpus=2\n", "hf"), Contains("unknown field 'cpus'"));
  CHECK_THROWS_WITH(parse_hostfile("a slots\n", "hf"), Contains("not a key=value field"));
  CHECK_THROWS_WITH(parse_hostfile("a slots=1 slots=2\n", "hf"), Contains("given twice"));
  CHECK_THROWS_WITH(parse_hostfile("a slots=1 max_slots=z\n", "hf"), Contains("max_slots"));
  CHECK_THROWS_WITH(parse_hostfile("# nothing\n\n", "hf"), Contains("lists no hosts"));
  CHECK_THROWS_WITH(parse_hostfile("a slots=1\na slots=1\n", "hf"), Contains("listed twice"));
  CHECK_THROWS_AS(parse_hostfile("a slots=0\n", "hf"), UsageError);
}

TEST_CASE("hostfile: a missing file is a usage error naming the path") {
  CHECK_THROWS_WITH(hora::cli::read_hostfile("/nonexistent/hosts.txt"),
                    Contains("/nonexistent/hosts.txt") && Contains("cannot open"));
}

TEST_CASE("hostfile: a directory, an endless device or a binary file is refused with the reason") {
  CHECK_THROWS_WITH(hora::cli::read_hostfile("/tmp"),
                    Catch::Matchers::Contains("/tmp: is a directory"));
  // /dev/zero never ends: a device is refused before any read.
  CHECK_THROWS_WITH(hora::cli::read_hostfile("/dev/zero"),
                    Catch::Matchers::Contains("/dev/zero: is not a regular file (a device)"));
  // A file larger than a host file can be: the read stops at the size limit.
  const std::string big = "/tmp/hora_hostfile_big_test";
  {
    std::ofstream out(big, std::ios::binary);
    out << std::string((4u << 20) + 10, '#');
  }
  CHECK_THROWS_WITH(hora::cli::read_hostfile(big), Catch::Matchers::Contains("longer than 4 MiB"));
  std::remove(big.c_str());
  const std::string path = "/tmp/hora_hostfile_nul_test";
  {
    std::ofstream out(path, std::ios::binary);
    out << "h1 slots=2\n" << std::string(1, '\0') << "h2\n";
  }
  CHECK_THROWS_WITH(hora::cli::read_hostfile(path),
                    Catch::Matchers::Contains("contains NUL bytes"));
  std::remove(path.c_str());
}

TEST_CASE("hostfile: a FIFO with no writer is refused at once instead of blocking") {
  const std::string path = "/tmp/hora_hostfile_fifo_test_" + std::to_string(::getpid());
  REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  // Before the fix this call never returned; the test's own deadline (meson) would end it.
  CHECK_THROWS_WITH(hora::cli::read_hostfile(path),
                    Catch::Matchers::Contains("is not a regular file (a FIFO)"));
  std::remove(path.c_str());
}

// A control character is echoed escaped, a name over 253 characters is refused,
// and an echo of a huge -H is cut.
TEST_CASE("host names: control characters escaped, length bounded, echoes cut") {
  CHECK_THROWS_WITH(hora::cli::parse_host_list("ho\x1b[2Jst:1"),
                    Catch::Matchers::Contains("ho\\x1b[2Jst") &&
                        Catch::Matchers::Contains("the character '\\x1b'"));
  const std::string huge(1 << 20, 'a');
  try {
    hora::cli::parse_host_list(huge);
    FAIL("a 1 MB host name was accepted");
  } catch (const hora::cli::UsageError& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Matchers::Contains("longer than 253 characters") &&
                         Catch::Matchers::Contains("(1048576 bytes)"));
    CHECK(what.size() < 1000);
  }
  CHECK(hora::cli::parse_host_list(std::string(253, 'b')).size() == 1);
}
