#include "cli/agent/relay.h"

#include <charconv>

namespace hora::cli::agent {
namespace {

// Format versions: a relaying agent of another build refuses what it cannot read.
constexpr std::string_view kOpenVersion = "relay-open 1";
constexpr std::string_view kReadyVersion = "relay-ready 1";
// Fields per host in RELAY_OPEN: id, alias, hostname, user, port, identity files, defaults,
// identities_only, connect timeout, host key policy, known_hosts files, command, marker.
constexpr std::size_t kHostFields = 13;
constexpr std::size_t kReadyFields = 11;
// Inside a list-valued field (identity files, known_hosts files): paths never hold a NUL.
constexpr char kListSeparator = '\0';
// Longest timeout either field may carry (30 days, horarun's --start-timeout bound): a time point
// this far ahead cannot overflow the clock.
constexpr long long kMaxTimeoutSeconds = 30LL * 24 * 3600;

void put_string(std::string& out, std::string_view s) {
  const auto n = static_cast<std::uint32_t>(s.size());
  out.push_back(static_cast<char>(n >> 24));
  out.push_back(static_cast<char>(n >> 16));
  out.push_back(static_cast<char>(n >> 8));
  out.push_back(static_cast<char>(n));
  out.append(s);
}

std::optional<std::vector<std::string_view>> split_strings(std::string_view in) {
  std::vector<std::string_view> out;
  while (!in.empty()) {
    if (in.size() < 4) return std::nullopt;
    auto b = [&](std::size_t i) {
      return static_cast<std::uint32_t>(static_cast<unsigned char>(in[i]));
    };
    const std::uint32_t n = b(0) << 24 | b(1) << 16 | b(2) << 8 | b(3);
    in.remove_prefix(4);
    if (n > in.size()) return std::nullopt;
    out.push_back(in.substr(0, n));
    in.remove_prefix(n);
  }
  return out;
}

template <typename T>
std::optional<T> number(std::string_view s) {
  T v{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<bool> flag(std::string_view s) {
  if (s == "1") return true;
  if (s == "0") return false;
  return std::nullopt;
}

std::string join(const std::vector<std::string>& list) {
  std::string out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (i > 0) out.push_back(kListSeparator);
    out += list[i];
  }
  return out;
}

std::vector<std::string> split(std::string_view s) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  while (true) {
    const std::size_t at = s.find(kListSeparator);
    out.emplace_back(s.substr(0, at));
    if (at == std::string_view::npos) return out;
    s.remove_prefix(at + 1);
  }
}

std::optional<ssh::HostKeyPolicy> policy(std::string_view s) {
  for (ssh::HostKeyPolicy p :
       {ssh::HostKeyPolicy::kYes, ssh::HostKeyPolicy::kAcceptNew, ssh::HostKeyPolicy::kNo}) {
    if (ssh::to_string(p) == s) return p;
  }
  return std::nullopt;
}

}  // namespace

std::string encode_relay_open(const RelayOpen& open) {
  std::string out;
  put_string(out, kOpenVersion);
  put_string(out, std::to_string(open.timeout.count()));
  put_string(out, std::to_string(open.max_connecting));
  for (const RelayTarget& h : open.hosts) {
    const ssh::Target& t = h.target;
    put_string(out, std::to_string(h.id));
    put_string(out, t.alias);
    put_string(out, t.hostname);
    put_string(out, t.user);
    put_string(out, std::to_string(t.port));
    put_string(out, join(t.identity_files));
    put_string(out, t.identity_files_are_defaults ? "1" : "0");
    put_string(out, t.identities_only ? "1" : "0");
    put_string(out, std::to_string(t.connect_timeout.count()));
    put_string(out, ssh::to_string(t.host_key_policy));
    put_string(out, join(t.known_hosts_files));
    put_string(out, h.command);
    put_string(out, h.marker);
  }
  return out;
}

std::optional<RelayOpen> decode_relay_open(std::string_view payload) {
  const auto fields = split_strings(payload);
  if (!fields || fields->size() < 3 || (*fields)[0] != kOpenVersion) return std::nullopt;
  const std::vector<std::string_view>& f = *fields;
  if ((f.size() - 3) % kHostFields != 0) return std::nullopt;
  RelayOpen open;
  const auto timeout = number<long long>(f[1]);
  const auto connecting = number<int>(f[2]);
  if (!timeout || *timeout < 0 || *timeout > kMaxTimeoutSeconds * 1000 || !connecting ||
      *connecting < 1) {
    return std::nullopt;
  }
  open.timeout = std::chrono::milliseconds(*timeout);
  open.max_connecting = *connecting;
  for (std::size_t i = 3; i < f.size(); i += kHostFields) {
    RelayTarget h;
    ssh::Target& t = h.target;
    const auto id = number<std::uint32_t>(f[i]);
    const auto port = number<int>(f[i + 4]);
    const auto defaults = flag(f[i + 6]);
    const auto only = flag(f[i + 7]);
    const auto connect = number<long long>(f[i + 8]);
    const auto keys = policy(f[i + 9]);
    if (!id || !port || *port < 1 || *port > 65535 || !defaults || !only || !connect ||
        *connect < 0 || *connect > kMaxTimeoutSeconds || !keys || f[i + 2].empty()) {
      return std::nullopt;
    }
    for (const RelayTarget& other : open.hosts) {
      if (other.id == *id) return std::nullopt;  // two hosts under one id
    }
    h.id = *id;
    t.alias.assign(f[i + 1]);
    t.hostname.assign(f[i + 2]);
    t.user.assign(f[i + 3]);
    t.port = *port;
    t.identity_files = split(f[i + 5]);
    t.identity_files_are_defaults = *defaults;
    t.identities_only = *only;
    t.connect_timeout = std::chrono::seconds(*connect);
    t.host_key_policy = *keys;
    t.known_hosts_files = split(f[i + 10]);
    h.command.assign(f[i + 11]);
    h.marker.assign(f[i + 12]);
    open.hosts.push_back(std::move(h));
  }
  return open;
}

std::string encode_relay_ready(const RelayReady& ready) {
  std::string out;
  put_string(out, kReadyVersion);
  put_string(out, ready.error);
  put_string(out, ready.ran ? "1" : "0");
  put_string(out, std::to_string(ready.run.exit_status));
  put_string(out, ready.run.exit_signal);
  put_string(out, ready.run.out);
  put_string(out, ready.run.err);
  put_string(out, ready.started ? "1" : "0");
  put_string(out, ready.started_rest);
  put_string(out, ready.local_address);
  put_string(out, ready.remote_endpoint);
  return out;
}

std::optional<RelayReady> decode_relay_ready(std::string_view payload) {
  const auto fields = split_strings(payload);
  if (!fields || fields->size() != kReadyFields || (*fields)[0] != kReadyVersion) {
    return std::nullopt;
  }
  const std::vector<std::string_view>& f = *fields;
  const auto ran = flag(f[2]);
  const auto status = number<int>(f[3]);
  const auto started = flag(f[7]);
  if (!ran || !status || !started) return std::nullopt;
  RelayReady r;
  r.error.assign(f[1]);
  r.ran = *ran;
  r.run.exit_status = *status;
  r.run.exit_signal.assign(f[4]);
  r.run.out.assign(f[5]);
  r.run.err.assign(f[6]);
  r.started = *started;
  r.started_rest.assign(f[8]);
  r.local_address.assign(f[9]);
  r.remote_endpoint.assign(f[10]);
  return r;
}

}  // namespace hora::cli::agent
