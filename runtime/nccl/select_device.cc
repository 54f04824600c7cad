// Device selection is pure so that it is unit-tested on machines without a GPU; backend.cc feeds
// it HORA_CUDA_DEVICE and cudaGetDeviceCount().
#include <charconv>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "runtime/nccl/backend.h"

namespace hora::detail::nccl {

namespace {

// A non-negative decimal integer and nothing else (no sign, no spaces, no trailing text).
bool parse_index(std::string_view text, int& out) {
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc{} && ptr == end && out >= 0 && text.front() != '-' && text.front() != '+';
}

std::string visible(int device_count) {
  if (device_count == 1) return "only 1 CUDA device is visible (device 0)";
  return fmt::format("only {} CUDA devices are visible (devices 0..{})", device_count,
                     device_count - 1);
}

}  // namespace

int select_device(int local_rank, const char* hora_cuda_device_env, int device_count) {
  if (device_count <= 0) {
    throw UsageError(
        "no CUDA device is visible to this rank, so GPU collectives cannot run; check the driver "
        "(nvidia-smi) and CUDA_VISIBLE_DEVICES, or keep the buffers in host memory");
  }
  if (local_rank < 0) {
    throw UsageError(fmt::format("local rank {} is negative (HORA_LOCAL_RANK)", local_rank));
  }
  std::string_view env = hora_cuda_device_env ? hora_cuda_device_env : "";
  if (env.empty()) {
    if (local_rank >= device_count) {
      throw UsageError(fmt::format(
          "local rank {} would use CUDA device {}, but {}; start at most {} ranks per host "
          "(-H host:{}), or set HORA_CUDA_DEVICE (a device, or one per local rank: \"0,1\"); "
          "hora.torch can instead stage CUDA tensors through host memory: "
          "HORA_GPU_OPERATIONS=host",
          local_rank, local_rank, visible(device_count), device_count, device_count));
    }
    return local_rank;
  }

  std::vector<std::string_view> entries;
  for (std::size_t start = 0;;) {
    std::size_t comma = env.find(',', start);
    entries.push_back(env.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  const bool per_rank = entries.size() > 1;
  if (per_rank && static_cast<std::size_t>(local_rank) >= entries.size()) {
    throw UsageError(fmt::format(
        "HORA_CUDA_DEVICE=\"{}\" lists {} devices (one per local rank) but this rank has local "
        "rank {}; list one device for every rank on the host",
        env, entries.size(), local_rank));
  }
  std::string_view entry = per_rank ? entries[static_cast<std::size_t>(local_rank)] : entries[0];
  int device = -1;
  if (!parse_index(entry, device)) {
    throw UsageError(fmt::format(
        "HORA_CUDA_DEVICE=\"{}\" is not a device index: expected a non-negative integer (\"1\") "
        "or a comma-separated list with one per local rank (\"0,2\"); bad entry \"{}\"",
        env, entry));
  }
  if (device >= device_count) {
    throw UsageError(fmt::format(
        "HORA_CUDA_DEVICE=\"{}\" selects CUDA device {} for local rank {}, but {}; note that "
        "indices count the devices left visible by CUDA_VISIBLE_DEVICES",
        env, device, local_rank, visible(device_count)));
  }
  return device;
}

}  // namespace hora::detail::nccl
