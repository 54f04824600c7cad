// libFuzzer harness: the -H host list and the hostfile parser (cli/hosts/host_list.h; the cli
// folder may move it to cli/hosts/). The same input is parsed as an -H argument and as a hostfile.
// Properties checked:
//   * the parsers either throw UsageError or return hosts with a name and 1..kMaxSlots slots;
//   * an accepted host list, written back as `user@address:slots,...`, parses to the same hosts.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cli/base/errors.h"
#include "cli/hosts/host_list.h"
#include "fuzz/fuzz_check.h"

namespace cli = hora::cli;

namespace {

void check_hosts(const std::vector<cli::HostSpec>& hosts) {
  for (const cli::HostSpec& h : hosts) {
    FUZZ_CHECK(!h.name.empty());
    FUZZ_CHECK(h.slots >= 1 && h.slots <= cli::HostSpec::kMaxSlots);
  }
}

std::string write_back(const std::vector<cli::HostSpec>& hosts) {
  std::string out;
  for (const cli::HostSpec& h : hosts) {
    if (!out.empty()) out += ',';
    if (!h.user.empty()) out += h.user + "@";
    out += h.address_for_display() + ":" + std::to_string(h.slots);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const std::vector<cli::HostSpec> hosts = cli::parse_host_list(text);
    check_hosts(hosts);
    (void)cli::total_slots(hosts);
    if (!hosts.empty()) {
      const std::string again = write_back(hosts);
      std::vector<cli::HostSpec> reparsed;
      try {
        reparsed = cli::parse_host_list(again);
      } catch (const cli::UsageError& e) {
        std::fprintf(stderr, "written back as '%s', it fails: %s\n", again.c_str(), e.what());
        FUZZ_CHECK(!"an accepted host list, written back, parses");
      }
      FUZZ_CHECK(reparsed == hosts);
    }
  } catch (const cli::UsageError&) {
  }
  try {
    const std::vector<cli::HostSpec> hosts = cli::parse_hostfile(text, "fuzz-hostfile");
    check_hosts(hosts);
    (void)cli::total_slots(hosts);
  } catch (const cli::UsageError&) {
  }
  return 0;
}
