// Where a buffer lives, asked of CUDA (compiled only with NCCL; disabled.cc stands in
// otherwise): whether a GPU is there, whether a CUDA context exists yet, and what a pointer
// points to. The rules are in backend.h; the routing (Runtime::plan) calls these for every
// collective, so each answer is cheap once cached.
#include <atomic>

#include <cuda.h>  // driver API types only: the functions come from cudart's entry-point query
#include <cuda_runtime.h>

#include "runtime/nccl/backend.h"

namespace hora::detail::nccl {

bool gpu_available() {
  static const bool available = [] {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      cudaGetLastError();  // no driver or no device: report "no GPU", keep CUDA's state clean
      return false;
    }
    return count > 0;
  }();
  return available;
}

namespace {

// Whether any CUDA context exists in this process, asked without creating one.
//
// Why: the host collectives of <hora/hora.h> classify every buffer, and cudaPointerGetAttributes
// may create the primary context of the current device. A CPU-only job on GPU hosts would then
// pin a context (hundreds of MB) on GPU 0 in every rank. No device memory can exist before some
// context does, so while none does, every buffer is host memory. Once a context is seen the
// answer stays yes (contexts are not expected to disappear while buffers are in use).
//
// The driver functions are fetched through cudart (no link against libcuda, which hosts
// without a driver lack). When they cannot be fetched, the answer is "maybe" (true), which
// falls back to cudaPointerGetAttributes.
bool cuda_context_in_use() {
  static std::atomic<bool> seen{false};
  if (seen.load(std::memory_order_relaxed)) return true;

  using CtxGetCurrent = CUresult (*)(CUcontext*);
  using DeviceGet = CUresult (*)(CUdevice*, int);
  using PrimaryCtxGetState = CUresult (*)(CUdevice, unsigned int*, int*);
  struct Driver {
    CtxGetCurrent ctx_get_current = nullptr;
    DeviceGet device_get = nullptr;
    PrimaryCtxGetState primary_ctx_get_state = nullptr;
    int devices = 0;
    bool ok = false;
  };
  static const Driver driver = [] {
    Driver d;
    auto fetch = [](const char* name, void** fn) {
      cudaDriverEntryPointQueryResult status{};
      cudaError_t e = cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &status);
      if (e != cudaSuccess) cudaGetLastError();  // keep CUDA's error state clean
      return e == cudaSuccess && status == cudaDriverEntryPointSuccess && *fn != nullptr;
    };
    void* a = nullptr;
    void* b = nullptr;
    void* c = nullptr;
    d.ok = fetch("cuCtxGetCurrent", &a) && fetch("cuDeviceGet", &b) &&
           fetch("cuDevicePrimaryCtxGetState", &c) && cudaGetDeviceCount(&d.devices) == cudaSuccess;
    if (!d.ok) cudaGetLastError();
    d.ctx_get_current = reinterpret_cast<CtxGetCurrent>(a);
    d.device_get = reinterpret_cast<DeviceGet>(b);
    d.primary_ctx_get_state = reinterpret_cast<PrimaryCtxGetState>(c);
    return d;
  }();
  if (!driver.ok) return true;

  bool in_use = false;
  CUcontext current = nullptr;
  if (driver.ctx_get_current(&current) != CUDA_SUCCESS || current != nullptr) in_use = true;
  for (int i = 0; !in_use && i < driver.devices; ++i) {
    CUdevice device{};
    unsigned int flags = 0;
    int active = 0;
    if (driver.device_get(&device, i) != CUDA_SUCCESS ||
        driver.primary_ctx_get_state(device, &flags, &active) != CUDA_SUCCESS || active != 0) {
      in_use = true;  // an active primary context, or no answer: ask cudaPointerGetAttributes
    }
  }
  if (in_use) seen.store(true, std::memory_order_relaxed);
  return in_use;
}

}  // namespace

PointerInfo pointer_info(const void* p) {
  PointerInfo info;
  if (p == nullptr || !gpu_available() || !cuda_context_in_use()) return info;
  cudaPointerAttributes attributes{};
  cudaError_t e = cudaPointerGetAttributes(&attributes, p);
  if (e != cudaSuccess) {
    cudaGetLastError();  // an unknown pointer is host memory; the error must not linger
    return info;
  }
  switch (attributes.type) {
    case cudaMemoryTypeDevice:
      info.on_device = true;
      info.device = attributes.device;
      break;
    case cudaMemoryTypeManaged:
      info.on_device = true;
      info.managed = true;
      info.device = attributes.device;
      break;
    default:  // cudaMemoryTypeHost (pinned) or cudaMemoryTypeUnregistered (pageable)
      break;
  }
  return info;
}

bool is_device_pointer(const void* p) { return pointer_info(p).on_device; }

}  // namespace hora::detail::nccl
