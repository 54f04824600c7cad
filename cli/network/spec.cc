#include "cli/network/spec.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "cli/base/errors.h"
#include "common/text.h"

namespace hora::cli {
namespace {

constexpr std::size_t kMaxInterfaceName = 15;  // IFNAMSIZ - 1

void add_unique(std::vector<std::string>& names, const std::string& name) {
  if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
}

constexpr const char* kForms =
    "use --network-interfaces eth0,eth1 (every host) or --network-interfaces "
    "server1=eth0,server2=ens5 (per host); both may be mixed";

}  // namespace

const std::vector<std::string>& NetworkSpec::names_for(const std::string& host) const {
  auto it = per_host.find(host);
  return it != per_host.end() ? it->second : global;
}

std::string interface_name_problem(const std::string& name) {
  if (name.empty()) return "the interface name is empty";
  if (name.size() > kMaxInterfaceName) {
    return fmt::format("interface names have at most {} characters, '{}' has {}", kMaxInterfaceName,
                       name, name.size());
  }
  if (name == "." || name == "..") return fmt::format("'{}' is not an interface name", name);
  for (char c : name) {
    if (c == '/' || c == ':' || c == '=' || c == ',' ||
        std::isspace(static_cast<unsigned char>(c)) ||
        !std::isprint(static_cast<unsigned char>(c))) {
      return fmt::format(
          "interface name '{}' contains '{}', which Linux interface names cannot hold", name,
          c == '\t' ? std::string("\\t") : std::string(1, c));
    }
  }
  return {};
}

NetworkSpec parse_network_spec(const std::vector<std::string>& items) {
  NetworkSpec spec;
  for (const std::string& raw : items) {
    std::size_t start = 0;
    while (true) {
      const std::size_t comma = raw.find(',', start);
      const std::string item(trim(raw.substr(start, comma - start)));
      start = comma + 1;
      if (item.empty()) {
        throw UsageError(fmt::format("--network-interfaces '{}': empty item; {}", raw, kForms));
      }
      const std::size_t eq = item.find('=');
      if (eq == std::string::npos) {
        if (std::string why = interface_name_problem(item); !why.empty()) {
          throw UsageError(fmt::format("--network-interfaces '{}': {}; {}", item, why, kForms));
        }
        add_unique(spec.global, item);
      } else {
        const std::string host(trim(item.substr(0, eq)));
        const std::string name(trim(item.substr(eq + 1)));
        if (host.empty()) {
          throw UsageError(fmt::format(
              "--network-interfaces '{}': no host before '='; write HOST=INTERFACE, e.g. "
              "server1=eth0",
              item));
        }
        if (name.empty()) {
          throw UsageError(fmt::format(
              "--network-interfaces '{}': no interface after '='; write HOST=INTERFACE, e.g. "
              "{}=eth0",
              item, host));
        }
        if (name.find('=') != std::string::npos) {
          throw UsageError(fmt::format(
              "--network-interfaces '{}': more than one '='; write HOST=INTERFACE, e.g. {}=eth0",
              item, host));
        }
        if (std::string why = interface_name_problem(name); !why.empty()) {
          throw UsageError(fmt::format("--network-interfaces '{}': {}; {}", item, why, kForms));
        }
        add_unique(spec.per_host[host], name);
      }
      if (comma == std::string::npos) break;
    }
  }
  return spec;
}

std::string format_network_spec(const NetworkSpec& spec) {
  std::vector<std::string> parts = spec.global;
  for (const auto& [host, names] : spec.per_host) {
    for (const std::string& n : names) parts.push_back(host + "=" + n);
  }
  return fmt::format("{}", fmt::join(parts, ","));
}

}  // namespace hora::cli
