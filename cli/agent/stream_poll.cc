#include "cli/agent/stream_poll.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

namespace hora::cli::agent {

void pump_streams(const std::vector<Stream*>& streams) {
  for (Stream* s : streams) s->pump();
}

bool pump_streams_until(const std::vector<Stream*>& streams,
                        std::chrono::steady_clock::time_point deadline,
                        const std::function<bool()>& done, std::chrono::milliseconds cap) {
  pump_streams(streams);
  while (!done()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    std::vector<pollfd> fds;
    bool again = false;
    for (Stream* s : streams) {
      const Stream::Interest in = s->interest();
      again = again || in.again;
      short ev = 0;
      if (in.read) ev |= POLLIN;
      if (in.write) ev |= POLLOUT;
      if (s->fd() >= 0) fds.push_back(pollfd{s->fd(), ev, 0});
    }
    // Rounded up so the wait never ends before the deadline it aims at.
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
    const int timeout = again ? 0 : static_cast<int>(std::min<long long>(left, cap.count()));
    if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) {
      throw std::system_error(errno, std::generic_category(), "poll");
    }
    pump_streams(streams);
  }
  return true;
}

}  // namespace hora::cli::agent
