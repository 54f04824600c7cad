// The steps that forming Gloo contexts through the rendezvous shares between the job's mesh
// (mesh.h, at init()) and a process set's (set_mesh.h, at add_process_set()): creating a
// group's pairs, reading their ports, and connecting them with errors that name the peer.
// Internal to runtime/gloo.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gloo/transport/context.h>
#include <gloo/transport/device.h>

#include "runtime/core/abort_state.h"
#include "runtime/core/world.h"
#include "runtime/gloo/mesh_context.h"
#include "runtime/gloo/mesh_record.h"

namespace hora::detail::gloo {

// A context whose pairs exist but are not connected yet.
struct PendingContext {
  std::shared_ptr<MeshContext> context;
  std::vector<std::vector<char>> peer_addresses;  // by scope rank: the peer's pair for us
};

// Little-endian u16 fields of the rendezvous exchanges' slices.
inline void put_u16(std::uint8_t* at, std::uint16_t value) {
  at[0] = static_cast<std::uint8_t>(value);
  at[1] = static_cast<std::uint8_t>(value >> 8);
}
inline std::uint16_t get_u16(const std::uint8_t* at) {
  return static_cast<std::uint16_t>(at[0] | at[1] << 8);
}

// The port of every pair of `transport` (by peer), checking that they all share `base`: the
// assumption that lets a rank publish its address once (runtime/gloo/mesh_record.h).
std::vector<std::uint16_t> pair_ports(const WorldInfo& world, ::gloo::transport::Context& transport,
                                      int size, int self, PairAddressBase* base, bool* have_base);

// The port of this rank's pair for scope rank `slot` of `pending`; 0 when there is none.
std::uint16_t port_for(PendingContext& pending, int slot);

// How Gloo names a pair address in its messages ("[ip]:port", without the sequence number).
std::string gloo_name_of(const std::vector<char>& bytes);

// What is left until `deadline` (at least 1 ms).
std::chrono::milliseconds remaining(std::chrono::steady_clock::time_point deadline);

// The message of the exception being handled; call inside a catch block.
std::string current_message();

// A context over `members` (global ranks, in scope-rank order) with a pair for every other
// member, on `device`. hostname_of(global rank) names a member in messages. A pair waits up to
// 5x pair_timeout for its peer to connect (Gloo's rule).
std::shared_ptr<MeshContext> make_group_context(
    const std::vector<int>& members, int my_scope_rank,
    const std::function<std::string(int)>& hostname_of,
    const std::shared_ptr<::gloo::transport::Device>& device,
    std::chrono::milliseconds pair_timeout);

// Connects every pair of `pending` in increasing peer order. `call` is the API call forming it
// ("init()", "add_process_set()"), `scope` the group's name; failures are TimeoutError or
// ConnectionError naming the peer and the flag that fixes it (AbortedError after an abort).
void connect_context(const WorldInfo& world, const char* call, const char* scope,
                     PendingContext& pending, const AbortState& abort,
                     std::chrono::milliseconds budget);

}  // namespace hora::detail::gloo
