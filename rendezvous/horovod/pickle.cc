#include "rendezvous/horovod/pickle.h"

#include <arpa/inet.h>

#include <fmt/format.h>

#include <cstring>
#include <limits>
#include <optional>

namespace hora::rdv::horovod {
namespace {

constexpr std::string_view kWorkerModule = "horovod.runner.elastic.worker";

// ---- writing ----

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xffu));
}

void put_global(std::string& out, std::string_view name) {
  out += 'c';  // GLOBAL: "module\nname\n"
  out += kWorkerModule;
  out += '\n';
  out += name;
  out += '\n';
}

void put_unicode(std::string& out, std::string_view s) {
  out += 'X';  // BINUNICODE: uint32 length, UTF-8
  put_le(out, s.size(), 4);
  out += s;
}

void put_int(std::string& out, std::int64_t v) {
  if (v >= std::numeric_limits<std::int32_t>::min() &&
      v <= std::numeric_limits<std::int32_t>::max()) {
    out += 'J';  // BININT: int32, little-endian
    put_le(out, static_cast<std::uint32_t>(static_cast<std::int32_t>(v)), 4);
    return;
  }
  // LONG1: a byte count, then two's complement little-endian in as few bytes as keep the sign.
  std::string le;
  put_le(le, static_cast<std::uint64_t>(v), 8);
  while (le.size() > 1) {
    const auto top = static_cast<unsigned char>(le[le.size() - 1]);
    const auto next = static_cast<unsigned char>(le[le.size() - 2]);
    if ((top == 0x00 && (next & 0x80) == 0) || (top == 0xff && (next & 0x80) != 0)) {
      le.pop_back();
    } else {
      break;
    }
  }
  out += '\x8a';
  out += static_cast<char>(le.size());
  out += le;
}

// ---- reading ----

std::string_view opcode_name(unsigned char op) {
  switch (op) {
    case '(': return "MARK";
    case '.': return "STOP";
    case '0': return "POP";
    case '1': return "POP_MARK";
    case '2': return "DUP";
    case 'F': return "FLOAT";
    case 'I': return "INT";
    case 'J': return "BININT";
    case 'K': return "BININT1";
    case 'L': return "LONG";
    case 'M': return "BININT2";
    case 'N': return "NONE";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 'R': return "REDUCE";
    case 'S': return "STRING";
    case 'T': return "BINSTRING";
    case 'U': return "SHORT_BINSTRING";
    case 'V': return "UNICODE";
    case 'X': return "BINUNICODE";
    case 'a': return "APPEND";
    case 'b': return "BUILD";
    case 'c': return "GLOBAL";
    case 'd': return "DICT";
    case '}': return "EMPTY_DICT";
    case 'e': return "APPENDS";
    case 'g': return "GET";
    case 'h': return "BINGET";
    case 'i': return "INST";
    case 'j': return "LONG_BINGET";
    case 'l': return "LIST";
    case ']': return "EMPTY_LIST";
    case 'o': return "OBJ";
    case 'p': return "PUT";
    case 'q': return "BINPUT";
    case 'r': return "LONG_BINPUT";
    case 's': return "SETITEM";
    case 't': return "TUPLE";
    case ')': return "EMPTY_TUPLE";
    case 'u': return "SETITEMS";
    case 'G': return "BINFLOAT";
    case 0x80: return "PROTO";
    case 0x81: return "NEWOBJ";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x85: return "TUPLE1";
    case 0x86: return "TUPLE2";
    case 0x87: return "TUPLE3";
    case 0x88: return "NEWTRUE";
    case 0x89: return "NEWFALSE";
    case 0x8a: return "LONG1";
    case 0x8b: return "LONG4";
    case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";
    case 0x8c: return "SHORT_BINUNICODE";
    case 0x8d: return "BINUNICODE8";
    case 0x8e: return "BINBYTES8";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x92: return "NEWOBJ_EX";
    case 0x93: return "STACK_GLOBAL";
    case 0x94: return "MEMOIZE";
    case 0x95: return "FRAME";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return "an unknown opcode";
  }
}

enum class Kind { kStr, kBytes, kInt, kList, kDict, kTuple };

std::string_view kind_name(Kind k) {
  switch (k) {
    case Kind::kStr: return "str";
    case Kind::kBytes: return "bytes";
    case Kind::kInt: return "int";
    case Kind::kList: return "list";
    case Kind::kDict: return "dict";
    case Kind::kTuple: return "tuple";
  }
  return "value";
}

// Values live in one arena and refer to each other by index: a memo reference can make a list
// hold itself without owning pointers going round in a circle.
struct Value {
  Kind kind = Kind::kInt;
  std::int64_t number = 0;
  std::string text;                // str (UTF-8 as sent) or bytes
  std::vector<std::size_t> items;  // list, tuple; dict: key, value, key, value...
};

class Reader {
 public:
  Reader(std::string_view data, const PickleLimits& limits) : data_(data), limits_(limits) {}

  // Runs the pickle; returns the index of the value STOP left.
  std::size_t run() {
    if (data_.size() > limits_.max_pickle_bytes) {
      fail_at(0, fmt::format("{} bytes, over the limit of {}", data_.size(),
                             limits_.max_pickle_bytes));
    }
    while (true) {
      if (pos_ >= data_.size()) fail_at(pos_, "ended before STOP");
      op_at_ = pos_;
      const auto op = static_cast<unsigned char>(data_[pos_++]);
      switch (op) {
        case 0x80: {  // PROTO
          const std::uint64_t v = take_le(1);
          if (v < 2 || v > 5) fail(fmt::format("protocol {} (expected 2 to 5)", v));
          break;
        }
        case 0x95: {  // FRAME: a length hint for buffered reading; nothing to do but check it
          const std::uint64_t n = take_le(8);
          if (n > data_.size() - pos_) fail("FRAME longer than the rest of the pickle");
          break;
        }
        case '}': push(make(Kind::kDict)); break;
        case ']': push(make(Kind::kList)); break;
        case '(':  // MARK
          if (marks_.size() >= limits_.max_marks) {
            fail(fmt::format("more than {} nested MARKs", limits_.max_marks));
          }
          marks_.push_back(stack_.size());
          break;
        case 0x94:  // MEMOIZE
          if (memo_.size() >= limits_.max_memo) {
            fail(fmt::format("more than {} memo entries", limits_.max_memo));
          }
          memo_.push_back(top());
          break;
        case 'h': push(memo_get(take_le(1))); break;                             // BINGET
        case 'j': push(memo_get(take_le(4))); break;                             // LONG_BINGET
        case 0x8c: push(make_text(Kind::kStr, take_le(1))); break;               // SHORT_BINUNICODE
        case 'X': push(make_text(Kind::kStr, take_le(4))); break;                // BINUNICODE
        case 'C': push(make_text(Kind::kBytes, take_le(1))); break;              // SHORT_BINBYTES
        case 'B': push(make_text(Kind::kBytes, take_le(4))); break;              // BINBYTES
        case 'K': push(make_int(static_cast<std::int64_t>(take_le(1)))); break;  // BININT1
        case 'M': push(make_int(static_cast<std::int64_t>(take_le(2)))); break;  // BININT2
        case 'J':                                                                // BININT: signed
          push(make_int(static_cast<std::int32_t>(static_cast<std::uint32_t>(take_le(4)))));
          break;
        case 0x86: {  // TUPLE2
          const std::size_t b = pop();
          const std::size_t a = pop();
          const std::size_t t = make(Kind::kTuple);
          values_[t].items = {a, b};
          push(t);
          break;
        }
        case 't': {  // TUPLE
          std::vector<std::size_t> items = pop_mark();
          const std::size_t t = make(Kind::kTuple);
          values_[t].items = std::move(items);
          push(t);
          break;
        }
        case 'a': {  // APPEND
          const std::size_t v = pop();
          list_at_top().items.push_back(v);
          break;
        }
        case 'e': {  // APPENDS
          std::vector<std::size_t> items = pop_mark();
          Value& list = list_at_top();
          list.items.insert(list.items.end(), items.begin(), items.end());
          break;
        }
        case 's': {  // SETITEM
          const std::size_t v = pop();
          const std::size_t k = pop();
          set_item(k, v);
          break;
        }
        case 'u': {  // SETITEMS
          std::vector<std::size_t> items = pop_mark();
          if (items.size() % 2 != 0) fail("SETITEMS with an odd number of values");
          for (std::size_t i = 0; i < items.size(); i += 2) set_item(items[i], items[i + 1]);
          break;
        }
        case '.': {  // STOP
          if (!marks_.empty()) fail("STOP inside a MARK");
          if (stack_.size() != 1) {
            fail(fmt::format("STOP with {} values on the stack (expected 1)", stack_.size()));
          }
          if (pos_ != data_.size()) fail(fmt::format("{} bytes after STOP", data_.size() - pos_));
          return stack_.front();
        }
        default:
          fail_at(
              op_at_,
              fmt::format(
                  "opcode 0x{:02x} ({}) is not accepted: a worker_addresses body holds only str, "
                  "bytes, int, list, dict and tuple values, and this reader imports, calls and "
                  "builds nothing else",
                  op, opcode_name(op)));
      }
    }
  }

  const Value& value(std::size_t i) const { return values_[i]; }

 private:
  [[noreturn]] void fail_at(std::size_t offset, const std::string& why) const {
    throw PickleError(fmt::format("worker_addresses pickle, offset {}: {}", offset, why));
  }
  [[noreturn]] void fail(const std::string& why) const {
    const auto op = static_cast<unsigned char>(data_[op_at_]);
    fail_at(op_at_, fmt::format("{}: {}", opcode_name(op), why));
  }

  std::uint64_t take_le(std::size_t n) {
    if (data_.size() - pos_ < n) fail("truncated argument");
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < n; ++i) {
      v |= static_cast<std::uint64_t>(static_cast<unsigned char>(data_[pos_ + i])) << (8 * i);
    }
    pos_ += n;
    return v;
  }

  std::size_t make(Kind kind) {
    if (values_.size() >= limits_.max_values) {
      fail(fmt::format("more than {} values", limits_.max_values));
    }
    values_.push_back(Value{kind, 0, {}, {}});
    return values_.size() - 1;
  }
  std::size_t make_int(std::int64_t v) {
    const std::size_t i = make(Kind::kInt);
    values_[i].number = v;
    return i;
  }
  std::size_t make_text(Kind kind, std::uint64_t n) {
    if (data_.size() - pos_ < n) fail(fmt::format("{} bytes announced, fewer left", n));
    const std::size_t i = make(kind);
    values_[i].text.assign(data_.substr(pos_, n));
    pos_ += n;
    return i;
  }

  void push(std::size_t v) {
    if (stack_.size() >= limits_.max_stack) {
      fail(fmt::format("more than {} values on the stack", limits_.max_stack));
    }
    stack_.push_back(v);
  }
  std::size_t top() const {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("empty stack");
    return stack_.back();
  }
  std::size_t pop() {
    const std::size_t v = top();
    stack_.pop_back();
    return v;
  }
  std::vector<std::size_t> pop_mark() {
    if (marks_.empty()) fail("no MARK to pop to");
    const std::size_t at = marks_.back();
    marks_.pop_back();
    std::vector<std::size_t> items(stack_.begin() + static_cast<std::ptrdiff_t>(at), stack_.end());
    stack_.resize(at);
    return items;
  }
  std::size_t memo_get(std::uint64_t i) const {
    if (i >= memo_.size()) fail(fmt::format("memo entry {} was never stored", i));
    return memo_[i];
  }
  Value& list_at_top() {
    Value& v = values_[top()];
    if (v.kind != Kind::kList) fail(fmt::format("appends to a {}, not a list", kind_name(v.kind)));
    return v;
  }
  void set_item(std::size_t k, std::size_t v) {
    Value& dict = values_[top()];
    if (dict.kind != Kind::kDict) fail(fmt::format("sets an item of a {}", kind_name(dict.kind)));
    if (values_[k].kind != Kind::kStr) {
      fail(fmt::format("a dict key is a {} (an interface name must be a str)",
                       kind_name(values_[k].kind)));
    }
    for (std::size_t i = 0; i < dict.items.size(); i += 2) {
      if (values_[dict.items[i]].text ==
          values_[k].text) {  // a repeated key replaces, as in Python
        dict.items[i + 1] = v;
        return;
      }
    }
    dict.items.push_back(k);
    dict.items.push_back(v);
  }

  std::string_view data_;
  PickleLimits limits_;
  std::size_t pos_ = 0;
  std::size_t op_at_ = 0;
  std::vector<Value> values_;
  std::vector<std::size_t> stack_;
  std::vector<std::size_t> marks_;  // stack sizes at each open MARK
  std::vector<std::size_t> memo_;
};

[[noreturn]] void bad_shape(const std::string& why) {
  throw PickleError(fmt::format(
      "worker_addresses pickle: {} (expected ({{interface: [(ip, port), ...]}}, 32-byte key))",
      why));
}

const Value& expect(const Reader& r, std::size_t i, Kind kind, std::string_view what) {
  const Value& v = r.value(i);
  if (v.kind != kind)
    bad_shape(fmt::format("{} is a {}, not a {}", what, kind_name(v.kind), kind_name(kind)));
  return v;
}

bool is_ip_address(const std::string& s) {
  unsigned char buf[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, s.c_str(), buf) == 1 || ::inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

std::string hosts_updated_pickle(std::int64_t timestamp, HostUpdate res) {
  std::string out = "\x80\x02";  // PROTO 2
  put_global(out, "HostsUpdatedRequest");
  out += ')';     // EMPTY_TUPLE: no constructor arguments
  out += '\x81';  // NEWOBJ: cls.__new__(cls), __init__ is not run
  out += '}';     // EMPTY_DICT: the instance's __dict__ ...
  out += '(';     // MARK
  put_unicode(out, "timestamp");
  put_int(out, timestamp);
  put_unicode(out, "res");
  put_global(out, "HostUpdateResult");
  out += 'K';  // BININT1
  out += static_cast<char>(static_cast<int>(res));
  out += '\x85';  // TUPLE1
  out += 'R';     // REDUCE: HostUpdateResult(res)
  out += 'u';     // SETITEMS
  out += 'b';     // BUILD: ... set as its attributes
  out += '.';     // STOP
  return out;
}

std::string base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) {
    throw PickleError(
        fmt::format("worker_addresses body: {} base64 characters, not a multiple of 4",
                    text.size()));
  }
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    int v[4];
    int pad = 0;
    for (int j = 0; j < 4; ++j) {
      const char c = text[i + static_cast<std::size_t>(j)];
      // '=' only at the end: "xx==" or "xxx=".
      if (c == '=' && last && j >= 2 && (j == 3 || text[i + 3] == '=')) {
        v[j] = 0;
        ++pad;
        continue;
      }
      v[j] = pad == 0 ? base64_value(c) : -1;
      if (v[j] < 0) {
        throw PickleError(
            fmt::format("worker_addresses body: not base64 at offset {} (byte 0x{:02x})",
                        i + static_cast<std::size_t>(j), static_cast<unsigned char>(c)));
      }
    }
    const std::uint32_t n =
        (static_cast<std::uint32_t>(v[0]) << 18) | (static_cast<std::uint32_t>(v[1]) << 12) |
        (static_cast<std::uint32_t>(v[2]) << 6) | static_cast<std::uint32_t>(v[3]);
    out += static_cast<char>((n >> 16) & 0xffu);
    if (pad < 2) out += static_cast<char>((n >> 8) & 0xffu);
    if (pad < 1) out += static_cast<char>(n & 0xffu);
  }
  return out;
}

WorkerAddresses parse_worker_addresses(std::string_view base64_body, const PickleLimits& limits) {
  // Base64 grows 3 bytes to 4: refuse an oversized body before decoding it.
  if (base64_body.size() / 4 * 3 > limits.max_pickle_bytes) {
    throw PickleError(fmt::format("worker_addresses body: {} bytes, over the limit of {}",
                                  base64_body.size(), limits.max_pickle_bytes / 3 * 4));
  }
  return parse_worker_addresses_pickle(base64_decode(base64_body), limits);
}

WorkerAddresses parse_worker_addresses_pickle(std::string_view pickle, const PickleLimits& limits) {
  Reader reader(pickle, limits);
  const std::size_t root = reader.run();
  const Value& pair = expect(reader, root, Kind::kTuple, "the value");
  if (pair.items.size() != 2) bad_shape(fmt::format("a tuple of {} values", pair.items.size()));
  const Value& by_interface = expect(reader, pair.items[0], Kind::kDict, "the first value");
  const Value& key = expect(reader, pair.items[1], Kind::kBytes, "the key");
  WorkerAddresses out;
  if (key.text.size() != out.key.size()) {
    bad_shape(fmt::format("the key has {} bytes, not {}", key.text.size(), out.key.size()));
  }
  std::memcpy(out.key.data(), key.text.data(), out.key.size());
  for (std::size_t i = 0; i < by_interface.items.size(); i += 2) {
    const std::string& iface = reader.value(by_interface.items[i]).text;
    const std::string what = fmt::format("the addresses of interface '{}'", iface);
    const Value& list = expect(reader, by_interface.items[i + 1], Kind::kList, what);
    for (std::size_t a : list.items) {
      const Value& ip_port = expect(reader, a, Kind::kTuple, "an address of " + iface);
      if (ip_port.items.size() != 2) {
        bad_shape(fmt::format("an address of '{}' is a tuple of {} values, not (ip, port)", iface,
                              ip_port.items.size()));
      }
      const Value& ip = expect(reader, ip_port.items[0], Kind::kStr, "an IP address of " + iface);
      const Value& port = expect(reader, ip_port.items[1], Kind::kInt, "a port of " + iface);
      if (!is_ip_address(ip.text)) {
        bad_shape(fmt::format("'{}' (interface '{}') is not an IP address", ip.text, iface));
      }
      if (port.number <= 0 || port.number > 65535) {
        bad_shape(fmt::format("port {} of {} (interface '{}') is not a TCP port", port.number,
                              ip.text, iface));
      }
      if (out.endpoints.size() >= limits.max_endpoints) {
        bad_shape(fmt::format("more than {} addresses", limits.max_endpoints));
      }
      out.endpoints.push_back({iface, ip.text, static_cast<std::uint16_t>(port.number)});
    }
  }
  if (out.endpoints.empty()) {
    bad_shape(
        "the worker listed no address for its notification service (does HOROVOD_GLOO_IFACE "
        "name an interface without an IPv4 address?)");
  }
  return out;
}

}  // namespace hora::rdv::horovod
