// A Chrome trace (JSON array format: chrome://tracing, https://ui.perfetto.dev) of what the
// engine did with each tensor. Written by rank 0 only (the order of ops is the same on every
// rank; the other ranks would write the same rows shifted in time).
//
// Layout: one row ("process") per tensor name, created on first use with a process_name metadata
// event, and row 0 "engine cycles" for cycle markers. Per op, complete events ("ph":"X") in order:
//   NEGOTIATE_<OP>             submission until every rank had submitted it (cache hits included)
//   QUEUE                      agreed, waiting for earlier ops of the cycle to finish
//   MEMCPY_IN_FUSION_BUFFER    (fused allreduces only) packing into the fusion buffer
//   <OP>                       the collective itself (ALLREDUCE, ALLGATHER, ...);
//                              args: bytes, fused (tensors in the batch), batch (batch id)
//   MEMCPY_OUT_FUSION_BUFFER   (fused allreduces only) unpacking
// Cycle markers ("ph":"i", CYCLE_START) are written with HORA_TIMELINE_MARK_CYCLES=1 (or
// start_timeline's mark_cycles), for cycles that negotiated or ran something (idle cycles are
// skipped to keep the file small). Times count from open(); an op submitted before it starts
// its NEGOTIATE span at 0.
//
// Opened at engine start (HORA_TIMELINE) or at run time (hora::start_timeline, which may switch
// to another file), closed by hora::stop_timeline or engine shutdown.
// Threading: only the thread that holds Engine::cycle_mu_ calls it (the cycle's thread, or
// hora::start_timeline/stop_timeline's caller between cycles). The file is valid JSON once
// close() ran (stop_timeline, engine shutdown, at the latest the runtime's atexit shutdown);
// until then it lacks the closing "]".
#pragma once

#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>
#include <unordered_map>

namespace hora::detail::engine {

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;

  Timeline() = default;
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;
  ~Timeline() { close(); }

  // Closes the current file (if any), then creates (truncates) path; throws hora::Error naming
  // the path, the reason and `fix` (the variable, flag or call that named the path).
  void open(const std::string& path, bool mark_cycles,
            std::string_view fix = "HORA_TIMELINE / horarun --timeline-filename");
  bool enabled() const { return file_ != nullptr; }
  const std::string& path() const { return path_; }  // the open file's; empty when closed
  void set_mark_cycles(bool mark_cycles) { mark_cycles_ = mark_cycles; }

  // A complete event on the tensor's row. args_json, when not empty, is a JSON object's members
  // without braces, e.g. "\"bytes\":4096,\"fused\":3".
  void span(const std::string& tensor, std::string_view activity, Clock::time_point start,
            Clock::time_point end, std::string_view args_json = {});
  void mark_cycle(Clock::time_point when);
  // Pushes buffered events to the file (the engine calls it at the end of busy cycles).
  void flush();
  // Terminates the JSON array and closes the file. Idempotent.
  void close();

 private:
  int row(const std::string& tensor);
  void event(const std::string& json);
  long long micros(Clock::time_point t) const;

  std::FILE* file_ = nullptr;
  std::string path_;
  bool mark_cycles_ = false;
  bool first_event_ = true;
  Clock::time_point origin_;
  std::unordered_map<std::string, int> rows_;
};

}  // namespace hora::detail::engine
