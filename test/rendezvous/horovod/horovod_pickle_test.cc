// The pickles of Horovod's elastic notification (rendezvous/horovod/pickle.h) without Python:
// the HostsUpdatedRequest bytes, the worker_addresses reader on bodies Python wrote and on
// hand-built ones, and its refusals. horovod_pickle_real_test.py checks both against Horovod's
// own Python.
#include <catch2/catch.hpp>

#include <numeric>

#include "rendezvous/horovod/pickle.h"

using namespace hora::rdv::horovod;
using Catch::Matchers::Contains;

namespace {

std::string le32(std::uint32_t v) {
  std::string s;
  for (int i = 0; i < 4; ++i) s += static_cast<char>((v >> (8 * i)) & 0xffu);
  return s;
}

// A tiny pickle writer for the reader's tests: the opcodes cloudpickle uses for the body.
struct P {
  std::string b = std::string("\x80\x05", 2);
  P& op(char c) {
    b += c;
    return *this;
  }
  P& str(const std::string& s) {
    b += '\x8c';
    b += static_cast<char>(s.size());
    b += s;
    return *this;
  }
  P& bytes(const std::string& s) {
    b += 'C';
    b += static_cast<char>(s.size());
    b += s;
    return *this;
  }
  P& port(int p) {
    b += 'M';
    b += static_cast<char>(p & 0xff);
    b += static_cast<char>((p >> 8) & 0xff);
    return *this;
  }
  P& memoize() { return op('\x94'); }
  std::string stop() { return b + "."; }
};

std::string key32() {
  std::string k(32, '\0');
  std::iota(k.begin(), k.end(), '\0');
  return k;
}

// ({iface_0: [(10.0.<i>.1, 1000+i)], ...}, key) for n interfaces, as cloudpickle builds it.
std::string interfaces(int n) {
  P p;
  p.op('}').memoize().op('(');
  for (int i = 0; i < n; ++i) {
    p.str("eth" + std::to_string(i)).memoize().op(']').memoize();
    p.str("10.0." + std::to_string(i) + ".1").memoize().port(1000 + i).op('\x86').memoize();
    p.op('a');
  }
  p.op('u').bytes(key32()).memoize().op('\x86').memoize();
  return p.stop();
}

std::string refusal(const std::string& pickle) {
  try {
    parse_worker_addresses_pickle(pickle);
  } catch (const PickleError& e) {
    return e.what();
  }
  FAIL("accepted: " << pickle.size() << " bytes");
  return "";
}

}  // namespace

TEST_CASE("hosts_updated_pickle writes HostsUpdatedRequest by class name, protocol 2") {
  const std::string g1 =
      "c"
      "horovod.runner.elastic.worker\nHostsUpdatedRequest\n";
  const std::string g2 =
      "c"
      "horovod.runner.elastic.worker\nHostUpdateResult\n";
  const std::string expected = std::string("\x80\x02", 2) + g1 + ")\x81}(" + "X" + le32(9) +
                               "timestamp" + "J" + le32(1800000000) + "X" + le32(3) + "res" + g2 +
                               "K\x02\x85Rub.";
  CHECK(hosts_updated_pickle(1800000000, HostUpdate::kAdded) == expected);
  const std::string removed = hosts_updated_pickle(5, HostUpdate::kRemoved);
  CHECK(removed.find(std::string("J\x05\x00\x00\x00", 5)) != std::string::npos);
  CHECK(removed.find("K\x01\x85R") != std::string::npos);
  CHECK(hosts_updated_pickle(5, HostUpdate::kMixed).find("K\x03\x85R") != std::string::npos);
}

TEST_CASE("timestamps past int32 are written as LONG1 in as few bytes as keep the sign") {
  // 2^31 needs a fifth byte so that the sign bit stays clear.
  CHECK(hosts_updated_pickle(2147483648LL, HostUpdate::kAdded)
            .find(std::string("\x8a\x05\x00\x00\x00\x80\x00", 7)) != std::string::npos);
  CHECK(hosts_updated_pickle(-2147483649LL, HostUpdate::kAdded)
            .find(std::string("\x8a\x05\xff\xff\xff\x7f\xff", 7)) != std::string::npos);
  CHECK(hosts_updated_pickle(-1, HostUpdate::kAdded).find(std::string("J\xff\xff\xff\xff", 5)) !=
        std::string::npos);
}

TEST_CASE("a body written by cloudpickle is read: every interface's addresses and the key") {
  // base64.b64encode(cloudpickle.dumps(({'lo': [('127.0.0.1', 40123)], 'eth0': [('10.0.0.2',
  // 40123), ('10.0.0.3', 1)]}, bytes(range(32))), protocol=5)) by Debian 12's python3 and
  // cloudpickle 2.2: FRAME, MEMOIZE, SHORT_BINUNICODE, BININT1/2, TUPLE2, APPEND(S), SETITEMS.
  const WorkerAddresses w = parse_worker_addresses(
      "gAWVbQAAAAAAAAB9lCiMAmxvlF2UjAkxMjcuMC4wLjGUTbuchpRhjARldGgwlF2UKIwIMTAuMC4wLjKUTbuchpSMCDEw"
      "LjAuMC4zlEsBhpRldUMgAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+UhpQu");
  REQUIRE(w.endpoints.size() == 3);
  CHECK(w.endpoints[0] == WorkerEndpoint{"lo", "127.0.0.1", 40123});
  CHECK(w.endpoints[1] == WorkerEndpoint{"eth0", "10.0.0.2", 40123});
  CHECK(w.endpoints[2] == WorkerEndpoint{"eth0", "10.0.0.3", 1});
  for (std::size_t i = 0; i < 32; ++i) CHECK(w.key[i] == i);
}

TEST_CASE("one, three and twelve interfaces are read in order") {
  for (int n : {1, 3, 12}) {
    const WorkerAddresses w = parse_worker_addresses_pickle(interfaces(n));
    REQUIRE(w.endpoints.size() == static_cast<std::size_t>(n));
    CHECK(w.endpoints.front() == WorkerEndpoint{"eth0", "10.0.0.1", 1000});
    CHECK(w.endpoints.back() == WorkerEndpoint{"eth" + std::to_string(n - 1),
                                               "10.0." + std::to_string(n - 1) + ".1",
                                               static_cast<std::uint16_t>(999 + n)});
  }
}

TEST_CASE("a memo reference is the same list: filled after it was stored, seen everywhere") {
  // {'lo': L} with L empty and memoized (0); then 'eth9': BINGET 0, filled by APPEND, SETITEM.
  // 'lo' must list the address appended later, as Python's unpickler would have it.
  P p;
  p.op('}').op('(').str("lo").op(']').memoize().op('u');
  p.str("eth9").op('h').op('\0').str("127.0.0.1").port(9).op('\x86').op('a').op('s');
  p.bytes(key32()).op('\x86');
  const WorkerAddresses w = parse_worker_addresses_pickle(p.stop());
  REQUIRE(w.endpoints.size() == 2);
  CHECK(w.endpoints[0] == WorkerEndpoint{"lo", "127.0.0.1", 9});
  CHECK(w.endpoints[1] == WorkerEndpoint{"eth9", "127.0.0.1", 9});
  // LONG_BINGET reaches the same entry; a list that holds itself is a wrong shape, not a hang.
  P self;
  self.op('}').op('(').str("lo").op(']').memoize().op('j');
  self.b += le32(0);
  self.op('a').op('u').bytes(key32()).op('\x86');
  CHECK_THAT(refusal(self.stop()), Contains("an address of lo is a list, not a tuple"));
}

TEST_CASE("everything that executes or builds other objects is refused by name and offset") {
  const std::string pre("\x80\x05", 2);
  CHECK_THAT(refusal(pre + "cos\nsystem\n(S'true'\ntR."),
             Contains("opcode 0x63 (GLOBAL) is not accepted") && Contains("offset 2"));
  CHECK_THAT(refusal(pre + "\x8c\x02os\x8c\x06system\x93."), Contains("0x93 (STACK_GLOBAL)"));
  CHECK_THAT(refusal(pre + "}}R."), Contains("0x52 (REDUCE)") && Contains("offset 4"));
  CHECK_THAT(refusal(pre + "}}b."), Contains("(BUILD)"));
  CHECK_THAT(refusal(pre + "N."), Contains("(NONE)"));
  CHECK_THAT(refusal(pre + "\x81."), Contains("(NEWOBJ)"));
  CHECK_THAT(refusal(pre + "Q."), Contains("(BINPERSID)"));
  CHECK_THAT(refusal(pre + "\x82\x01."), Contains("(EXT1)"));
  CHECK_THAT(refusal(pre + "\xff."), Contains("0xff (an unknown opcode)"));
}

TEST_CASE("truncated, deep, malformed and wrongly shaped pickles are refused") {
  const std::string good = interfaces(2);
  CHECK_THAT(refusal(good.substr(0, good.size() - 1)), Contains("ended before STOP"));
  CHECK_THAT(refusal(good.substr(0, 30)), Contains("offset"));
  CHECK_THAT(refusal(good + "."), Contains("1 bytes after STOP"));
  CHECK_THAT(refusal(std::string("\x80\x05", 2) + std::string(9, '(') + "."),
             Contains("more than 8 nested MARKs"));
  CHECK_THAT(refusal(std::string("\x80\x09", 2) + "."), Contains("protocol 9"));
  CHECK_THAT(refusal(std::string("\x80\x05", 2) + "X" + le32(1000) + "ab."),
             Contains("1000 bytes announced"));
  CHECK_THAT(refusal(std::string("\x80\x05", 2) + "a."), Contains("APPEND: empty stack"));
  CHECK_THAT(refusal(std::string("\x80\x05", 2) + "h\x03."), Contains("memo entry 3"));
  CHECK_THAT(refusal(std::string("\x80\x05", 2) + "}K\x01K\x02s."), Contains("dict key is a int"));
  std::string deep("\x80\x05", 2);
  for (int i = 0; i < 300; ++i) deep += ']';
  CHECK_THAT(refusal(deep + "."), Contains("more than 256 values on the stack"));
  // Shapes: a short key, a port out of range, a host name instead of an IP, a bare dict.
  P short_key;
  short_key.op('}').op('(').str("lo").op(']').str("127.0.0.1").port(1).op('\x86').op('a').op('u');
  CHECK_THAT(refusal(short_key.bytes("abc").op('\x86').stop()), Contains("the key has 3 bytes"));
  P zero_port;
  zero_port.op('}').op('(').str("lo").op(']').str("127.0.0.1").port(0).op('\x86').op('a').op('u');
  CHECK_THAT(refusal(zero_port.bytes(key32()).op('\x86').stop()), Contains("port 0 of 127.0.0.1"));
  P name;
  name.op('}').op('(').str("lo").op(']').str("localhost").port(1).op('\x86').op('a').op('u');
  CHECK_THAT(refusal(name.bytes(key32()).op('\x86').stop()), Contains("'localhost'"));
  P bare;
  CHECK_THAT(refusal(bare.op('}').stop()), Contains("the value is a dict, not a tuple"));
}

TEST_CASE("base64 is strict: alphabet, length and padding") {
  CHECK(base64_decode("") == "");
  CHECK(base64_decode("YQ==") == "a");
  CHECK(base64_decode("YWI=") == "ab");
  CHECK(base64_decode("YWJj") == "abc");
  CHECK(base64_decode("+/+/") == "\xfb\xff\xbf");
  auto refused = [](const std::string& s) {
    try {
      base64_decode(s);
    } catch (const PickleError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK_THAT(refused("YQ="), Contains("not a multiple of 4"));
  CHECK_THAT(refused("Y=Q="), Contains("offset 1"));
  CHECK_THAT(refused("YQ==YWJj"), Contains("offset 2"));
  CHECK_THAT(refused("YW\nj"), Contains("offset 2 (byte 0x0a)"));
  CHECK_THAT(refused("Y==="), Contains("offset 1"));
}
