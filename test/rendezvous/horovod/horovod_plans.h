// Scope plans for the tests of Horovod's HTTP rendezvous (rendezvous/horovod/scope_plan.h).
#pragma once

#include <string>

#include "rendezvous/horovod/scope_plan.h"

namespace hora::rdv::horovod::test {

// The plan of `hosts` hosts with `per_host` ranks each, host names h0, h1..., ranks numbered
// host by host.
inline ScopePlan plan_of(int hosts, int per_host) {
  ScopePlan p;
  p.world_size = hosts * per_host;
  for (int h = 0; h < hosts; ++h) {
    for (int l = 0; l < per_host; ++l) {
      p.add_rank("h" + std::to_string(h), {h * per_host + l, l, per_host, h, hosts});
    }
  }
  return p;
}

}  // namespace hora::rdv::horovod::test
