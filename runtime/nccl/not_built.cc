// The one message for "this needs NCCL" (built with and without NCCL: runtime/api/cuda.cc and
// disabled.cc throw it).
#include <fmt/format.h>
#include <hora/error.h>

#include "runtime/nccl/backend.h"

namespace hora::detail::nccl {

void throw_not_built(const char* what) {
  throw UsageError(
      fmt::format("{}: hora was built without NCCL (rebuild with -Dnccl=enabled on a "
                  "machine with CUDA and NCCL)",
                  what));
}

}  // namespace hora::detail::nccl
