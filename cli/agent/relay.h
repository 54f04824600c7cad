// The fan-out tree's payloads (docs/agent.md, "Relayed hosts"). Past --ssh-fanout remote hosts,
// horarun connects over SSH to that many hosts only; each of their agents then preflights and
// starts the agents of a share of the other hosts over SSH from where it runs, and carries their
// bytes in RELAY_* frames (frame.h). The launcher sees each relayed host as an agent of its own
// (relay_stream.h); the relaying agent's side is relay_children.h.
//
// A payload is a list of strings, each `u32 length | bytes` (big-endian), so no field needs
// escaping. Socket- and process-free, so the decoders can be fuzzed (fuzz/agent_frame_fuzz.cc).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ssh/config.h"
#include "ssh/session.h"

namespace hora::cli::agent {

// One host a relaying agent is to start an agent on: what the launcher resolved through its
// ssh_config (connect exactly there, with those keys and known_hosts files), and the probe
// command (cli/remote/remote_hosts.h, probe_command) that checks the binary and runs
// `horarun --agent`, kept running after `marker` (agent.h, kReadyLine).
struct RelayTarget {
  std::uint32_t id = 0;  // names the host in every RELAY_* frame of this link
  ssh::Target target;
  std::string command;
  std::string marker;
};

// RELAY_OPEN's payload.
struct RelayOpen {
  std::chrono::milliseconds timeout{0};  // for the whole preflight of these hosts
  int max_connecting = 8;                // SSH handshakes in flight at once (ssh/preflight.h)
  std::vector<RelayTarget> hosts;
};

// RELAY_READY's payload: what the relaying agent's ssh::probe_hosts said of one host. The
// launcher judges it exactly as its own preflight's results (remote_hosts.cc).
struct RelayReady {
  std::string error;  // empty: connected and the probe ran (`run` then says how it went)
  bool ran = false;
  ssh::RunResult run;
  bool started = false;         // the marker came: the agent runs and RELAY_OUTPUT follows
  std::string started_rest;     // what the agent printed after the marker
  std::string local_address;    // the relaying host's address as the relayed host saw it
  std::string remote_endpoint;  // where the relaying host connected ("198.18.0.13:12345")
};

std::string encode_relay_open(const RelayOpen& open);
// nullopt for a payload that is not one (truncated, wrong field count, a bad number, a timeout
// over 30 days, two hosts with one id).
std::optional<RelayOpen> decode_relay_open(std::string_view payload);

std::string encode_relay_ready(const RelayReady& ready);
std::optional<RelayReady> decode_relay_ready(std::string_view payload);

}  // namespace hora::cli::agent
