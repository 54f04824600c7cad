// Automatic interface discovery (docs/network.md, "How interfaces are chosen"; the probe
// protocol is in cli/network/probe.h). Runs through the agents the preflight started
// (remote_hosts.h), before any rank starts: remote probes are children of the host's agent
// (cli/agent/), so they cost no SSH exec and no login shell. This machine, when it is one of the
// hosts, takes part in-process (ProbeListener on a thread, probe_connect() on another):
//   1. on every host at once: `<horarun> --probe-listen TOKEN_i` (TOKEN_i random, distinct per
//      host), stdin kept open, stdout read until "ready";
//   2. on every host at once: `<horarun> --probe-connect <every other host's endpoints>`, read
//      until the command ends;
//   3. the listeners' stdin is closed; they exit 0.
// One deadline bounds the whole sequence. Threading: runs on the caller's thread, driving every
// agent's stream with one poll() loop (no other thread may use them meanwhile); the local
// probes' threads are joined before it returns or throws.
#pragma once

#include <string>
#include <vector>

#include "cli/agent/agent_link.h"
#include "cli/base/errors.h"
#include "cli/network/choice.h"
#include "ssh/session.h"

namespace hora::cli {

struct DiscoveryTarget {
  std::string name;  // the host as in -H (error messages, reachability table)
  // The agent running on that host (remote_hosts.h), not used by anyone else now; nullptr: the
  // host is this machine and its probes run in-process.
  agent::AgentLink* agent = nullptr;
};

// Measures which interface of every host every other host reaches. Throws NetworkError naming
// the host, the step and the fix (--network-interfaces, --start-timeout) when a probe cannot
// run, fails or the deadline passes.
Reachability discover_reachability(const std::vector<DiscoveryTarget>& hosts,
                                   ssh::Clock::time_point deadline);

}  // namespace hora::cli
