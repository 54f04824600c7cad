// A process set's Gloo contexts (<hora/process_set.h>): a global and an engine context over the
// set's members only, on the job mesh's device, formed through the rendezvous.
//
// Adding a set is a collective of the whole job, so every rank calls form_set_mesh() for every
// new set, in the same order, members or not. One GATHER "hora/pset/<id>/mesh"
// (docs/rendezvous.md): empty record; slice for rank j = u16 port of the sender's set pair for j |
// u16 port of its set engine pair for j, little-endian, 0 where the sender or j is not a member.
// Every member already knows every rank's pair address base from the job's layout exchange
// (Mesh::peers), so ports are all it needs. Members then connect their pairs in increasing peer
// order, as build_mesh() does.
#pragma once

#include <chrono>
#include <vector>

#include "rendezvous/client.h"
#include "runtime/core/abort_state.h"
#include "runtime/core/world.h"
#include "runtime/gloo/mesh.h"

namespace hora::detail::gloo {

// members: the set's global ranks, ascending. world: the set's world for a member (rank = its
// rank in the set), the job's for a non-member. Returns the set's Mesh (device, global, engine;
// no local, cross or sync contexts); for a non-member or a set of one, a Mesh without contexts.
// Every context is registered with `abort`. Throws hora::Error subclasses naming the step.
Mesh form_set_mesh(const Mesh& job, const WorldInfo& world, const std::vector<int>& members,
                   bool member, rdv::Client& client, AbortState& abort,
                   std::chrono::steady_clock::time_point deadline);

}  // namespace hora::detail::gloo
