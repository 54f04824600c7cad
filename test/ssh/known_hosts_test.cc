// known_hosts parsing, lookup and recording (ssh/known_hosts.h). Keys and fingerprints below were
// made with ssh-keygen -t ed25519/ecdsa and ssh-keygen -l; the hashed line with ssh-keygen -H.
#include "ssh/known_hosts.h"

#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "ssh/errors.h"
#include "test/read_file.h"
#include "test/ssh/temp_dir.h"

using namespace hora::ssh;
using hora::ssh::test::TempDir;

using hora::test::slurp;

namespace {

const char* kEd1 = "AAAAC3NzaC1lZDI1NTE5AAAAIMv7Xg+2JgXkfyMVkSphZ07NJorYsJRU5i9guTFXtsO8";
const char* kEd1Fp = "SHA256:cbxpS3dbPY6f+X4SzVd8jeSt5HUU4Kslo7DPzPPczwc";
const char* kEd2 = "AAAAC3NzaC1lZDI1NTE5AAAAIMYAgNAFDQuuMbXVNHmTZI4m5w2Vy7BGWUsI0PTp55mD";
const char* kEcdsa =
    "AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBA0MnfHOTaF+EKWOUXhwwO1b55rdSuO8yBEStLlZay"
    "w9nKx2O2QoRnSeTqMnVT7QBTI0p+ZUiIT4aQsEeIBESQ4=";
const char* kEcdsaFp = "SHA256:2qo8aCKdoIEXBTHQIXAf1G3gxXYd0PYw4EwCXSCexeQ";
// "[h.example]:2222" hashed with ssh-keygen -H, key kEd1.
const char* kHashedLine =
    "|1|DRmeA7wunEc32P2fd/Kq5/UzJps=|6QwSd7DCCaeZbpkzCg3/GX/uFRM= ssh-ed25519 "
    "AAAAC3NzaC1lZDI1NTE5AAAAIMv7Xg+2JgXkfyMVkSphZ07NJorYsJRU5i9guTFXtsO8";

HostKey ed1() { return HostKey::from_base64("ssh-ed25519", kEd1); }
HostKey ed2() { return HostKey::from_base64("ssh-ed25519", kEd2); }
HostKey ecdsa() { return HostKey::from_base64("ecdsa-sha2-nistp256", kEcdsa); }

}  // namespace

TEST_CASE("base64 round trip and fingerprints match ssh-keygen -l", "[known_hosts]") {
  CHECK(base64_encode("") == "");
  CHECK(base64_encode("f") == "Zg==");
  CHECK(base64_encode("fo") == "Zm8=");
  CHECK(base64_encode("foo") == "Zm9v");
  CHECK(base64_decode("Zm8") == "fo");
  CHECK(base64_decode("Zm8=") == "fo");
  CHECK(base64_decode("Zg") == "f");
  CHECK(base64_decode("Zg==") == "f");
  CHECK(base64_decode("Zm9v") == "foo");
  CHECK(base64_decode("") == "");
  CHECK_THROWS_AS(base64_decode(std::string("Zm\0v", 4)), Error);
  CHECK_THROWS_AS(base64_decode("Z"), Error);
  CHECK_THROWS_AS(base64_decode("Zm 9v"), Error);
  CHECK_THROWS_AS(base64_decode("Zm9v*"), Error);
  CHECK(ed1().type == "ssh-ed25519");
  CHECK(ed1().base64() == kEd1);
  CHECK(ed1().fingerprint() == kEd1Fp);
  CHECK(ecdsa().fingerprint() == kEcdsaFp);
  CHECK_THROWS_AS(HostKey::from_base64("ssh-rsa", kEd1), Error);  // type field disagrees
}

TEST_CASE("known_hosts names: port 22 plain, other ports bracketed, lowercased", "[known_hosts]") {
  CHECK(known_hosts_name("Server1", 22) == "server1");
  CHECK(known_hosts_name("198.18.0.11", 12345) == "[198.18.0.11]:12345");
  CHECK(known_hosts_name("fe80::1", 2222) == "[fe80::1]:2222");
}

TEST_CASE("lookup: known, new, changed (with file:line), other key type is new", "[known_hosts]") {
  TempDir dir;
  const std::string f = dir.write("known_hosts",
                                  "# a comment\n"
                                  "\n"
                                  "alpha,10.0.0.1 ssh-ed25519 " +
                                      std::string(kEd1) +
                                      " comment\n"
                                      "[beta]:2222 ssh-ed25519 " +
                                      kEd1 +
                                      "\n"
                                      "garbage line\n"
                                      "beta ecdsa-sha2-nistp256 " +
                                      kEcdsa + "\n");
  KnownHosts kh({dir / "missing", f});

  auto r = kh.check("alpha", ed1());
  CHECK(r.status == KnownHosts::Status::kKnown);
  CHECK(r.entry.line == 3);
  CHECK(kh.check("10.0.0.1", ed1()).status == KnownHosts::Status::kKnown);

  r = kh.check("[beta]:2222", ed2());
  CHECK(r.status == KnownHosts::Status::kChanged);
  CHECK(r.entry.file == f);
  CHECK(r.entry.line == 4);
  CHECK(r.entry.key.fingerprint() == kEd1Fp);

  // beta on port 22 is a different name: only its ecdsa key is known there.
  CHECK(kh.check("beta", ecdsa()).status == KnownHosts::Status::kKnown);
  CHECK(kh.check("beta", ed1()).status == KnownHosts::Status::kNew);
  CHECK(kh.check("gamma", ed1()).status == KnownHosts::Status::kNew);
  CHECK(kh.known_types("beta") == std::vector<std::string>{"ecdsa-sha2-nistp256"});
  CHECK(kh.known_types("alpha") == std::vector<std::string>{"ssh-ed25519"});
}

TEST_CASE("lookup: patterns, negation, hashed names, @revoked, @cert-authority", "[known_hosts]") {
  TempDir dir;
  const std::string f =
      dir.write("kh", "*.lab,!bad.lab ssh-ed25519 " + std::string(kEd1) + "\n" + kHashedLine +
                          "\n"
                          "@cert-authority *.lab ssh-ed25519 " +
                          kEd2 +
                          "\n"
                          "@revoked * ssh-ed25519 " +
                          kEd2 + "\n");
  KnownHosts kh({f});
  CHECK(kh.check("n1.lab", ed1()).status == KnownHosts::Status::kKnown);
  CHECK(kh.check("bad.lab", ed1()).status == KnownHosts::Status::kNew);
  CHECK(kh.check("[h.example]:2222", ed1()).status == KnownHosts::Status::kKnown);
  CHECK(kh.check("[h.example]:2223", ed1()).status == KnownHosts::Status::kNew);
  const auto r = kh.check("anything", ed2());
  CHECK(r.status == KnownHosts::Status::kRevoked);
  CHECK(r.entry.line == 4);
}

TEST_CASE("an exact match anywhere wins over a stale line for the same host", "[known_hosts]") {
  TempDir dir;
  const std::string a = dir.write("a", "h ssh-ed25519 " + std::string(kEd2) + "\n");
  const std::string b = dir.write("b", "h ssh-ed25519 " + std::string(kEd1) + "\n");
  KnownHosts kh({a, b});
  CHECK(kh.check("h", ed1()).status == KnownHosts::Status::kKnown);
}

TEST_CASE("add appends a line OpenSSH reads, creating the file and directory", "[known_hosts]") {
  TempDir dir;
  const std::string f = dir / "sub/dir/known_hosts";
  KnownHosts kh({f});
  CHECK(kh.check("[10.1.1.1]:2200", ed1()).status == KnownHosts::Status::kNew);
  kh.add(f, "[10.1.1.1]:2200", ed1());
  CHECK(kh.check("[10.1.1.1]:2200", ed1()).status == KnownHosts::Status::kKnown);
  CHECK(slurp(f) == "[10.1.1.1]:2200 ssh-ed25519 " + std::string(kEd1) + "\n");

  // A file whose last line lacks its newline stays well-formed.
  const std::string g = dir.write("g", "x ssh-ed25519 " + std::string(kEd2));
  KnownHosts kh2({g});
  kh2.add(g, "y", ed1());
  KnownHosts reread({g});
  CHECK(reread.check("x", ed2()).status == KnownHosts::Status::kKnown);
  CHECK(reread.check("y", ed1()).status == KnownHosts::Status::kKnown);
  CHECK(reread.check("y", ed1()).entry.line == 2);
}

TEST_CASE("add to an unwritable place names the file", "[known_hosts]") {
  TempDir dir;
  const std::string blocker = dir.write("file", "");
  KnownHosts kh({});
  CHECK_THROWS_WITH(kh.add(blocker + "/known_hosts", "h", ed1()),
                    Catch::Contains(blocker + "/known_hosts"));
}

TEST_CASE("add_or_remember: an unwritable file is reported, and the key is still known in memory",
          "[known_hosts]") {
  TempDir dir;
  // A path below a regular file cannot be created, even by root (who ignores file modes): it
  // stands for a read-only mount here; test/kubernetes/ checks a real read-only bind mount.
  const std::string blocker = dir.write("file", "");
  const std::string f = blocker + "/known_hosts";
  KnownHosts kh({f});
  const std::string why = kh.add_or_remember(f, "[10.1.1.1]:2222", ed1());
  CHECK_THAT(why, Catch::Contains("cannot record the host key of [10.1.1.1]:2222 in " + f));
  CHECK(kh.check("[10.1.1.1]:2222", ed1()).status == KnownHosts::Status::kKnown);
  CHECK(kh.check("[10.1.1.1]:2222", ed2()).status == KnownHosts::Status::kChanged);

  // A writable file is written, and nothing is reported.
  const std::string g = dir / "known_hosts";
  KnownHosts kh2({g});
  CHECK(kh2.add_or_remember(g, "h", ed1()).empty());
  CHECK(slurp(g) == "h ssh-ed25519 " + std::string(kEd1) + "\n");
}

TEST_CASE("first_unwritable_report: once per file and process", "[known_hosts]") {
  CHECK(first_unwritable_report("/ro/a/known_hosts"));
  CHECK_FALSE(first_unwritable_report("/ro/a/known_hosts"));
  CHECK(first_unwritable_report("/ro/b/known_hosts"));
  CHECK_FALSE(first_unwritable_report("/ro/a/known_hosts"));
}
