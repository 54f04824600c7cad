// ssh_config resolution (ssh/config.h) against files written by each test; no network.
#include "ssh/config.h"

#include <sys/stat.h>

#include <filesystem>

#include <catch2/catch.hpp>

#include "ssh/errors.h"
#include "test/ssh/temp_dir.h"

using namespace hora::ssh;
using hora::ssh::test::TempDir;

namespace {

// A fixed local identity whose home is the temp dir, so ~ and relative Includes land there.
ConfigSource source_for(const TempDir& dir, const std::string& file = "") {
  ConfigSource s;
  s.local.home = dir.path().string();
  s.local.user = "alice";
  s.local.uid = "1000";
  s.local.hostname = "launcher.example.org";
  s.system_file = "";
  s.file = file;
  return s;
}

}  // namespace

TEST_CASE("a host without any config resolves to itself with defaults", "[config]") {
  TempDir dir;
  const Target t = resolve("server1", {}, source_for(dir));
  CHECK(t.alias == "server1");
  CHECK(t.hostname == "server1");
  CHECK(t.user == "alice");
  CHECK(t.port == 22);
  CHECK(t.connect_timeout == kDefaultConnectTimeout);
  CHECK(t.host_key_policy == HostKeyPolicy::kAcceptNew);
  CHECK(t.identity_files_are_defaults);
  CHECK(t.identity_files == std::vector<std::string>{dir / ".ssh/id_ed25519", dir / ".ssh/id_ecdsa",
                                                     dir / ".ssh/id_rsa"});
  CHECK(t.known_hosts_files ==
        std::vector<std::string>{dir / ".ssh/known_hosts", dir / ".ssh/known_hosts2"});
  CHECK(t.endpoint() == "server1:22");
}

TEST_CASE("~/.ssh/config is read by default; HostName, User, Port from the matching block",
          "[config]") {
  TempDir dir;
  dir.write(".ssh/config",
            "# comment\n"
            "Host gpu1\n"
            "  HostName 10.0.0.5\n"
            "  User bob\n"
            "  Port 2222\n"
            "\n"
            "Host other\n"
            "  Port 3333\n");
  const Target t = resolve("gpu1", {}, source_for(dir));
  CHECK(t.hostname == "10.0.0.5");
  CHECK(t.user == "bob");
  CHECK(t.port == 2222);
  CHECK(t.endpoint() == "10.0.0.5:2222");
  CHECK(t.describe() == "gpu1 (10.0.0.5:2222)");
  CHECK(resolve("other", {}, source_for(dir)).port == 3333);
  CHECK(resolve("nomatch", {}, source_for(dir)).port == 22);
}

TEST_CASE("Host patterns: *, ?, several per line, negation, case of the host", "[config]") {
  TempDir dir;
  const std::string cfg = dir.write("cfg",
                                    "Host *.lab !bad.lab\n"
                                    "  Port 1001\n"
                                    "Host node? edge\n"
                                    "  Port 1002\n"
                                    "Host !never\n"
                                    "  Port 1003\n");
  auto port = [&](const char* h) { return resolve(h, {}, source_for(dir, cfg)).port; };
  CHECK(port("a.lab") == 1001);
  CHECK(port("A.LAB") == 1001);  // the host is lowercased before matching, as OpenSSH does
  CHECK(port("bad.lab") == 22);  // negation wins over the positive pattern
  CHECK(port("node7") == 1002);
  CHECK(port("node17") == 22);  // ? is exactly one character
  CHECK(port("edge") == 1002);
  CHECK(port("never") == 22);  // a line of only negated patterns never matches...
  CHECK(port("x") == 22);      // ...not even hosts the negation does not name
}

TEST_CASE("first value wins; IdentityFile accumulates; Host * gives defaults after", "[config]") {
  TempDir dir;
  const std::string cfg = dir.write("cfg",
                                    "User early\n"
                                    "Host h1\n"
                                    "  User h1user\n"
                                    "  Port 2001\n"
                                    "  IdentityFile ~/.ssh/h1_key\n"
                                    "Host h*\n"
                                    "  Port 2002\n"
                                    "  User late\n"
                                    "  IdentityFile ~/.ssh/common_key\n"
                                    "  ConnectTimeout 3\n");
  const Target t = resolve("h1", {}, source_for(dir, cfg));
  CHECK(t.user == "early");  // lines before the first Host apply to all and came first
  CHECK(t.port == 2001);
  CHECK(t.connect_timeout == std::chrono::seconds(3));
  CHECK(t.identity_files == std::vector<std::string>{dir / ".ssh/h1_key", dir / ".ssh/common_key"});
  CHECK_FALSE(t.identity_files_are_defaults);
  CHECK(resolve("h2", {}, source_for(dir, cfg)).port == 2002);
}

TEST_CASE("keyword syntax: case-insensitive keywords, '=', quotes, trailing comments", "[config]") {
  TempDir dir;
  const std::string cfg = dir.write("cfg",
                                    "HOST q\n"
                                    "\tuser=carol\n"
                                    "  port = 2200  # trailing comment\n"
                                    "  IdentityFile \"~/my keys/id ed\"\n"
                                    "  SomeUnknownOption whatever\n");
  const Target t = resolve("q", {}, source_for(dir, cfg));
  CHECK(t.user == "carol");
  CHECK(t.port == 2200);
  CHECK(t.identity_files == std::vector<std::string>{dir / "my keys/id ed"});
}

TEST_CASE("Include: relative to ~/.ssh, globs in name order, inside Host blocks", "[config]") {
  TempDir dir;
  dir.write(".ssh/config",
            "Include conf.d/*.conf\n"
            "Host inc\n"
            "  Include by_host\n"
            "Host other\n"
            "  Include never_read\n");
  dir.write(".ssh/conf.d/20-b.conf", "Host b\n  Port 2020\nHost a\n  Port 9999\n");
  dir.write(".ssh/conf.d/10-a.conf", "Host a\n  Port 1010\n");
  dir.write(".ssh/conf.d/ignored.txt", "Host a b\n  Port 7777\n");
  dir.write(".ssh/by_host", "Port 3030\nUser incuser\n");
  dir.write(".ssh/never_read", "Port 4040\n");
  auto port = [&](const char* h) { return resolve(h, {}, source_for(dir)).port; };
  CHECK(port("a") == 1010);  // 10-a.conf is read before 20-b.conf: its value wins
  CHECK(port("b") == 2020);
  CHECK(port("inc") == 3030);  // top lines of an included file inherit the includer's block
  CHECK(resolve("inc", {}, source_for(dir)).user == "incuser");
  CHECK(port("zzz") == 22);  // by_host and never_read only apply inside their Host blocks
  CHECK(port("other") == 4040);
}

TEST_CASE("Include: absolute paths and ~; a Host line inside an included file ends at its end",
          "[config]") {
  TempDir dir;
  const std::string inc = dir.write("abs/inc.conf", "Host nope\n  User nobody\n");
  dir.write(".ssh/extra", "Port 5050\n");
  const std::string cfg = dir.write("cfg", "Include " + inc + " ~/.ssh/extra\nUser after\n");
  const Target t = resolve("h", {}, source_for(dir, cfg));
  // The included file's non-matching `Host nope` does not swallow the includer's next lines.
  CHECK(t.user == "after");
  CHECK(t.port == 5050);
}

TEST_CASE("Include loops are reported, not followed forever", "[config]") {
  TempDir dir;
  const std::string cfg = dir.write("loop", "");
  dir.write("loop", "Include " + cfg + "\n");
  REQUIRE_THROWS_AS(resolve("h", {}, source_for(dir, cfg)), ConfigError);
  REQUIRE_THROWS_WITH(resolve("h", {}, source_for(dir, cfg)),
                      Catch::Contains("nested more than 16"));
}

TEST_CASE("Match all applies; other Match blocks are skipped", "[config]") {
  TempDir dir;
  const std::string cfg = dir.write("cfg",
                                    "Match host m exec \"true\"\n"
                                    "  Port 1111\n"
                                    "Match all\n"
                                    "  User matchall\n");
  const Target t = resolve("m", {}, source_for(dir, cfg));
  CHECK(t.port == 22);
  CHECK(t.user == "matchall");
}

TEST_CASE("%-tokens in HostName, IdentityFile and UserKnownHostsFile", "[config]") {
  TempDir dir;
  const std::string cfg = dir.write("cfg",
                                    "Host n1\n"
                                    "  HostName %h.cluster.local\n"
                                    "  User rob\n"
                                    "  Port 2022\n"
                                    "  IdentityFile %d/keys/%u-%r@%h:%p-%n-%l-%L-%i-100%%\n"
                                    "  UserKnownHostsFile ~/kh/%h /abs/known none\n");
  const Target t = resolve("n1", {}, source_for(dir, cfg));
  CHECK(t.hostname == "n1.cluster.local");
  REQUIRE(t.identity_files.size() == 1);
  CHECK(t.identity_files[0] ==
        dir.path().string() +
            "/keys/alice-rob@n1.cluster.local:2022-n1-launcher.example.org-launcher-1000-100%");
  CHECK(t.known_hosts_files == std::vector<std::string>{dir / "kh/n1.cluster.local", "/abs/known"});
}

TEST_CASE("an unknown %-token is an error naming file:line", "[config]") {
  TempDir dir;
  const std::string cfg = dir.write("cfg", "Host *\n  IdentityFile ~/.ssh/%Z\n");
  REQUIRE_THROWS_WITH(resolve("x", {}, source_for(dir, cfg)),
                      Catch::Contains(cfg + ":2") && Catch::Contains("%Z"));
}

TEST_CASE("command line overrides win over the file; user@host wins over User", "[config]") {
  TempDir dir;
  const std::string cfg = dir.write("cfg",
                                    "Host h\n"
                                    "  User fileuser\n"
                                    "  Port 2222\n"
                                    "  IdentityFile ~/file_key\n"
                                    "  StrictHostKeyChecking no\n"
                                    "  ConnectTimeout 60\n");
  Overrides o;
  o.port = 12345;
  o.identity_files = {"~/cli_key"};
  o.host_key_policy = HostKeyPolicy::kYes;
  o.connect_timeout = std::chrono::seconds(5);
  const Target t = resolve("dave@h", o, source_for(dir, cfg));
  CHECK(t.user == "dave");
  CHECK(t.alias == "h");
  CHECK(t.port == 12345);
  CHECK(t.identity_files == std::vector<std::string>{dir / "cli_key", dir / "file_key"});
  CHECK(t.host_key_policy == HostKeyPolicy::kYes);
  CHECK(t.connect_timeout == std::chrono::seconds(5));

  const Target plain = resolve("h", {}, source_for(dir, cfg));
  CHECK(plain.user == "fileuser");
  CHECK(plain.port == 2222);
  CHECK(plain.host_key_policy == HostKeyPolicy::kNo);
  CHECK(plain.connect_timeout == std::chrono::seconds(60));
}

TEST_CASE("host specs: user@host, last @ splits, [v6] brackets", "[config]") {
  CHECK(parse_host_spec("h").host == "h");
  CHECK_FALSE(parse_host_spec("h").user);
  const HostSpec s = parse_host_spec("a@b@c");
  CHECK(*s.user == "a@b");
  CHECK(s.host == "c");
  CHECK(parse_host_spec("[fe80::1]").host == "fe80::1");
  CHECK_THROWS_AS(parse_host_spec("@h"), ConfigError);
  CHECK_THROWS_AS(parse_host_spec("u@"), ConfigError);
  TempDir dir;
  const Target t = resolve("root@[fe80::1]", {}, source_for(dir, "none"));
  CHECK(t.endpoint() == "[fe80::1]:22");
}

TEST_CASE("bad values are errors naming the file and line", "[config]") {
  TempDir dir;
  CHECK_THROWS_WITH(resolve("h", {}, source_for(dir, dir.write("c1", "\n\nPort 99999\n"))),
                    Catch::Contains("c1:3") && Catch::Contains("Port"));
  CHECK_THROWS_WITH(resolve("h", {},
                            source_for(dir, dir.write("c2", "StrictHostKeyChecking maybe\n"))),
                    Catch::Contains("c2:1") && Catch::Contains("accept-new"));
  CHECK_THROWS_WITH(resolve("h", {}, source_for(dir, dir.write("c3", "ConnectTimeout soon\n"))),
                    Catch::Contains("c3:1"));
  CHECK(resolve("h", {}, source_for(dir, dir.write("c4", "ConnectTimeout 1m30s\n")))
            .connect_timeout == std::chrono::seconds(90));
}

TEST_CASE("a given config file must exist; the default ones may not", "[config]") {
  TempDir dir;
  CHECK_THROWS_WITH(resolve("h", {}, source_for(dir, dir / "missing")),
                    Catch::Contains("missing") && Catch::Contains("--ssh-config"));
  CHECK_NOTHROW(resolve("h", {}, source_for(dir)));
}

TEST_CASE("StrictHostKeyChecking spellings", "[config]") {
  CHECK(parse_host_key_policy("yes", "x") == HostKeyPolicy::kYes);
  CHECK(parse_host_key_policy("ask", "x") == HostKeyPolicy::kYes);
  CHECK(parse_host_key_policy("Accept-New", "x") == HostKeyPolicy::kAcceptNew);
  CHECK(parse_host_key_policy("off", "x") == HostKeyPolicy::kNo);
  CHECK(parse_host_key_policy("no", "x") == HostKeyPolicy::kNo);
  CHECK_THROWS_AS(parse_host_key_policy("sometimes", "x"), ConfigError);
}

// hora connects directly; ignoring a ProxyJump/ProxyCommand would send the connection straight to
// HostName (a timeout, or the wrong machine), so resolution refuses the host and says where.
TEST_CASE("ProxyJump and ProxyCommand are refused at resolution, naming the line and file",
          "[config]") {
  TempDir dir;
  dir.write(".ssh/config",
            "Host direct\n"
            "  HostName 10.0.0.1\n"
            "Host inner\n"
            "  HostName 10.1.0.5\n"
            "  ProxyJump bastion\n"
            "Host piped\n"
            "  ProxyCommand ssh -W %h:%p bastion\n"
            "Host nojump\n"
            "  ProxyJump none\n"
            "Host inc\n"
            "  Include jumps.conf\n"
            "Host *\n"
            "  ProxyCommand ssh -W %h:%p gateway\n");
  const std::string jumps = dir.write(".ssh/jumps.conf", "User u\nProxyJump hop1,hop2\n");
  const std::string cfg = dir / ".ssh/config";

  const std::string tail =
      "; horarun connects directly and does not support ProxyJump/ProxyCommand: make the host "
      "reachable "
      "directly or run horarun from a host that reaches it";
  REQUIRE_THROWS_AS(resolve("inner", {}, source_for(dir)), ConfigError);
  CHECK_THROWS_WITH(resolve("inner", {}, source_for(dir)),
                    "inner: ssh_config sets ProxyJump (line 5 of " + cfg + ")" + tail);
  CHECK_THROWS_WITH(resolve("alice@piped", {}, source_for(dir)),
                    "piped: ssh_config sets ProxyCommand (line 7 of " + cfg + ")" + tail);
  // In an included file, the line of that file is named.
  CHECK_THROWS_WITH(resolve("inc", {}, source_for(dir)),
                    "inc: ssh_config sets ProxyJump (line 2 of " + jumps + ")" + tail);
  // As in OpenSSH, the first of either wins: `ProxyJump none` means direct, and the later
  // `Host *` ProxyCommand does not apply to nojump...
  CHECK(resolve("nojump", {}, source_for(dir)).hostname == "nojump");
  // ...but it does apply to every other host, even one with its own HostName.
  CHECK_THROWS_WITH(resolve("direct", {}, source_for(dir)),
                    "direct: ssh_config sets ProxyCommand (line 13 of " + cfg + ")" + tail);

  // Without the Host * block, a host that has no proxy resolves as before.
  const std::string plain =
      dir.write("plain", "Host inner\n  ProxyJump bastion\nHost *\n  Port 2200\n");
  CHECK(resolve("other", {}, source_for(dir, plain)).port == 2200);
  CHECK_THROWS_WITH(resolve("inner", {}, source_for(dir, plain)),
                    Catch::StartsWith("inner: ssh_config sets ProxyJump (line 2 of " + plain +
                                      ")"));
}

TEST_CASE("the Target records the files read and the Host line naming the host", "[config]") {
  TempDir dir;
  dir.write(".ssh/config",
            "Host *\n"
            "  User everyone\n"
            "Include conf.d/*\n"
            "Host gpu?  !gpu0\n"
            "  Port 2200\n"
            "Host gpu1\n"
            "  User second\n");
  const std::string inc = dir.write(".ssh/conf.d/a", "Host lab-*\n  Port 2300\n");
  const std::string cfg = dir / ".ssh/config";
  const Target gpu = resolve("gpu1", {}, source_for(dir));
  CHECK(gpu.from_config);
  CHECK(gpu.config_files == std::vector<std::string>{cfg, inc});
  CHECK(gpu.host_entry == cfg + ":4");  // the first Host line naming it, not `Host *`
  CHECK(resolve("lab-7", {}, source_for(dir)).host_entry == inc + ":1");
  // Only wildcard patterns (Host *) and a negated match do not make a host an alias.
  CHECK(resolve("gpu0", {}, source_for(dir)).host_entry.empty());
  CHECK(resolve("gpu99", {}, source_for(dir)).host_entry.empty());
  CHECK(resolve("gpu99", {}, source_for(dir)).user == "everyone");
  // No file read: nothing recorded, but still made by resolve().
  const Target none = resolve("h", {}, source_for(dir, "none"));
  CHECK(none.from_config);
  CHECK(none.config_files.empty());
  CHECK(none.host_entry.empty());
  CHECK_FALSE(Target{}.from_config);
}

TEST_CASE("config files that are not regular files are refused by name", "[config][limits]") {
  TempDir dir;
  // --ssh-config /dev/zero used to read one endless line until the OOM killer came.
  CHECK_THROWS_WITH(resolve("h", {}, source_for(dir, "/dev/zero")),
                    Catch::Contains("/dev/zero: it is a device, not a regular file") &&
                        Catch::Contains("--ssh-config"));
  const std::string inc = dir.write("cfg-inc", "Include /dev/zero\n");
  CHECK_THROWS_WITH(resolve("h", {}, source_for(dir, inc)),
                    Catch::Contains("/dev/zero: it is a device, not a regular file"));
  // A FIFO without a writer used to block the open forever.
  const std::string fifo = dir / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(resolve("h", {}, source_for(dir, fifo)),
                    Catch::Contains(fifo + ": it is a FIFO, not a regular file"));
  // A directory used to read as an empty config.
  std::filesystem::create_directories(dir / "d");
  CHECK_THROWS_WITH(resolve("h", {}, source_for(dir, dir / "d")),
                    Catch::Contains(dir / "d" + ": it is a directory, not a regular file"));
  // /dev/null stays the usual way to say "no config".
  CHECK(resolve("h", {}, source_for(dir, "/dev/null")).hostname == "h");
}

TEST_CASE("a config file larger than 1 MiB is refused", "[config][limits]") {
  TempDir dir;
  const std::string big = dir.write("big", "# " + std::string(2u << 20, 'x') + "\n");
  CHECK_THROWS_WITH(resolve("h", {}, source_for(dir, big)),
                    Catch::Contains(big + ": it is larger than 1 MiB"));
}

TEST_CASE("an Include tree that fans out stops at 256 files with a short message",
          "[config][limits]") {
  const int fanout = GENERATE(2, 3);
  TempDir dir;
  // Level k includes fanout files of level k+1, 16 levels deep: fanout^16 files if followed.
  for (int level = 0; level < 16; ++level) {
    std::string text;
    for (int i = 0; i < fanout; ++i) {
      text +=
          "Include " + (dir / ("l" + std::to_string(level + 1) + "-" + std::to_string(i))) + "\n";
    }
    for (int i = 0; i < fanout; ++i) {
      dir.write("l" + std::to_string(level) + "-" + std::to_string(i), text);
    }
  }
  const std::string top = dir / "l0-0";
  std::string message;
  try {
    resolve("h", {}, source_for(dir, top));
    FAIL("resolve succeeded");
  } catch (const ConfigError& e) {
    message = e.what();
  }
  CHECK_THAT(message, Catch::Contains("more than 256 ssh config files read through Include"));
  CHECK(message.size() < 1024);
}
