#include "rendezvous/horovod/socket_owner.h"

#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <sstream>

namespace hora::rdv::horovod {

std::string proc_net_endpoint(const boost::asio::ip::tcp::endpoint& ep) {
  // The kernel prints each 32-bit word of the address as a native integer (%08X), the port in
  // host order (%04X).
  std::string out;
  if (ep.address().is_v4()) {
    const auto bytes = ep.address().to_v4().to_bytes();
    std::uint32_t word = 0;
    std::memcpy(&word, bytes.data(), 4);
    out = fmt::format("{:08X}", word);
  } else {
    const auto bytes = ep.address().to_v6().to_bytes();
    for (int i = 0; i < 4; ++i) {
      std::uint32_t word = 0;
      std::memcpy(&word, bytes.data() + 4 * i, 4);
      out += fmt::format("{:08X}", word);
    }
  }
  return out + fmt::format(":{:04X}", ep.port());
}

std::optional<uid_t> socket_owner(const boost::asio::ip::tcp::endpoint& peer,
                                  const boost::asio::ip::tcp::endpoint& local) {
  const std::string want_local = proc_net_endpoint(peer);
  const std::string want_remote = proc_net_endpoint(local);
  std::ifstream in(peer.address().is_v4() ? "/proc/net/tcp" : "/proc/net/tcp6");
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid ...
    std::istringstream row(line);
    std::string sl, loc, rem, st, queues, timer, retransmits;
    long uid = -1;
    if (!(row >> sl >> loc >> rem >> st >> queues >> timer >> retransmits >> uid)) continue;
    if (loc == want_local && rem == want_remote && uid >= 0) return static_cast<uid_t>(uid);
  }
  return std::nullopt;
}

}  // namespace hora::rdv::horovod
