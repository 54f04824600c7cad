// Durations as people read them in messages: "250 ms", "2 s", "2.5 s". One spelling for every
// timeout and stall message in hora (launcher, ssh, rendezvous, runtime).
#pragma once

#include <chrono>
#include <string>

namespace hora {

// Below one second: whole milliseconds ("250 ms", "0 ms"). From one second: seconds with one
// decimal, rounded to the nearest tenth, without a trailing ".0" ("1 s", "1.5 s", "30 s").
// Negative durations read as "0 ms".
std::string format_duration(std::chrono::milliseconds d);

// Any other duration type, truncated to milliseconds.
template <class Rep, class Period>
std::string format_duration(std::chrono::duration<Rep, Period> d) {
  return format_duration(std::chrono::duration_cast<std::chrono::milliseconds>(d));
}

}  // namespace hora
