// Who a rank blames when it fails: the first PeerFailure with a known peer that this process
// raises is reported once to a sink the Runtime installs, which writes it to the rendezvous
// (rdv::peer_lost_key(rank) = "<peer>", rendezvous/wire.h). The launcher reads it when it names the
// job's cause: a rank that failed because a peer died points at that peer, whatever order their
// connections happened to close in (docs/launcher.md, "Failure policy").
#pragma once

#include <functional>

namespace hora::detail {

// Installs `sink` (called at most once per process, with the peer's global rank, from the thread
// that raises the PeerFailure); returns a token for clear_peer_loss_sink. An empty sink clears.
int set_peer_loss_sink(std::function<void(int peer)> sink);
// Removes the sink installed with `token` (a later Runtime's sink stays). Waits for a call of it
// in progress to return, so the sink's captures may be destroyed afterwards.
void clear_peer_loss_sink(int token);

// Called by PeerFailure's constructor; a no-op without a sink, for peer < 0, and after the first.
void note_peer_loss(int peer);

}  // namespace hora::detail
