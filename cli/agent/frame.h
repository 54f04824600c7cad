// The agent protocol's frames (docs/agent.md): what horarun and `horarun --agent` send each other
// over the agent's one channel (an SSH exec channel's stdin/stdout, or srun's pipes) once the agent
// printed "HORA-AGENT ready". Every frame is
//
//     u8 type | u32 id | u32 length | payload (length bytes)        integers big-endian
//
// `id` names one child of the agent (chosen by the launcher, unique per link). Frames of
// different children interleave; frames of one child keep their order. Socket- and process-free,
// so the decoder can be fuzzed (fuzz/agent_frame_fuzz.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hora::cli::agent {

enum class FrameType : std::uint8_t {
  // launcher -> agent
  kOpen = 0x01,      // start a child: payload = cwd NUL arg1 NUL arg2 ... (args of this binary)
  kStdin = 0x02,     // bytes for the child's stdin
  kStdinEof = 0x03,  // close the child's stdin once everything before it is written
  kClose = 0x04,     // close the child's stdin, stdout and stderr now (a guard stops its rank)
  // The fan-out tree (cli/agent/relay.h): the agent starts and carries other hosts' agents.
  kRelayOpen = 0x05,   // start agents on other hosts over SSH: payload = RelayOpen (relay.h)
  kRelayData = 0x06,   // id = relayed host: bytes for that host's agent's stdin (its frames)
  kRelayClose = 0x07,  // id = relayed host: close that host's channel (its agent stops)
  // id = relayed host: run `kill -KILL <pid>` there over the relaying agent's SSH session (a
  // relayed agent that stopped answering, docs/agent.md "Liveness"); payload = u32 pid.
  // RELAY_KILLED answers it.
  kRelayKill = 0x08,
  // agent -> launcher
  kStdout = 0x11,  // the child's stdout bytes
  kStderr = 0x12,  // the child's stderr bytes
  kExit = 0x13,    // the child ended: payload = u32 exit status | u32 signal (0 when none)
  kFailed = 0x14,  // the child could not be started: payload = the reason (text)
  // the child started: payload = u32 pid. Sent only by an agent started with --report-pids (the
  // launcher's own host, where a pid means something to the launcher: its stall check).
  kStarted = 0x15,
  // id = relayed host: its preflight's outcome (payload = RelayReady, relay.h). Exactly one per
  // host of a RELAY_OPEN; RELAY_OUTPUT/RELAY_STDERR/RELAY_ENDED follow only when it started.
  kRelayReady = 0x16,
  kRelayOutput = 0x17,  // id = relayed host: bytes its agent wrote on stdout (its frames)
  kRelayStderr = 0x18,  // id = relayed host: bytes its agent wrote on stderr
  kRelayEnded = 0x19,   // id = relayed host: its channel ended; payload = why (text)
  // Liveness (docs/agent.md, "Liveness"): id 0. HEARTBEAT every kHeartbeatInterval, payload =
  // u32 the agent's pid; the launcher ends a link it heard nothing on for its agent timeout.
  kHeartbeat = 0x1A,
  // id 0: the agent is ending by itself (a signal); payload = why ("was terminated by signal 15
  // (SIGTERM)"). Sent before it stops its children, so the launcher blames the agent.
  kEnding = 0x1B,
  // id = relayed host: RELAY_KILL's outcome; payload = what went wrong (text; empty: killed).
  kRelayKilled = 0x1C,
  // id = child: its rank's process state changed (a remote agent looks once a second; the
  // launcher's own host needs none, it reads /proc itself): payload = u8 state letter ('T'
  // stopped, 't' held by a debugger, 'D' uninterruptible sleep) | u32 pid on the agent's host,
  // or empty when the rank runs again.
  kState = 0x1D,
};

inline constexpr std::size_t kHeaderBytes = 9;
// The largest payload either side sends or accepts; writers split stdin/stdout into chunks.
inline constexpr std::size_t kMaxPayload = 1u << 20;
inline constexpr std::size_t kChunk = 64u << 10;

struct Frame {
  FrameType type = FrameType::kStdin;
  std::uint32_t id = 0;
  std::string payload;
};

// Appends one frame to `out`. `payload` must be at most kMaxPayload bytes.
void append_frame(std::string& out, FrameType type, std::uint32_t id, std::string_view payload);
// Appends `data` as as many frames of at most kChunk bytes as needed (none for empty data).
void append_chunked(std::string& out, FrameType type, std::uint32_t id, std::string_view data);

// Splits a byte stream into frames. feed() takes whatever arrived; next() returns complete
// frames in order. A frame of an unknown type or an oversized length makes error() non-empty,
// and the stream is unusable from there on (a peer that speaks something else).
class FrameDecoder {
 public:
  void feed(std::string_view data);
  std::optional<Frame> next();
  const std::string& error() const { return error_; }
  // Bytes received but not yet returned as a frame.
  std::size_t buffered() const { return buffer_.size() - start_; }

 private:
  std::string buffer_;
  std::size_t start_ = 0;
  std::string error_;
};

bool known_type(std::uint8_t type);
const char* type_name(FrameType type);

// kOpen's payload.
struct OpenRequest {
  std::string cwd;  // empty: the agent's own
  std::vector<std::string> args;
};
std::string encode_open(const OpenRequest& request);
// nullopt when the payload holds no argument or an empty one.
std::optional<OpenRequest> decode_open(std::string_view payload);

// kExit's payload.
struct ExitCode {
  std::uint32_t status = 0;
  std::uint32_t signal = 0;
};
std::string encode_exit(ExitCode code);
std::optional<ExitCode> decode_exit(std::string_view payload);

// kStarted's payload.
std::string encode_pid(std::uint32_t pid);
std::optional<std::uint32_t> decode_pid(std::string_view payload);

}  // namespace hora::cli::agent
