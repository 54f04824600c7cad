#include <hora/error.h>

#include <utility>

#include "runtime/core/peer_loss.h"

namespace hora {

Error::Error(const std::string& message, int rank, std::string host)
    : std::runtime_error(message), rank_(rank), host_(std::move(host)) {}

PeerFailure::PeerFailure(const std::string& message, int rank, std::string host, int peer)
    : Error(message, rank, std::move(host)), peer_(peer) {
  detail::note_peer_loss(peer);  // the launcher learns whom this rank's failure points at
}

}  // namespace hora
