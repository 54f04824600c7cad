#include "runtime/shm/form_group.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "rendezvous/client.h"
#include "runtime/shm/segment.h"

namespace hora::detail::shm {

std::shared_ptr<ShmGroup> form_group(const WorldInfo& world, rdv::Client& client,
                                     std::chrono::steady_clock::time_point deadline,
                                     const char* purpose) {
  using Clock = std::chrono::steady_clock;
  const std::string key = fmt::format("hora/shm/{}/{}", world.host_index, purpose);
  auto left = [&] {
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  };
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
  return std::make_shared<ShmGroup>(name, options, deadline);
}

}  // namespace hora::detail::shm
