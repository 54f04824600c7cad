// Blocking waits on agent Streams (agent_link.h) outside an io_context: the preflight's wait for
// relayed hosts (cli/remote/remote_hosts.cc) and network discovery's probes (cli/network/).
#pragma once

#include <chrono>
#include <functional>
#include <vector>

#include "cli/agent/agent_link.h"

namespace hora::cli::agent {

// Pumps every stream once.
void pump_streams(const std::vector<Stream*>& streams);

// Pumps `streams` until done() or `deadline`; false on timeout. Waits on all their descriptors at
// once (a stream without one, fd() -1, is moved by the stream that carries it), at most `cap` per
// wait so that something done() watches besides the streams is seen that often. Throws
// std::system_error when poll() fails.
bool pump_streams_until(const std::vector<Stream*>& streams,
                        std::chrono::steady_clock::time_point deadline,
                        const std::function<bool()>& done,
                        std::chrono::milliseconds cap = std::chrono::milliseconds(1000));

}  // namespace hora::cli::agent
