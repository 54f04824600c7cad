#include "runtime/shm/form_group.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "rendezvous/client.h"
#include "runtime/shm/segment.h"

namespace hora::detail::shm {

std::shared_ptr<ShmGroup> form_group(const WorldInfo& world, rdv::Client& client,
                                     std::chrono::steady_clock::time_point deadline,
                                     const char* purpose,
                                     std::function<std::optional<std::string>()> aborted) {
  using Clock = std::chrono::steady_clock;
  auto left = [&] {
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  };
  // A key of its own per init(): the store keeps a key's value, so a key shared by every init()
  // would hand the later ones the first init()'s segment name, long unlinked. n counts the
  // groups of this purpose that this local rank has formed through this rendezvous server: the
  // job's, or the elastic round's (each round has a server of its own). Every local rank of a
  // host forms each group together, so their counts agree without asking each other.
  const std::string base = fmt::format("hora/shm/{}/{}", world.host_index, purpose);
  const std::int64_t n = client.add(fmt::format("{}/formed/{}", base, world.local_rank), 1, left());
  const std::string key = fmt::format("{}/{}", base, n);
  std::string name;
  if (world.local_rank == 0) {
    name = Segment::make_name(world.secret.data(), world.secret.size(), world.host_index);
    client.set(key, rdv::Bytes(name.begin(), name.end()), left());
  } else {
    const rdv::Bytes bytes = client.get(key, left());
    name.assign(bytes.begin(), bytes.end());
  }
  ShmOptions options;
  options.local_rank = world.local_rank;
  options.local_size = world.local_size;
  options.global_rank = world.rank;
  options.host = world.hostname;
  options.timeout = world.timeout;
  options.aborted = std::move(aborted);
  return std::make_shared<ShmGroup>(name, options, deadline);
}

}  // namespace hora::detail::shm
