// Rate limit for repeated log lines: the first occurrence of a kind is logged in full, the rest
// of its one-second window only counted, and each window with counted occurrences ends in one
// summary line with the window's count ("rejected 812 connections from 127.0.0.1 in the last
// 1 s: bad frame"). While the flood goes on, windows follow each other, so it costs one line per
// kind per second however fast it comes; a window without any ends the watch.
//
// No clock and no timer of its own: the caller passes the time and calls flush() at
// next_flush() (the rendezvous server arms an Asio timer for it). Not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hora {

class LogThrottle {
 public:
  using Clock = std::chrono::steady_clock;
  // Builds the summary line for `count` occurrences counted in one window.
  using Summary = std::function<std::string(std::uint64_t count)>;

  explicit LogThrottle(std::chrono::milliseconds window = std::chrono::seconds(1))
      : window_(window) {}

  // True: log this occurrence in full (the kind was quiet). False: only counted; `summary` will
  // word the window's count.
  bool admit(const std::string& kind, Clock::time_point now, Summary summary);

  // Summary lines of every window that ended by `now` with counted occurrences. A kind whose
  // window ended without any is quiet again.
  std::vector<std::string> flush(Clock::time_point now);

  // When the next window ends, if any kind is being watched.
  std::optional<Clock::time_point> next_flush() const;

  std::chrono::milliseconds window() const { return window_; }

 private:
  struct Kind {
    Clock::time_point window_end;
    std::uint64_t count = 0;  // occurrences in this window, the one logged in full included
    bool suppressed = false;  // some were only counted: the window ends in a summary
    Summary summary;
  };
  std::chrono::milliseconds window_;
  std::map<std::string, Kind> kinds_;
};

}  // namespace hora
