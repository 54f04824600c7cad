// _hora_torch: the C++ half of hora.torch. It hands torch tensors' memory to libhora's async
// engine (<hora/async.h>) and keeps every tensor alive until its op has completed. The Python
// half (python/hora/torch/mpi_ops.py) owns names, compression, scaling and Horovod's API shape.
//
// Only hora's public headers are used (<hora/...>), so the runtime can change beneath this file.
//
// Memory: a contiguous CPU tensor is passed to the engine as is (no copy); a non-contiguous one
// is staged in a contiguous copy and the result is copied back into it by synchronize().
//
// CUDA tensors take one of two paths, chosen by HORA_GPU_OPERATIONS (docs/gpu.md):
//  - nccl (the default where libhora was built with NCCL): the op runs on the tensor's memory
//    through <hora/cuda.h>, ordered after the work on torch's current stream, and has completed
//    when the submitting call returns (allgather and alltoall first agree on the sizes through
//    the async engine, on host memory). Every rank must then submit its CUDA ops in one order.
//  - host (the default without NCCL, or where ranks share a GPU): the tensor is copied to host
//    memory, the op runs on the engine like a CPU tensor's, and synchronize() copies the result
//    back to the input's device, as Horovod does for ops it has no GPU implementation of.
// Either way the result lives on the input's device.
// Handles are small integers (as in Horovod); a handle's record, with the tensors it keeps alive,
// is dropped when synchronize() returns or throws.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <hora/async.h>
#include <hora/cuda.h>
#include <hora/elastic.h>
#include <hora/error.h>
#include <hora/hora.h>
#include <hora/process_set.h>
#include <hora/types.h>
#include <torch/csrc/utils/pybind.h>

#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace {

// torch's Python name of a dtype ("torch.int16"), for error messages.
std::string dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kShort: return "torch.int16";
    case at::kBool: return "torch.bool";
    case at::kComplexFloat: return "torch.complex64";
    case at::kComplexDouble: return "torch.complex128";
    default: return std::string("torch.") + c10::toString(t);
  }
}

hora::DataType hora_type(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kByte: return hora::DataType::kUInt8;
    case at::kChar: return hora::DataType::kInt8;
    case at::kShort: return hora::DataType::kInt16;
    case at::kInt: return hora::DataType::kInt32;
    case at::kLong: return hora::DataType::kInt64;
    case at::kHalf: return hora::DataType::kFloat16;
    case at::kBFloat16: return hora::DataType::kBFloat16;
    case at::kFloat: return hora::DataType::kFloat32;
    case at::kDouble: return hora::DataType::kFloat64;
    default:
      throw py::type_error("hora.torch: tensors of type " + dtype_name(t.scalar_type()) +
                           " are not supported; hora reduces uint8, int8, int16, int32, int64, "
                           "float16, bfloat16, float32 and float64 (convert with tensor.to(...))");
  }
}

hora::ReduceOp reduce_op(int op) {
  if (op < 0 || op > static_cast<int>(hora::ReduceOp::kProduct)) {
    throw py::value_error("hora.torch: unknown reduction op " + std::to_string(op) +
                          " (use hvd.Average, Sum, Min, Max or Product)");
  }
  return static_cast<hora::ReduceOp>(op);
}

// Elements per slice along the first dimension (1 for a 0-d tensor).
int64_t row_elements(const at::Tensor& t) {
  int64_t row = 1;
  for (int64_t d = 1; d < t.dim(); ++d) row *= t.size(d);
  return row;
}

std::vector<int64_t> shape_with_rows(const at::Tensor& t, int64_t rows) {
  std::vector<int64_t> shape = t.sizes().vec();
  if (shape.empty())
    shape.push_back(rows);
  else
    shape[0] = rows;
  return shape;
}

// How the CUDA tensors of this process travel (HORA_GPU_OPERATIONS; see the top of this file).
enum class GpuPath { kNccl, kHost };

GpuPath gpu_path(const char* op, hora::ProcessSet set, at::ScalarType type) {
  // Process sets have no NCCL communicators, and NCCL has no int16: those CUDA tensors are
  // staged through host memory.
  if (set.id != 0 || type == at::kShort) return GpuPath::kHost;
  const char* env = std::getenv("HORA_GPU_OPERATIONS");
  std::string value = env ? env : "";
  for (char& c : value) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (value.empty()) return hora::cuda_built() ? GpuPath::kNccl : GpuPath::kHost;
  if (value == "host") return GpuPath::kHost;
  if (value == "nccl") {
    if (!hora::cuda_built()) {
      throw py::value_error(std::string("hora.torch.") + op +
                            ": HORA_GPU_OPERATIONS=nccl, but this libhora was built without NCCL "
                            "(rebuild with meson -Dnccl=enabled, or set HORA_GPU_OPERATIONS=host "
                            "to stage CUDA tensors through host memory)");
    }
    return GpuPath::kNccl;
  }
  throw py::value_error(std::string("hora.torch.") + op + ": HORA_GPU_OPERATIONS=\"" +
                        (env ? env : "") +
                        "\" is not a path for CUDA tensors: use nccl (GPU collectives) or host "
                        "(staged through host memory)");
}

// True for a CUDA tensor; throws for devices hora has no path for (CPU: false).
bool on_gpu(const at::Tensor& t, const char* op) {
  if (t.device().is_cpu()) return false;
  if (!t.is_cuda()) {
    throw py::value_error(std::string("hora.torch.") + op + ": tensors on device " +
                          t.device().str() + " are not supported (use CPU or CUDA tensors)");
  }
  return true;
}

// torch's current stream on the tensor's device, which NCCL work is ordered after.
void* current_stream(const at::Tensor& t) {
  py::object stream = py::module_::import("torch.cuda").attr("current_stream")(t.device().index());
  return reinterpret_cast<void*>(stream.attr("cuda_stream").cast<std::uintptr_t>());
}

// A host copy of a CUDA tensor (contiguous; the copy has completed when this returns).
at::Tensor to_host(const at::Tensor& t) { return t.to(at::kCPU).contiguous(); }

// One submitted op: what it keeps alive and how its result is delivered.
struct Record {
  hora::Handle handle;
  at::Tensor input;   // the tensor whose memory is sent (maybe a contiguous copy)
  at::Tensor output;  // where the engine writes (maybe a contiguous copy of target)
  at::Tensor target;  // a non-contiguous output to copy the result into, else undefined
  std::shared_ptr<at::Tensor> allocated;  // allgather/alltoall: allocated on the engine thread
  int64_t row = 1;                        // elements per first-dimension slice (allgather/alltoall)
  bool want_counts = false;
  bool completed = false;              // the NCCL path completes at submission
  std::vector<int64_t> rows_received;  // allgather/alltoall on the NCCL path: rows from each rank
  std::optional<at::Device> device;    // host-staged allgather/alltoall: the input's device
};

class Registry {
 public:
  int add(Record r) {
    std::lock_guard<std::mutex> lock(mu_);
    int id = next_++;
    records_.emplace(id, std::move(r));
    return id;
  }
  Record* find(int id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = records_.find(id);
    if (it == records_.end()) {
      throw py::value_error("hora.torch: unknown or already synchronized handle " +
                            std::to_string(id));
    }
    return &it->second;
  }
  Record take(int id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = records_.find(id);
    Record r = std::move(it->second);
    records_.erase(it);
    return r;
  }
  // Forgets every record (after shutdown or a reset: the engine that used them is gone). The
  // tensors are released by the caller, which holds the GIL.
  std::unordered_map<int, Record> drop_all() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(records_, {});
  }

 private:
  std::mutex mu_;
  int next_ = 1;
  std::unordered_map<int, Record> records_;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: tensors must not die after Python
  return *r;
}

// The tensor whose memory the engine may write: `out` itself when contiguous, else a copy
// (holding out's data when `keep_data`) recorded in r.target for synchronize() to copy back.
at::Tensor writable(const at::Tensor& out, bool keep_data, Record& r) {
  if (out.is_contiguous()) return out;
  r.target = out;
  return keep_data ? out.contiguous() : at::empty(out.sizes(), out.options());
}

int allreduce_async(const std::string& name, const at::Tensor& tensor, const at::Tensor& output,
                    int op, int process_set) {
  c10::NoGradGuard no_grad;  // hora writes tensors' memory; autograd must not record the copies
  const hora::ProcessSet set{process_set};
  const bool gpu = on_gpu(tensor, "allreduce");
  const GpuPath path = gpu ? gpu_path("allreduce", set, tensor.scalar_type()) : GpuPath::kHost;
  hora::DataType type = hora_type(tensor);
  hora::ReduceOp rop = reduce_op(op);
  if (output.numel() != tensor.numel() || output.scalar_type() != tensor.scalar_type()) {
    throw py::value_error("hora.torch.allreduce: output does not match the input tensor");
  }
  Record r;
  bool in_place = output.is_same(tensor);
  if (gpu && path == GpuPath::kHost) {
    r.input = to_host(tensor);
    r.output = in_place ? r.input : at::empty(output.sizes(), output.options().device(at::kCPU));
    r.target = output;  // synchronize() copies the result back to the GPU
  } else {
    r.input = tensor.contiguous();
    r.output = in_place ? writable(output, true, r) : writable(output, false, r);
    if (in_place) r.input = r.output;
  }
  if (gpu && path == GpuPath::kNccl) {
    void* stream = current_stream(tensor);
    py::gil_scoped_release nogil;
    hora::allreduce(r.input.data_ptr(), r.output.data_ptr(), tensor.numel(), type, rop, stream);
    r.completed = true;
  } else {
    r.handle = hora::allreduce_async(name, r.input.data_ptr(), r.output.data_ptr(),
                                     tensor.sizes().vec(), type, rop, nullptr, set);
  }
  return registry().add(std::move(r));
}

int broadcast_async(const std::string& name, const at::Tensor& tensor, const at::Tensor& output,
                    int root, int process_set) {
  c10::NoGradGuard no_grad;
  const hora::ProcessSet set{process_set};
  const bool gpu = on_gpu(tensor, "broadcast");
  const GpuPath path = gpu ? gpu_path("broadcast", set, tensor.scalar_type()) : GpuPath::kHost;
  hora::DataType type = hora_type(tensor);
  if (output.numel() != tensor.numel() || output.scalar_type() != tensor.scalar_type()) {
    throw py::value_error("hora.torch.broadcast: output does not match the input tensor");
  }
  Record r;
  bool in_place = output.is_same(tensor);
  // root is a rank of the set (the global one: a rank of the job).
  bool is_root =
      hora::is_initialized() && (process_set == 0 ? hora::rank() : hora::rank(set)) == root;
  r.input = tensor;
  if (gpu && path == GpuPath::kHost) {
    // Only the root's data travels: the others receive into an empty host buffer.
    r.output = in_place || is_root ? to_host(tensor).reshape(output.sizes()).contiguous()
                                   : at::empty(output.sizes(), output.options().device(at::kCPU));
    r.target = output;
  } else {
    r.output = writable(output, in_place, r);
    // Out of place, only the root's data travels: only the root fills the output first.
    if (!in_place && is_root) r.output.copy_(tensor.reshape(r.output.sizes()));
  }
  if (gpu && path == GpuPath::kNccl) {
    void* stream = current_stream(tensor);
    py::gil_scoped_release nogil;
    hora::broadcast(r.output.data_ptr(), tensor.numel(), type, root, stream);
    r.completed = true;
  } else {
    r.handle = hora::broadcast_async(name, r.output.data_ptr(), tensor.sizes().vec(), type, root,
                                     nullptr, set);
  }
  return registry().add(std::move(r));
}

// The engine calls this on its own thread once it knows how many elements arrive; at::empty
// needs no GIL.
hora::OutputAllocator allocate_rows(const at::Tensor& like, int64_t row,
                                    std::shared_ptr<at::Tensor> slot) {
  std::vector<int64_t> trailing = like.sizes().vec();
  at::TensorOptions options = like.options();
  return [trailing, options, row, slot](std::size_t count) -> void* {
    std::vector<int64_t> shape = trailing;
    int64_t rows = row > 0 ? static_cast<int64_t>(count) / row : 0;
    if (shape.empty())
      shape.push_back(rows);
    else
      shape[0] = rows;
    *slot = at::empty(shape, options);
    return slot->data_ptr();
  };
}

// Waits for an engine op with the GIL released; defined below.
void wait(const hora::Handle& handle);

// The NCCL path's size agreement: every rank's `values` (one int64 per entry) exchanged through
// the async engine on host memory, under `name`. allgather: each rank sends one value and
// receives all; alltoall: rank i receives values[i] of every rank.
std::vector<int64_t> exchange_sizes(const std::string& name, const std::vector<int64_t>& values,
                                    bool all_to_all) {
  auto received = std::make_shared<std::vector<int64_t>>();
  hora::OutputAllocator out = [received](std::size_t count) -> void* {
    received->resize(count);
    return received->data();
  };
  hora::Handle h =
      all_to_all
          ? hora::alltoall_async(name, values.data(), std::vector<std::size_t>(values.size(), 1),
                                 hora::DataType::kInt64, out)
          : hora::allgather_async(name, values.data(), values.size(), hora::DataType::kInt64, out);
  wait(h);
  return *received;
}

// allgather/alltoall: the output is allocated once the engine knows how much arrives. A CUDA
// tensor on the host path sends a host copy; `gpu` tells the NCCL path to run at submission.
Record gathering_record(const at::Tensor& tensor, const char* op, hora::ProcessSet set,
                        bool& nccl) {
  const bool gpu = on_gpu(tensor, op);
  nccl = gpu && gpu_path(op, set, tensor.scalar_type()) == GpuPath::kNccl;
  Record r;
  r.input = gpu && !nccl ? to_host(tensor) : tensor.contiguous();
  if (gpu && !nccl) r.device = tensor.device();
  r.row = row_elements(tensor);
  r.allocated = std::make_shared<at::Tensor>();
  r.want_counts = true;
  return r;
}

// The NCCL path of allgather/alltoall once r.rows_received holds the rows from each rank:
// allocates the output on the input's GPU and moves the data with
// `collective(output, elements from each rank, stream)`, which completes before it returns.
template <typename Collective>
void gather_on_gpu(Record& r, const at::Tensor& tensor, Collective&& collective) {
  int64_t rows = 0;
  std::vector<std::size_t> counts;
  for (int64_t n : r.rows_received) {
    rows += n;
    counts.push_back(static_cast<std::size_t>(n * r.row));
  }
  *r.allocated = at::empty(shape_with_rows(tensor, rows), tensor.options());
  void* stream = current_stream(tensor);
  py::gil_scoped_release nogil;
  collective(r.allocated->data_ptr(), counts, stream);
  r.completed = true;
}

int allgather_async(const std::string& name, const at::Tensor& tensor, int process_set) {
  const hora::ProcessSet set{process_set};
  bool nccl = false;
  Record r = gathering_record(tensor, "allgather", set, nccl);
  hora::DataType type = hora_type(tensor);
  if (nccl) {
    r.rows_received = exchange_sizes(name + ".rows", {tensor.dim() ? tensor.size(0) : 1}, false);
    gather_on_gpu(r, tensor, [&](void* out, const std::vector<std::size_t>& counts, void* stream) {
      hora::allgather(r.input.data_ptr(), r.input.numel(), out, counts, type, stream);
    });
  } else {
    r.handle = hora::allgather_async(name, r.input.data_ptr(), r.input.sizes().vec(), type,
                                     allocate_rows(r.input, r.row, r.allocated), nullptr, set);
  }
  return registry().add(std::move(r));
}

int alltoall_async(const std::string& name, const at::Tensor& tensor,
                   const std::vector<int64_t>& split_rows, int process_set) {
  const hora::ProcessSet set{process_set};
  bool nccl = false;
  Record r = gathering_record(tensor, "alltoall", set, nccl);
  std::vector<std::size_t> splits;
  int64_t total = 0;
  auto splits_text = [&] {
    std::string t;
    for (int64_t s : split_rows) t += (t.empty() ? "" : ", ") + std::to_string(s);
    return "rank " + std::to_string(hora::rank()) + ": hora.torch.alltoall: splits [" + t + "]";
  };
  for (int64_t s : split_rows) {
    if (s < 0) throw py::value_error(splits_text() + ": splits must not be negative");
    int64_t elements = 0;
    if (__builtin_mul_overflow(s, r.row, &elements) || __builtin_add_overflow(total, s, &total)) {
      throw py::value_error(splits_text() +
                            " overflow 64 bits; they must add up to the tensor's first dimension");
    }
    splits.push_back(static_cast<std::size_t>(elements));
  }
  if (tensor.dim() == 0 || total != tensor.size(0)) {
    throw py::value_error("hora.torch.alltoall: splits add up to " + std::to_string(total) +
                          " but the tensor's first dimension is " +
                          std::to_string(tensor.dim() ? tensor.size(0) : 0));
  }
  hora::DataType type = hora_type(tensor);
  if (nccl) {
    if (static_cast<int>(split_rows.size()) != hora::size()) {
      throw py::value_error("hora.torch.alltoall: " + std::to_string(split_rows.size()) +
                            " splits given for " + std::to_string(hora::size()) + " ranks");
    }
    r.rows_received = exchange_sizes(name + ".splits", split_rows, true);
    gather_on_gpu(r, tensor, [&](void* out, const std::vector<std::size_t>& counts, void* stream) {
      hora::alltoall(r.input.data_ptr(), splits, out, counts, type, stream);
    });
  } else {
    r.handle = hora::alltoall_async(name, r.input.data_ptr(), r.input.sizes().vec(), splits, type,
                                    allocate_rows(r.input, r.row, r.allocated), nullptr, set);
  }
  return registry().add(std::move(r));
}

// Element-wise reducescatter: this rank receives hora::reducescatter_count(numel) elements, as
// `out_rows` slices of the input's trailing shape (the Python side checks that they divide).
int reducescatter_async(const std::string& name, const at::Tensor& tensor, int op, int64_t out_rows,
                        int process_set) {
  c10::NoGradGuard no_grad;
  const hora::ProcessSet set{process_set};
  const bool gpu = on_gpu(tensor, "reducescatter");
  const GpuPath path = gpu ? gpu_path("reducescatter", set, tensor.scalar_type()) : GpuPath::kHost;
  hora::DataType type = hora_type(tensor);
  hora::ReduceOp rop = reduce_op(op);
  Record r;
  const std::vector<int64_t> shape = shape_with_rows(tensor, out_rows);
  if (gpu && path == GpuPath::kHost) {
    r.input = to_host(tensor);
    r.output = at::empty(shape, tensor.options().device(at::kCPU));
    r.target = at::empty(shape, tensor.options());
  } else {
    r.input = tensor.contiguous();
    r.output = at::empty(shape, tensor.options());
  }
  if (gpu && path == GpuPath::kNccl) {
    void* stream = current_stream(tensor);
    py::gil_scoped_release nogil;
    hora::reducescatter(r.input.data_ptr(), r.input.numel(), r.output.data_ptr(), type, rop,
                        stream);
    r.completed = true;
  } else {
    r.handle = hora::reducescatter_async(name, r.input.data_ptr(), r.output.data_ptr(),
                                         r.input.sizes().vec(), type, rop, nullptr, set);
  }
  return registry().add(std::move(r));
}

bool poll(int id) {
  Record* r = registry().find(id);
  return r->completed || hora::poll(r->handle);
}

// Waits with the GIL released, in short slices so that Ctrl-C (a Python signal) is noticed.
void wait(const hora::Handle& handle) {
  using namespace std::chrono_literals;
  for (;;) {
    {
      py::gil_scoped_release nogil;
      if (hora::poll(handle)) break;
      try {
        hora::synchronize(handle, 100ms);
        return;
      } catch (const hora::TimeoutError&) {
        if (hora::poll(handle)) break;  // the op itself failed with a timeout: rethrow it below
      }
    }
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
  py::gil_scoped_release nogil;
  hora::synchronize(handle);  // returns, or rethrows the op's error
}

// Returns the output tensor; for allgather/alltoall, (output, rows received from each rank).
py::object synchronize(int id) {
  Record* rec = registry().find(id);
  if (!rec->completed) {
    try {
      wait(rec->handle);
    } catch (...) {
      registry().take(id);
      throw;
    }
  }
  Record r = registry().take(id);
  if (r.want_counts) {
    std::vector<int64_t> rows = r.rows_received;
    if (r.handle.valid()) {
      for (std::size_t c : hora::received_counts(r.handle)) {
        rows.push_back(r.row > 0 ? static_cast<int64_t>(c) / r.row : 0);
      }
    }
    if (r.device) return py::make_tuple(r.allocated->to(*r.device), rows);
    return py::make_tuple(*r.allocated, rows);
  }
  if (r.target.defined()) {
    c10::NoGradGuard no_grad;
    r.target.copy_(r.output);
    return py::cast(r.target);
  }
  return py::cast(r.output);
}

template <typename Fn>
auto without_gil(Fn fn) {
  return [fn]() {
    py::gil_scoped_release nogil;
    return fn();
  };
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "libhora's async engine for torch tensors (used by hora.torch)";

  // hora's exceptions, most general first (pybind11 tries the newest translator first). Those
  // that mean "a rank was lost or the job is being reset" are also Horovod's
  // HorovodInternalError (python/hora/common/exceptions.py), which elastic run() recovers from.
  py::object internal = py::module_::import("hora.common.exceptions").attr("HorovodInternalError");
  static py::exception<hora::Error> error(m, "HoraError", PyExc_RuntimeError);
  py::tuple lost_bases = py::make_tuple(error, internal);
  // A usage error (an op name still in flight, an argument hora cannot take) is also a
  // ValueError, which Horovod raises for those.
  static py::exception<hora::UsageError> usage(m, "HoraUsageError",
                                               py::make_tuple(error, py::handle(PyExc_ValueError)));
  static py::exception<hora::ConnectionError> connection(m, "HoraConnectionError", lost_bases);
  // A collective that times out waits for a peer that is gone or cut off: also a lost rank.
  static py::exception<hora::TimeoutError> timeout(m, "HoraTimeoutError", lost_bases);
  static py::exception<hora::PeerFailure> peer(m, "HoraPeerFailure", lost_bases);
  static py::exception<hora::MismatchError> mismatch(m, "HoraMismatchError", error.ptr());
  static py::exception<hora::AbortedError> aborted(m, "HoraAbortedError", lost_bases);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const hora::UsageError& e) {
      usage(e.what());
    } catch (const hora::ConnectionError& e) {
      connection(e.what());
    } catch (const hora::TimeoutError& e) {
      timeout(e.what());
    } catch (const hora::PeerFailure& e) {
      peer(e.what());
    } catch (const hora::MismatchError& e) {
      mismatch(e.what());
    } catch (const hora::AbortedError& e) {
      aborted(e.what());
    } catch (const hora::Error& e) {
      error(e.what());
    }
  });

  m.def("init", without_gil([] { hora::init(); }));
  m.def("shutdown", [] {
    {
      py::gil_scoped_release nogil;
      hora::shutdown();
    }
    registry().drop_all();
  });
  m.def("is_initialized", &hora::is_initialized);
  m.def("rank", [] { return hora::rank(); });
  m.def("size", [] { return hora::size(); });
  m.def("local_rank", &hora::local_rank);
  m.def("local_size", &hora::local_size);
  m.def("cross_rank", &hora::cross_rank);
  m.def("cross_size", &hora::cross_size);
  m.def("cuda_built", &hora::cuda_built);
  m.def("nccl_version", &hora::nccl_version);
  m.def(
      "barrier",
      [](int process_set) {
        py::gil_scoped_release nogil;
        if (process_set == 0) {
          hora::barrier();
        } else {
          hora::barrier(hora::ProcessSet{process_set});
        }
      },
      py::arg("process_set") = 0);
  // <hora/process_set.h>. add/remove are collectives of the whole job: without the GIL.
  m.def(
      "add_process_set",
      [](std::vector<int> ranks) {
        py::gil_scoped_release nogil;
        return hora::add_process_set(std::move(ranks)).id;
      },
      py::arg("ranks"));
  m.def(
      "remove_process_set",
      [](int id) {
        py::gil_scoped_release nogil;
        hora::remove_process_set(hora::ProcessSet{id});
      },
      py::arg("id"));
  m.def("process_set_ids", [] {
    std::vector<int> ids;
    for (hora::ProcessSet s : hora::process_sets()) ids.push_back(s.id);
    return ids;
  });
  m.def("process_set_ranks", [](int id) { return hora::ranks(hora::ProcessSet{id}); });
  m.def("process_set_rank", [](int id) { return hora::rank(hora::ProcessSet{id}); });
  m.def("process_set_size", [](int id) { return hora::size(hora::ProcessSet{id}); });
  m.def("join", without_gil([] { return hora::join(); }));
  m.def("reducescatter_count", [](int64_t count, int rank, int nranks) {
    return static_cast<int64_t>(hora::reducescatter_count(count, rank, nranks));
  });

  // process_set: the set's id (0: the global set); ranks and roots are the set's.
  m.def("allreduce_async", &allreduce_async, py::arg("name"), py::arg("tensor"), py::arg("output"),
        py::arg("op"), py::arg("process_set") = 0);
  m.def("broadcast_async", &broadcast_async, py::arg("name"), py::arg("tensor"), py::arg("output"),
        py::arg("root_rank"), py::arg("process_set") = 0);
  m.def("allgather_async", &allgather_async, py::arg("name"), py::arg("tensor"),
        py::arg("process_set") = 0);
  m.def("alltoall_async", &alltoall_async, py::arg("name"), py::arg("tensor"),
        py::arg("split_rows"), py::arg("process_set") = 0);
  m.def("reducescatter_async", &reducescatter_async, py::arg("name"), py::arg("tensor"),
        py::arg("op"), py::arg("out_rows"), py::arg("process_set") = 0);
  // <hora/elastic.h>: hora.torch.elastic's run() and State are built on these.
  m.def("elastic_enabled", &hora::elastic::enabled);
  m.def("elastic_round", &hora::elastic::round);
  m.def("elastic_reset_pending", &hora::elastic::reset_pending);
  m.def(
      "elastic_reset",
      [](double timeout_seconds) {
        {
          py::gil_scoped_release nogil;
          hora::elastic::reset(
              std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000)));
        }
        registry().drop_all();
      },
      py::arg("timeout_seconds"));
  m.def("poll", &poll);
  m.def("synchronize", &synchronize);
  // <hora/async.h>'s run-time timeline (hvd.start_timeline / stop_timeline). Without the GIL:
  // they wait for the engine's current cycle, whose callbacks may need it.
  m.def(
      "start_timeline",
      [](const std::string& file_path, bool mark_cycles) {
        py::gil_scoped_release nogil;
        hora::start_timeline(file_path, mark_cycles);
      },
      py::arg("file_path"), py::arg("mark_cycles"));
  m.def("stop_timeline", without_gil([] { hora::stop_timeline(); }));

  m.attr("SUM") = static_cast<int>(hora::ReduceOp::kSum);
  m.attr("AVERAGE") = static_cast<int>(hora::ReduceOp::kAverage);
  m.attr("MIN") = static_cast<int>(hora::ReduceOp::kMin);
  m.attr("MAX") = static_cast<int>(hora::ReduceOp::kMax);
  m.attr("PRODUCT") = static_cast<int>(hora::ReduceOp::kProduct);
}
