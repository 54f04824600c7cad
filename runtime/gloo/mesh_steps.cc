#include "runtime/gloo/mesh_steps.h"

#include <algorithm>
#include <exception>

#include <fmt/format.h>
#include <gloo/transport/tcp/address.h>
#include <hora/error.h>

#include "runtime/core/error_translation.h"

namespace hora::detail::gloo {

std::vector<std::uint16_t> pair_ports(const WorldInfo& world, ::gloo::transport::Context& transport,
                                      int size, int self, PairAddressBase* base, bool* have_base) {
  std::vector<std::uint16_t> ports(static_cast<std::size_t>(size), 0);
  for (int j = 0; j < size; ++j) {
    if (j == self) continue;
    PairAddressBase b;
    ports[j] = split_pair_address(transport.getPair(j)->address().bytes(), &b);
    if (!*have_base) {
      *base = b;
      *have_base = true;
    } else if (!(b == *base)) {
      throw Error(fmt::format("{}: init(): this Gloo's pairs do not share one address and sequence "
                              "number (pair for rank {}: {}); hora's mesh exchange needs pairs "
                              "that differ only in their port",
                              who(world), j, format_pair_endpoint(b, ports[j])),
                  world.rank, world.hostname);
    }
  }
  return ports;
}

std::uint16_t port_for(PendingContext& pending, int slot) {
  if (!pending.context || slot < 0) return 0;
  PairAddressBase base;
  return split_pair_address(pending.context->transport().getPair(slot)->address().bytes(), &base);
}

std::string gloo_name_of(const std::vector<char>& bytes) {
  const ::gloo::transport::tcp::Address address(bytes);
  // Gloo prints a pair's address with its sequence number ("$n"); errors print the socket
  // address without it. Keep the part before '$' so both match.
  std::string name = address.str();
  return name.substr(0, name.find('$'));
}

std::chrono::milliseconds remaining(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return std::max(left, std::chrono::milliseconds(1));
}

std::string current_message() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

std::shared_ptr<MeshContext> make_group_context(
    const std::vector<int>& members, int my_scope_rank,
    const std::function<std::string(int)>& hostname_of,
    const std::shared_ptr<::gloo::transport::Device>& device,
    std::chrono::milliseconds pair_timeout) {
  std::vector<MeshPeer> peers(members.size());
  for (std::size_t i = 0; i < members.size(); ++i) {
    peers[i].global_rank = members[i];
    peers[i].hostname = hostname_of(members[i]);
  }
  auto context = std::make_shared<MeshContext>(my_scope_rank, std::move(peers));
  auto transport = device->createContext(my_scope_rank, static_cast<int>(members.size()));
  // The operations set their own timeouts. Pairs are created before the context is reachable
  // from the abort path, so the abort hook never races with pair creation.
  transport->setTimeout(pair_timeout);
  for (int i = 0; i < static_cast<int>(members.size()); ++i) {
    if (i != my_scope_rank) transport->createPair(i);
  }
  context->attach(device, std::move(transport));
  return context;
}

void connect_context(const WorldInfo& world, const char* call, const char* scope,
                     PendingContext& pending, const AbortState& abort,
                     std::chrono::milliseconds budget) {
  MeshContext& context = *pending.context;
  for (int i = 0; i < context.size; ++i) {
    if (i == context.rank) continue;
    const MeshPeer peer = context.member(i);
    try {
      context.transport().getPair(i)->connect(pending.peer_addresses[i]);
    } catch (...) {
      const std::string step =
          fmt::format("{}: connecting the {} Gloo pair to rank {} ({}, {})", call, scope,
                      peer.global_rank, peer.hostname, peer.endpoint);
      if (abort.reason()) rethrow_translated(world, step, abort, "");
      const std::string why = current_message();
      const std::string fix = fmt::format(
          "check that {} can reach {} (firewall, or the wrong interface: set it with horarun "
          "--network-interfaces / HORA_IFACE)",
          world.hostname, peer.endpoint);
      if (why.find("timeout") != std::string::npos || why.find("Timed out") != std::string::npos) {
        throw TimeoutError(fmt::format("{}: {} timed out after {} ms: {}; that rank may have died "
                                       "(see its output), or {}; raise --start-timeout "
                                       "(HORA_START_TIMEOUT)",
                                       who(world), step, budget.count(), why, fix),
                           world.rank, world.hostname);
      }
      throw ConnectionError(fmt::format("{}: {} failed: {}; {}", who(world), step, why, fix),
                            world.rank, world.hostname);
    }
  }
}

}  // namespace hora::detail::gloo
