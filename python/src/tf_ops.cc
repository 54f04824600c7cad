// The TensorFlow half of hora.tensorflow: custom ops whose kernels hand tensors' memory to
// libhora's async engine (<hora/async.h>). The Python half (python/hora/tensorflow/mpi_ops.py)
// loads this library with tf.load_op_library, registers the gradients and owns Horovod's API.
//
// Every collective is an AsyncOpKernel: ComputeAsync() allocates the output (or, for allgather
// and alltoall, lets the engine allocate it once it knows the size), submits the op by name and
// returns; the engine's callback sets the status and calls `done` on the engine's thread. So an
// executor thread never blocks on the network, ranks may submit in any order, and small
// allreduces are fused by the engine, as Horovod's kernels do with its background thread.
//
// Names: an op's engine name is its `tensor_name` attribute when the Python side gave one (eager
// ops, whose node names TensorFlow does not keep), else its node name (graph and tf.function
// ops: unique in the graph and the same on every rank for the same program), without the name
// scope when `ignore_name_scope` is set. An eager op without a name is numbered per op and
// process set (`allreduce.noname.<n>`), so, as in Horovod, such ops must come in the same order
// on every rank.
//
// Errors: hora's exception classes become TensorFlow statuses whose message starts with the
// class name ("HoraMismatchError: ..."), which the Python half turns back into hora's classes:
// a mismatch is FAILED_PRECONDITION (Horovod's code for it), bad arguments INVALID_ARGUMENT, a
// lost rank or an aborted job UNKNOWN (what Horovod's elastic run() recovers from).
//
// Only hora's public headers are used, as by every binding.
#include <hora/async.h>
#include <hora/error.h>
#include <hora/hora.h>
#include <hora/process_set.h>
#include <hora/types.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace tf = ::tensorflow;

namespace {

using tf::OpKernelContext;
using DoneCallback = tf::AsyncOpKernel::DoneCallback;

// --- Types -------------------------------------------------------------------------------------

// How a tensor travels: hora's element type, and how many hora elements one TF element is.
// Types hora cannot reduce (bool, int16, uint16, uint32, uint64, complex) travel as bytes in
// the ops that only move data (allgather, broadcast, alltoall).
struct Wire {
  hora::DataType type = hora::DataType::kUInt8;
  int64_t per_element = 1;
  bool reducible = false;
};

Wire wire_of(tf::DataType t) {
  switch (t) {
    case tf::DT_UINT8: return {hora::DataType::kUInt8, 1, true};
    case tf::DT_INT8: return {hora::DataType::kInt8, 1, true};
    case tf::DT_INT32: return {hora::DataType::kInt32, 1, true};
    case tf::DT_INT64: return {hora::DataType::kInt64, 1, true};
    case tf::DT_HALF: return {hora::DataType::kFloat16, 1, true};
    case tf::DT_BFLOAT16: return {hora::DataType::kBFloat16, 1, true};
    case tf::DT_FLOAT: return {hora::DataType::kFloat32, 1, true};
    case tf::DT_DOUBLE: return {hora::DataType::kFloat64, 1, true};
    default: return {hora::DataType::kUInt8, static_cast<int64_t>(tf::DataTypeSize(t)), false};
  }
}

void* data_of(const tf::Tensor& t) { return const_cast<char*>(t.tensor_data().data()); }

// The shape hora sees: a scalar is one element along the first dimension (as in Horovod), and a
// byte-wire tensor gets a trailing dimension of its element size.
hora::Shape wire_shape(const tf::TensorShape& s, const Wire& w) {
  hora::Shape shape;
  for (int d = 0; d < s.dims(); ++d) shape.push_back(s.dim_size(d));
  if (shape.empty()) shape.push_back(1);
  if (w.per_element != 1) shape.push_back(w.per_element);
  return shape;
}

// Wire elements per slice along the first dimension.
int64_t wire_row(const hora::Shape& shape) {
  int64_t row = 1;
  for (std::size_t d = 1; d < shape.size(); ++d) row *= shape[d];
  return row;
}

tf::TensorShape with_rows(const tf::TensorShape& s, int64_t rows) {
  tf::TensorShape out = s;
  if (out.dims() == 0) {
    out.AddDim(rows);
  } else {
    out.set_dim(0, rows);
  }
  return out;
}

std::string shape_text(const tf::TensorShape& s) {
  std::string t = "[";
  for (int d = 0; d < s.dims(); ++d) t += (d ? ", " : "") + std::to_string(s.dim_size(d));
  return t + "]";
}

// --- Errors ------------------------------------------------------------------------------------

absl::Status status_of(std::exception_ptr e, const std::string& what) {
  try {
    std::rethrow_exception(e);
  } catch (const hora::MismatchError& x) {
    return absl::FailedPreconditionError(std::string("HoraMismatchError: ") + x.what() + " (" +
                                         what + ")");
  } catch (const hora::UsageError& x) {
    return absl::InvalidArgumentError(std::string("HoraUsageError: ") + x.what() + " (" + what +
                                      ")");
  } catch (const hora::PeerFailure& x) {
    return absl::UnknownError(std::string("HoraPeerFailure: ") + x.what() + " (" + what + ")");
  } catch (const hora::AbortedError& x) {
    return absl::UnknownError(std::string("HoraAbortedError: ") + x.what() + " (" + what + ")");
  } catch (const hora::ConnectionError& x) {
    return absl::UnknownError(std::string("HoraConnectionError: ") + x.what() + " (" + what + ")");
  } catch (const hora::TimeoutError& x) {
    return absl::UnknownError(std::string("HoraTimeoutError: ") + x.what() + " (" + what + ")");
  } catch (const hora::Error& x) {
    return absl::UnknownError(std::string("HoraError: ") + x.what() + " (" + what + ")");
  } catch (const std::exception& x) {
    return absl::InternalError(std::string("HoraError: ") + x.what() + " (" + what + ")");
  } catch (...) {
    return absl::InternalError("HoraError: unknown exception (" + what + ")");
  }
}

absl::Status invalid(const std::string& message) {
  return absl::InvalidArgumentError("HoraUsageError: " + message);
}

// --- Completion of one kernel's submissions -----------------------------------------------------

// A kernel submits `n` engine ops (one, or one per tensor of a grouped op); `done` runs once all
// of them have completed, with the first error. Callbacks run on the engine's thread.
class Completion {
 public:
  Completion(OpKernelContext* ctx, DoneCallback done, int n)
      : ctx_(ctx), done_(std::move(done)), left_(n) {}

  // The engine callback of one op; `on_success` finishes its output (scaling, copies).
  hora::Callback callback(std::shared_ptr<Completion> self, std::string what,
                          std::function<absl::Status()> on_success = nullptr) {
    return [self, what = std::move(what), on_success](std::exception_ptr e) {
      absl::Status s = e ? status_of(e, what) : (on_success ? on_success() : absl::OkStatus());
      self->arrive(s, 1);
    };
  }

  // `count` ops that were never submitted (a submission failed with `s`).
  void arrive(const absl::Status& s, int count) {
    if (!s.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (status_.ok()) status_ = s;
    }
    if (left_.fetch_sub(count) == count) {
      if (!status_.ok()) ctx_->SetStatus(status_);
      done_();
    }
  }

 private:
  OpKernelContext* ctx_;
  DoneCallback done_;
  std::atomic<int> left_;
  std::mutex mu_;
  absl::Status status_;
};

// --- Names -------------------------------------------------------------------------------------

std::string next_noname(const std::string& op, int set) {
  static std::mutex mu;
  static std::map<std::pair<std::string, int>, uint64_t> counters;
  std::lock_guard<std::mutex> lock(mu);
  uint64_t n = counters[{op, set}]++;
  return op + ".noname." + (set ? "set" + std::to_string(set) + "." : "") + std::to_string(n);
}

// The attributes every collective has, and the engine name of one execution.
class HoraKernel : public tf::AsyncOpKernel {
 public:
  HoraKernel(tf::OpKernelConstruction* c, const char* op) : AsyncOpKernel(c), op_(op) {
    OP_REQUIRES_OK(c, c->GetAttr("tensor_name", &tensor_name_));
    OP_REQUIRES_OK(c, c->GetAttr("ignore_name_scope", &ignore_name_scope_));
    OP_REQUIRES_OK(c, c->GetAttr("process_set_id", &set_.id));
  }

 protected:
  std::string engine_name() const {
    if (!tensor_name_.empty()) return tensor_name_;
    const std::string& node = name();
    // Eager ops carry the op's type as their node name.
    if (node.empty() || node == type_string()) return next_noname(op_, set_.id);
    if (ignore_name_scope_) {
      std::size_t slash = node.rfind('/');
      if (slash != std::string::npos) return node.substr(slash + 1);
    }
    return node;
  }

  // What an error message says about the op: "allreduce 'name' of shape [2, 3] float".
  std::string describe(const std::string& engine_name, const tf::Tensor& t) const {
    return op_ + " '" + engine_name + "' of shape " + shape_text(t.shape()) + " " +
           tf::DataTypeString(t.dtype());
  }

  // This rank's rank in the op's process set (the global one: hora::rank()).
  int set_rank() const { return set_.id == 0 ? hora::rank() : hora::rank(set_); }
  int set_size() const { return set_.id == 0 ? hora::size() : hora::size(set_); }

  // A global root rank as a rank of the op's set (Horovod's roots are global ranks).
  absl::Status set_root(int global_root, int* root) const {
    if (set_.id == 0) {
      *root = global_root;
      return absl::OkStatus();
    }
    std::vector<int> ranks = hora::ranks(set_);
    auto it = std::find(ranks.begin(), ranks.end(), global_root);
    if (it == ranks.end()) {
      return invalid("broadcast root rank " + std::to_string(global_root) +
                     " is not a member of process set " + std::to_string(set_.id));
    }
    *root = static_cast<int>(it - ranks.begin());
    return absl::OkStatus();
  }

  std::string op_;
  std::string tensor_name_;
  bool ignore_name_scope_ = false;
  hora::ProcessSet set_;
};

// Runs `submit` and turns a hora exception thrown at submission into the op's status.
template <typename Fn>
void submit_or_fail(const std::shared_ptr<Completion>& c, const std::string& what, int left,
                    Fn&& submit) {
  try {
    submit();
  } catch (...) {
    c->arrive(status_of(std::current_exception(), what), left);
  }
}

// Asks the engine to run its next cycle now rather than at its next tick (HORA_CYCLE_TIME_MS,
// 5 ms by default): in <hora/async.h> a wait with a deadline is how a caller says an op is
// awaited, and a zero deadline returns at once. Without it an eager op would wait for the tick,
// since no thread of TensorFlow's waits on the handle (the callback completes the op). The
// op's outcome arrives through its callback either way, so what the wait throws is dropped.
void kick(const hora::Handle& h) {
  if (!h.valid()) return;
  try {
    hora::synchronize(h, std::chrono::milliseconds(0));
  } catch (...) {  // not done yet (TimeoutError), or failed: the callback reports it
  }
}

// Ops whose result needs the handle's counts (alltoall, join): the engine's callback cannot read
// the handle it belongs to before submission has returned it, so the submitter and the callback
// both arrive, and whichever comes second calls `finish(handle, error)`. Nothing blocks.
struct HandleMeeting {
  hora::Handle handle;
  std::exception_ptr error;
  std::atomic<int> arrivals{2};
  std::function<void(const hora::Handle&, std::exception_ptr)> finish;
  void arrive() {
    if (arrivals.fetch_sub(1, std::memory_order_acq_rel) == 1) finish(handle, error);
  }
};

template <typename Submit>
void submit_with_handle(std::function<void(const hora::Handle&, std::exception_ptr)> finish,
                        Submit&& submit, const std::string& what,
                        const std::shared_ptr<Completion>& c) {
  auto m = std::make_shared<HandleMeeting>();
  m->finish = std::move(finish);
  try {
    m->handle = submit([m](std::exception_ptr e) {
      m->error = e;
      m->arrive();
    });
  } catch (...) {
    c->arrive(status_of(std::current_exception(), what), 1);
    return;
  }
  hora::Handle h = m->handle;
  m->arrive();
  kick(h);
}

// --- Outputs ------------------------------------------------------------------------------------

// Large outputs come from a pool of buffers that return to it when TensorFlow frees the last
// tensor on them. TensorFlow's CPU allocator is malloc, and glibc maps a 16 MiB block afresh
// for many of the calls (and unmaps it at free), so every page of the output faulted again
// inside the collective: an eager allreduce of 16 MiB took about 1900 page faults a call. A
// training loop allreduces the same sizes every step, so the pool's buffers are reused warm.
// The pool keeps at most kPoolMaxFreeBytes of free buffers; the rest go back to the system.
constexpr std::size_t kPoolMinBytes = std::size_t{1} << 20;
constexpr std::size_t kPoolMaxFreeBytes = std::size_t{256} << 20;

class OutputPool {
 public:
  static OutputPool& get() {
    static OutputPool* pool = new OutputPool();  // never destroyed: tensors may outlive exit
    return *pool;
  }

  void* take(std::size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(bytes);
      if (it != free_.end()) {
        void* p = it->second;
        free_.erase(it);
        free_bytes_ -= bytes;
        return p;
      }
    }
    // Eigen's alignment (EIGEN_MAX_ALIGN_BYTES), which TensorFlow's own buffers have.
    return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  }

  void give_back(void* p, std::size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (free_bytes_ + bytes <= kPoolMaxFreeBytes) {
        free_.emplace(bytes, p);
        free_bytes_ += bytes;
        return;
      }
    }
    std::free(p);
  }

 private:
  std::mutex mu_;
  std::multimap<std::size_t, void*> free_;
  std::size_t free_bytes_ = 0;
};

class PooledBuffer : public tf::TensorBuffer {
 public:
  explicit PooledBuffer(std::size_t bytes)
      : TensorBuffer(OutputPool::get().take(bytes)), bytes_(bytes) {}
  ~PooledBuffer() override {
    if (data() != nullptr) OutputPool::get().give_back(data(), bytes_);
  }
  std::size_t size() const override { return bytes_; }
  tf::TensorBuffer* root_buffer() override { return this; }
  void FillAllocationDescription(tf::AllocationDescription* proto) const override {
    proto->set_requested_bytes(static_cast<int64_t>(bytes_));
    proto->set_allocated_bytes(static_cast<int64_t>(bytes_));
    proto->set_allocator_name("hora_output_pool");
  }

 private:
  std::size_t bytes_;
};

// Output i with input i's shape and type: input i's own buffer when TensorFlow can hand it over
// (nothing else reads it: inside a graph, a gradient the op is the only consumer of), so the
// collective runs in place; else a pooled buffer (large) or TensorFlow's allocator.
absl::Status output_like_input(OpKernelContext* ctx, int i, tf::Tensor** out) {
  const tf::Tensor& in = ctx->input(i);
  if (std::unique_ptr<tf::Tensor> fwd =
          ctx->forward_input(i, i, in.dtype(), in.shape(), tf::DEVICE_MEMORY, {})) {
    ctx->set_output(i, *fwd);
    *out = ctx->mutable_output(i);
    return absl::OkStatus();
  }
  const std::size_t bytes = in.TotalBytes();
  if (bytes < kPoolMinBytes) return ctx->allocate_output(i, in.shape(), out);
  auto* buffer = new PooledBuffer(bytes);
  if (buffer->data() == nullptr) {
    buffer->Unref();
    return ctx->allocate_output(i, in.shape(), out);
  }
  ctx->set_output(i, tf::Tensor(in.dtype(), in.shape(), buffer));
  buffer->Unref();  // the output holds it now
  *out = ctx->mutable_output(i);
  return absl::OkStatus();
}

// --- Scaling (Horovod's prescale_factor / postscale_factor) ------------------------------------

template <typename T>
void scale_as(tf::Tensor* t, double factor) {
  auto flat = t->flat<T>();
  for (int64_t i = 0; i < flat.size(); ++i) {
    flat(i) = static_cast<T>(static_cast<double>(static_cast<float>(flat(i))) * factor);
  }
}

template <>
void scale_as<double>(tf::Tensor* t, double factor) {
  auto flat = t->flat<double>();
  for (int64_t i = 0; i < flat.size(); ++i) flat(i) *= factor;
}

template <>
void scale_as<int64_t>(tf::Tensor* t, double factor) {
  auto flat = t->flat<int64_t>();
  for (int64_t i = 0; i < flat.size(); ++i) {
    flat(i) = static_cast<int64_t>(static_cast<double>(flat(i)) * factor);
  }
}

void scale(tf::Tensor* t, double factor) {
  if (factor == 1.0) return;
  switch (t->dtype()) {
    case tf::DT_UINT8: scale_as<uint8_t>(t, factor); break;
    case tf::DT_INT8: scale_as<int8_t>(t, factor); break;
    case tf::DT_INT32: scale_as<int32_t>(t, factor); break;
    case tf::DT_INT64: scale_as<int64_t>(t, factor); break;
    case tf::DT_HALF: scale_as<Eigen::half>(t, factor); break;
    case tf::DT_BFLOAT16: scale_as<tf::bfloat16>(t, factor); break;
    case tf::DT_FLOAT: scale_as<float>(t, factor); break;
    case tf::DT_DOUBLE: scale_as<double>(t, factor); break;
    default: break;
  }
}

// out = in * factor (a copy when factor is 1; out may be in itself, forwarded).
void scaled_copy(const tf::Tensor& in, tf::Tensor* out, double factor) {
  if (data_of(*out) != data_of(in)) std::memcpy(data_of(*out), data_of(in), in.TotalBytes());
  scale(out, factor);
}

hora::ReduceOp reduce_op_of(int op, absl::Status* s) {
  // Horovod's numbering (horovod/common/basics.py): Average 0, Sum 1, Adasum 2, Min 3, Max 4,
  // Product 5. Adasum is computed by the Python side from an allgather.
  switch (op) {
    case 0: return hora::ReduceOp::kAverage;
    case 1: return hora::ReduceOp::kSum;
    case 3: return hora::ReduceOp::kMin;
    case 4: return hora::ReduceOp::kMax;
    case 5: return hora::ReduceOp::kProduct;
    default:
      *s = invalid("reduce_op " + std::to_string(op) +
                   " is not one hora's kernels run (Average 0, Sum 1, Min 3, Max 4, Product 5)");
      return hora::ReduceOp::kSum;
  }
}

// --- Reducing kernels ---------------------------------------------------------------------------

// Allreduce and reducescatter: Horovod's reduce_op and scale factors. The prescale is applied
// to a copy of the input before the op, the postscale to the output in the engine's callback.
class ReducingKernel : public HoraKernel {
 public:
  ReducingKernel(tf::OpKernelConstruction* c, const char* op) : HoraKernel(c, op) {
    int op_id = 0;
    OP_REQUIRES_OK(c, c->GetAttr("reduce_op", &op_id));
    absl::Status s;
    reduce_op_ = reduce_op_of(op_id, &s);
    OP_REQUIRES_OK(c, s);
    OP_REQUIRES_OK(c, c->GetAttr("prescale_factor", &prescale_));
    OP_REQUIRES_OK(c, c->GetAttr("postscale_factor", &postscale_));
  }

 protected:
  // The engine callback that finishes `out`: `finish` (if any) fills it, then the postscale.
  hora::Callback scaled(const std::shared_ptr<Completion>& c, const std::string& what,
                        tf::Tensor* out, std::function<void()> finish = nullptr) const {
    const double post = postscale_;
    return c->callback(c, what, [out, post, finish] {
      if (finish) finish();
      scale(out, post);
      return absl::OkStatus();
    });
  }

  hora::ReduceOp reduce_op_ = hora::ReduceOp::kSum;
  float prescale_ = 1.0f;
  float postscale_ = 1.0f;
};

// --- Allreduce ---------------------------------------------------------------------------------

// Allreduce and grouped allreduce: input i -> output i, each its own engine op (the engine fuses
// them). With several tensors, tensor i is named "<name>.<i>".
class HoraAllreduceOp : public ReducingKernel {
 public:
  explicit HoraAllreduceOp(tf::OpKernelConstruction* c, const char* op = "allreduce")
      : ReducingKernel(c, op) {}

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const int n = ctx->num_inputs();
    std::vector<tf::Tensor*> outputs(n);
    for (int i = 0; i < n; ++i) {
      OP_REQUIRES_OK_ASYNC(ctx, output_like_input(ctx, i, &outputs[i]), done);
    }
    const std::string base = engine_name();
    auto c = std::make_shared<Completion>(ctx, std::move(done), n);
    hora::Handle last;  // the engine is kicked once every tensor is submitted
    for (int i = 0; i < n; ++i) {
      const tf::Tensor& in = ctx->input(i);
      tf::Tensor* out = outputs[i];
      const std::string name = n == 1 ? base : base + "." + std::to_string(i);
      const std::string what = describe(name, in);
      const void* send = data_of(in);
      if (prescale_ != 1.0) {
        scaled_copy(in, out, prescale_);
        send = data_of(*out);
      }
      const Wire w = wire_of(in.dtype());
      submit_or_fail(c, what, n - i, [&] {
        last = hora::allreduce_async(name, send, data_of(*out), wire_shape(in.shape(), w), w.type,
                                     reduce_op_, scaled(c, what, out), set_);
      });
    }
    kick(last);
  }
};

// --- Allgather ---------------------------------------------------------------------------------

class HoraAllgatherOp : public HoraKernel {
 public:
  explicit HoraAllgatherOp(tf::OpKernelConstruction* c) : HoraKernel(c, "allgather") {}

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const int n = ctx->num_inputs();
    const std::string base = engine_name();
    auto c = std::make_shared<Completion>(ctx, std::move(done), n);
    hora::Handle last;  // the engine is kicked once every tensor is submitted
    for (int i = 0; i < n; ++i) {
      const tf::Tensor& in = ctx->input(i);
      const std::string name = n == 1 ? base : base + "." + std::to_string(i);
      const std::string what = describe(name, in);
      const Wire w = wire_of(in.dtype());
      const hora::Shape shape = wire_shape(in.shape(), w);
      const int64_t row = wire_row(shape);
      const tf::TensorShape like = in.shape();
      // The engine asks for the output once every rank's count is known.
      hora::OutputAllocator allocate = [ctx, i, like, row](std::size_t count) -> void* {
        tf::Tensor* out = nullptr;
        int64_t rows = row > 0 ? static_cast<int64_t>(count) / row : 0;
        absl::Status s = ctx->allocate_output(i, with_rows(like, rows), &out);
        if (!s.ok()) throw std::runtime_error("cannot allocate the output: " + s.ToString());
        return data_of(*out);
      };
      submit_or_fail(c, what, n - i, [&] {
        last = hora::allgather_async(name, data_of(in), shape, w.type, std::move(allocate),
                                     c->callback(c, what), set_);
      });
    }
    kick(last);
  }
};

// --- Broadcast ---------------------------------------------------------------------------------

class HoraBroadcastOp : public HoraKernel {
 public:
  explicit HoraBroadcastOp(tf::OpKernelConstruction* c) : HoraKernel(c, "broadcast") {
    OP_REQUIRES_OK(c, c->GetAttr("root_rank", &root_rank_));
  }

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const int n = ctx->num_inputs();
    int root = 0;
    OP_REQUIRES_OK_ASYNC(ctx, check_root(&root), done);
    std::vector<tf::Tensor*> outputs(n);
    for (int i = 0; i < n; ++i) {
      OP_REQUIRES_OK_ASYNC(ctx, output_like_input(ctx, i, &outputs[i]), done);
    }
    const bool is_root = set_rank() == root;
    const std::string base = engine_name();
    auto c = std::make_shared<Completion>(ctx, std::move(done), n);
    hora::Handle last;  // the engine is kicked once every tensor is submitted
    for (int i = 0; i < n; ++i) {
      const tf::Tensor& in = ctx->input(i);
      tf::Tensor* out = outputs[i];
      const std::string name = n == 1 ? base : base + "." + std::to_string(i);
      const std::string what = describe(name, in);
      // Only the root's data travels: only the root fills its output first.
      if (is_root && data_of(*out) != data_of(in)) {
        std::memcpy(data_of(*out), data_of(in), in.TotalBytes());
      }
      const Wire w = wire_of(in.dtype());
      submit_or_fail(c, what, n - i, [&] {
        last = hora::broadcast_async(name, data_of(*out), wire_shape(in.shape(), w), w.type, root,
                                     c->callback(c, what), set_);
      });
    }
    kick(last);
  }

 private:
  absl::Status check_root(int* root) const {
    try {
      if (!hora::is_initialized()) return invalid("hora.tensorflow.broadcast before hvd.init()");
      absl::Status s = set_root(root_rank_, root);
      if (!s.ok()) return s;
      if (*root < 0 || *root >= set_size()) {
        return invalid("broadcast root rank " + std::to_string(root_rank_) +
                       " is not a rank of the job (size " + std::to_string(hora::size()) + ")");
      }
      return absl::OkStatus();
    } catch (...) {
      return status_of(std::current_exception(), "broadcast");
    }
  }

  int root_rank_ = 0;
};

// --- Alltoall ----------------------------------------------------------------------------------

class HoraAlltoallOp : public HoraKernel {
 public:
  explicit HoraAlltoallOp(tf::OpKernelConstruction* c) : HoraKernel(c, "alltoall") {}

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const tf::Tensor& in = ctx->input(0);
    const tf::Tensor& splits_in = ctx->input(1);
    OP_REQUIRES_ASYNC(ctx, in.dims() > 0,
                      invalid("alltoall needs a tensor of at least one dimension"), done);
    int nranks = 0;
    try {
      nranks = set_size();
    } catch (...) {
      OP_REQUIRES_OK_ASYNC(ctx, status_of(std::current_exception(), "alltoall"), done);
    }
    const Wire w = wire_of(in.dtype());
    const hora::Shape shape = wire_shape(in.shape(), w);
    const int64_t row = wire_row(shape);
    const int64_t rows = in.dim_size(0);
    std::vector<int64_t> split_rows;
    auto flat = splits_in.flat<int32_t>();
    if (flat.size() == 0) {
      OP_REQUIRES_ASYNC(ctx, rows % nranks == 0,
                        invalid("alltoall without splits: the first dimension (" +
                                std::to_string(rows) + ") must divide evenly among " +
                                std::to_string(nranks) + " ranks"),
                        done);
      split_rows.assign(nranks, rows / nranks);
    } else {
      split_rows.assign(flat.data(), flat.data() + flat.size());
    }
    OP_REQUIRES_ASYNC(ctx, static_cast<int>(split_rows.size()) == nranks,
                      invalid("alltoall: " + std::to_string(split_rows.size()) +
                              " splits given for " + std::to_string(nranks) + " ranks"),
                      done);
    int64_t total = 0;
    std::vector<std::size_t> splits;
    for (int64_t s : split_rows) {
      OP_REQUIRES_ASYNC(ctx, s >= 0, invalid("alltoall: splits must not be negative"), done);
      total += s;
      splits.push_back(static_cast<std::size_t>(s * row));
    }
    OP_REQUIRES_ASYNC(ctx, total == rows,
                      invalid("alltoall: splits add up to " + std::to_string(total) +
                              " but the tensor's first dimension is " + std::to_string(rows)),
                      done);
    const std::string name = engine_name();
    const std::string what = describe(name, in);
    const tf::TensorShape like = in.shape();
    auto c = std::make_shared<Completion>(ctx, std::move(done), 1);
    hora::OutputAllocator allocate = [ctx, like, row](std::size_t count) -> void* {
      tf::Tensor* out = nullptr;
      int64_t out_rows = row > 0 ? static_cast<int64_t>(count) / row : 0;
      absl::Status s = ctx->allocate_output(0, with_rows(like, out_rows), &out);
      if (!s.ok()) throw std::runtime_error("cannot allocate the output: " + s.ToString());
      return data_of(*out);
    };
    // The second output, the rows received from each rank, comes from the handle's counts.
    auto finish = [c, ctx, what, row](const hora::Handle& h, std::exception_ptr e) {
      if (e) return c->arrive(status_of(e, what), 1);
      const std::vector<std::size_t>& counts = hora::received_counts(h);
      tf::Tensor* received = nullptr;
      absl::Status s =
          ctx->allocate_output(1, tf::TensorShape({static_cast<int64_t>(counts.size())}),
                               &received);
      if (s.ok()) {
        auto r = received->flat<int32_t>();
        for (std::size_t i = 0; i < counts.size(); ++i) {
          r(i) = static_cast<int32_t>(row > 0 ? static_cast<int64_t>(counts[i]) / row : 0);
        }
      }
      c->arrive(s, 1);
    };
    submit_with_handle(
        finish,
        [&](hora::Callback cb) {
          return hora::alltoall_async(name, data_of(in), shape, splits, w.type, std::move(allocate),
                                      std::move(cb), set_);
        },
        what, c);
  }
};

// --- Reducescatter -----------------------------------------------------------------------------

// Rank r receives its block of first-dimension slices: rows / size, the first rows % size ranks
// one more (Horovod's split). hora splits elements the same way, so when the slices fall on
// hora's element blocks (one element per slice, or rows dividing evenly) the engine's
// reducescatter runs; otherwise the tensor is allreduced and this rank keeps its slices.
class HoraReducescatterOp : public ReducingKernel {
 public:
  explicit HoraReducescatterOp(tf::OpKernelConstruction* c) : ReducingKernel(c, "reducescatter") {}

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    const int n = ctx->num_inputs();
    int nranks = 0, me = 0;
    try {
      nranks = set_size();
      me = set_rank();
    } catch (...) {
      OP_REQUIRES_OK_ASYNC(ctx, status_of(std::current_exception(), "reducescatter"), done);
    }
    const std::string base = engine_name();
    // Outputs and temporaries first: a failure then leaves nothing submitted.
    std::vector<tf::Tensor*> outputs(n);
    std::vector<tf::Tensor> whole(n);
    for (int i = 0; i < n; ++i) {
      const tf::Tensor& in = ctx->input(i);
      OP_REQUIRES_ASYNC(ctx, in.dims() > 0 && wire_of(in.dtype()).reducible,
                        invalid("reducescatter needs a tensor of at least one dimension of a "
                                "type hora reduces, not " +
                                shape_text(in.shape()) + " " + tf::DataTypeString(in.dtype())),
                        done);
      const int64_t rows = in.dim_size(0);
      const int64_t out_rows = rows / nranks + (me < rows % nranks ? 1 : 0);
      OP_REQUIRES_OK_ASYNC(ctx,
                           ctx->allocate_output(i, with_rows(in.shape(), out_rows), &outputs[i]),
                           done);
      const int64_t row = rows ? in.NumElements() / rows : 1;
      const bool straddles = row != 1 && rows % nranks != 0;
      if (straddles || prescale_ != 1.0) {
        OP_REQUIRES_OK_ASYNC(ctx, ctx->allocate_temp(in.dtype(), in.shape(), &whole[i]), done);
      }
    }
    auto c = std::make_shared<Completion>(ctx, std::move(done), n);
    hora::Handle last;  // the engine is kicked once every tensor is submitted
    for (int i = 0; i < n; ++i) {
      const tf::Tensor& in = ctx->input(i);
      tf::Tensor* out = outputs[i];
      const std::string name = n == 1 ? base : base + "." + std::to_string(i);
      const std::string what = describe(name, in);
      const Wire w = wire_of(in.dtype());
      const int64_t rows = in.dim_size(0);
      const int64_t row = rows ? in.NumElements() / rows : 1;
      const bool straddles = row != 1 && rows % nranks != 0;
      const void* send = data_of(in);
      if (prescale_ != 1.0) {
        scaled_copy(in, &whole[i], prescale_);
        send = data_of(whole[i]);
      }
      if (!straddles) {
        submit_or_fail(c, what, n - i, [&] {
          last = hora::reducescatter_async(name, send, data_of(*out), wire_shape(in.shape(), w),
                                           w.type, reduce_op_, scaled(c, what, out), set_);
        });
        continue;
      }
      const int64_t start = me * (rows / nranks) + std::min<int64_t>(me, rows % nranks);
      tf::Tensor full = whole[i];
      auto keep_slices = [out, full, start, row] {
        const std::size_t esize = tf::DataTypeSize(full.dtype());
        std::memcpy(data_of(*out), static_cast<char*>(data_of(full)) + start * row * esize,
                    out->TotalBytes());
      };
      submit_or_fail(c, what, n - i, [&] {
        last = hora::allreduce_async(name, send, data_of(full), wire_shape(in.shape(), w), w.type,
                                     reduce_op_, scaled(c, what, out, keep_slices), set_);
      });
    }
    kick(last);
  }
};

// --- Join and barrier --------------------------------------------------------------------------

// Join: the output is the last rank to join, from the handle's counts.
class HoraJoinOp : public tf::AsyncOpKernel {
 public:
  explicit HoraJoinOp(tf::OpKernelConstruction* c) : AsyncOpKernel(c) {}

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    tf::Tensor* out = nullptr;
    OP_REQUIRES_OK_ASYNC(ctx, ctx->allocate_output(0, tf::TensorShape({}), &out), done);
    auto c = std::make_shared<Completion>(ctx, std::move(done), 1);
    auto finish = [c, out](const hora::Handle& h, std::exception_ptr e) {
      if (e) return c->arrive(status_of(e, "join"), 1);
      out->scalar<int32_t>()() = static_cast<int32_t>(hora::received_counts(h).at(0));
      c->arrive(absl::OkStatus(), 1);
    };
    submit_with_handle(
        finish, [](hora::Callback cb) { return hora::join_async(std::move(cb)); }, "join", c);
  }
};

// Barrier: hora's blocking barrier on one of TensorFlow's worker threads (the engine has no
// barrier op; a barrier has no data to keep the executor's threads busy with meanwhile).
class HoraBarrierOp : public tf::AsyncOpKernel {
 public:
  explicit HoraBarrierOp(tf::OpKernelConstruction* c) : AsyncOpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("process_set_id", &set_.id));
  }

  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    hora::ProcessSet set = set_;
    auto run = [ctx, done, set] {
      try {
        if (set.id == 0) {
          hora::barrier();
        } else {
          hora::barrier(set);
        }
      } catch (...) {
        ctx->SetStatus(status_of(std::current_exception(), "barrier"));
      }
      done();
    };
    ctx->device()->tensorflow_cpu_worker_threads()->workers->Schedule(std::move(run));
  }

 private:
  hora::ProcessSet set_;
};

// --- Size and rank ops ---------------------------------------------------------------------------

// Scalars computed when the graph runs (Horovod's size_op and family), for graphs built before
// the job's size is known, or run after an elastic reset.
class HoraQueryOp : public tf::OpKernel {
 public:
  HoraQueryOp(tf::OpKernelConstruction* c, std::function<int(int)> query)
      : OpKernel(c), query_(std::move(query)) {
    if (c->HasAttr("process_set_id")) OP_REQUIRES_OK(c, c->GetAttr("process_set_id", &set_id_));
  }

  void Compute(OpKernelContext* ctx) override {
    tf::Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, tf::TensorShape({}), &out));
    try {
      out->scalar<int32_t>()() = query_(set_id_);
    } catch (...) {
      ctx->SetStatus(status_of(std::current_exception(), type_string()));
    }
  }

 private:
  std::function<int(int)> query_;
  int set_id_ = 0;
};

int set_size_of(int id) { return id == 0 ? hora::size() : hora::size(hora::ProcessSet{id}); }

// Horovod's codes: 1 included, 0 not, -1 before init, -2 an unknown set.
int set_included(int id) {
  if (!hora::is_initialized()) return -1;
  if (id == 0) return 1;
  for (hora::ProcessSet s : hora::process_sets()) {
    if (s.id == id) return hora::included(s) ? 1 : 0;
  }
  return -2;
}

}  // namespace

// --- Registration --------------------------------------------------------------------------------

#define HORA_COMMON_ATTRS                      \
  Attr("tensor_name: string = ''")             \
      .Attr("ignore_name_scope: bool = false") \
      .Attr("process_set_id: int = 0")

#define HORA_REDUCE_TYPES "T: {uint8, int8, int32, int64, half, bfloat16, float32, float64}"

REGISTER_OP("HoraAllreduce")
    .Attr(HORA_REDUCE_TYPES)
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .HORA_COMMON_ATTRS.Input("tensor: T")
    .Output("sum: T")
    .SetShapeFn(tf::shape_inference::UnchangedShape);

REGISTER_OP("HoraGroupedAllreduce")
    .Attr(HORA_REDUCE_TYPES)
    .Attr("num_tensors: int")
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .HORA_COMMON_ATTRS.Input("tensors: num_tensors*T")
    .Output("sum: num_tensors*T")
    .SetShapeFn([](tf::shape_inference::InferenceContext* c) {
      for (int i = 0; i < c->num_inputs(); ++i) c->set_output(i, c->input(i));
      return absl::OkStatus();
    });

namespace {
absl::Status gathered_shape(tf::shape_inference::InferenceContext* c) {
  for (int i = 0; i < c->num_inputs(); ++i) {
    tf::shape_inference::ShapeHandle in = c->input(i), out;
    if (c->RankKnown(in) && c->Rank(in) == 0) {
      c->set_output(i, c->Vector(c->UnknownDim()));
      continue;
    }
    TF_RETURN_IF_ERROR(c->ReplaceDim(in, 0, c->UnknownDim(), &out));
    c->set_output(i, out);
  }
  return absl::OkStatus();
}
}  // namespace

REGISTER_OP("HoraAllgather")
    .Attr("T: type")
    .HORA_COMMON_ATTRS.Input("tensor: T")
    .Output("output: T")
    .SetShapeFn(gathered_shape);

// Unlike Horovod's, the tensors of a grouped allgather may have different dtypes.
REGISTER_OP("HoraGroupedAllgather")
    .Attr("T: list(type)")
    .HORA_COMMON_ATTRS.Input("tensors: T")
    .Output("output: T")
    .SetShapeFn(gathered_shape);

REGISTER_OP("HoraBroadcast")
    .Attr("T: type")
    .Attr("root_rank: int")
    .HORA_COMMON_ATTRS.Input("tensor: T")
    .Output("output: T")
    .SetShapeFn(tf::shape_inference::UnchangedShape);

REGISTER_OP("HoraGroupedBroadcast")
    .Attr("T: list(type)")
    .Attr("root_rank: int")
    .HORA_COMMON_ATTRS.Input("tensors: T")
    .Output("output: T")
    .SetShapeFn([](tf::shape_inference::InferenceContext* c) {
      for (int i = 0; i < c->num_inputs(); ++i) c->set_output(i, c->input(i));
      return absl::OkStatus();
    });

REGISTER_OP("HoraAlltoall")
    .Attr("T: type")
    .HORA_COMMON_ATTRS.Input("tensor: T")
    .Input("splits: int32")
    .Output("output: T")
    .Output("received_splits: int32")
    .SetShapeFn([](tf::shape_inference::InferenceContext* c) {
      tf::shape_inference::ShapeHandle out;
      TF_RETURN_IF_ERROR(c->ReplaceDim(c->input(0), 0, c->UnknownDim(), &out));
      c->set_output(0, out);
      c->set_output(1, c->Vector(c->UnknownDim()));
      return absl::OkStatus();
    });

namespace {
absl::Status scattered_shape(tf::shape_inference::InferenceContext* c) {
  for (int i = 0; i < c->num_inputs(); ++i) {
    tf::shape_inference::ShapeHandle out;
    TF_RETURN_IF_ERROR(c->ReplaceDim(c->input(i), 0, c->UnknownDim(), &out));
    c->set_output(i, out);
  }
  return absl::OkStatus();
}
}  // namespace

REGISTER_OP("HoraReducescatter")
    .Attr(HORA_REDUCE_TYPES)
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .HORA_COMMON_ATTRS.Input("tensor: T")
    .Output("output: T")
    .SetShapeFn(scattered_shape);

REGISTER_OP("HoraGroupedReducescatter")
    .Attr(HORA_REDUCE_TYPES)
    .Attr("num_tensors: int")
    .Attr("reduce_op: int")
    .Attr("prescale_factor: float = 1.0")
    .Attr("postscale_factor: float = 1.0")
    .HORA_COMMON_ATTRS.Input("tensors: num_tensors*T")
    .Output("output: num_tensors*T")
    .SetShapeFn(scattered_shape);

REGISTER_OP("HoraJoin")
    .Output("last_joined_rank: int32")
    .SetIsStateful()
    .SetShapeFn(tf::shape_inference::ScalarShape);
REGISTER_OP("HoraBarrier")
    .Attr("process_set_id: int = 0")
    .SetIsStateful()
    .SetShapeFn(tf::shape_inference::NoOutputs);

#define HORA_QUERY_OP(NAME)   \
  REGISTER_OP(NAME)           \
      .Output("value: int32") \
      .SetIsStateful()        \
      .SetShapeFn(tf::shape_inference::ScalarShape)
HORA_QUERY_OP("HoraRank");
HORA_QUERY_OP("HoraLocalRank");
HORA_QUERY_OP("HoraLocalSize");
REGISTER_OP("HoraSize")
    .Attr("process_set_id: int = 0")
    .Output("value: int32")
    .SetIsStateful()
    .SetShapeFn(tf::shape_inference::ScalarShape);
REGISTER_OP("HoraProcessSetIncluded")
    .Attr("process_set_id: int = 0")
    .Output("value: int32")
    .SetIsStateful()
    .SetShapeFn(tf::shape_inference::ScalarShape);

namespace {

// The kernels whose constructor takes an extra argument are registered through a factory.
template <int kKind>
class Query : public HoraQueryOp {
 public:
  explicit Query(tf::OpKernelConstruction* c) : HoraQueryOp(c, query()) {}

 private:
  static std::function<int(int)> query() {
    switch (kKind) {
      case 0: return [](int) { return hora::rank(); };
      case 1: return [](int) { return hora::local_rank(); };
      case 2: return [](int) { return hora::local_size(); };
      case 3: return [](int id) { return set_size_of(id); };
      default: return [](int id) { return set_included(id); };
    }
  }
};

class HoraGroupedAllreduceOp : public HoraAllreduceOp {
 public:
  explicit HoraGroupedAllreduceOp(tf::OpKernelConstruction* c)
      : HoraAllreduceOp(c, "grouped_allreduce") {}
};

}  // namespace

#define HORA_CPU_KERNEL(NAME, CLASS) \
  REGISTER_KERNEL_BUILDER(Name(NAME).Device(tf::DEVICE_CPU), CLASS)
HORA_CPU_KERNEL("HoraAllreduce", HoraAllreduceOp);
HORA_CPU_KERNEL("HoraGroupedAllreduce", HoraGroupedAllreduceOp);
HORA_CPU_KERNEL("HoraAllgather", HoraAllgatherOp);
HORA_CPU_KERNEL("HoraGroupedAllgather", HoraAllgatherOp);
HORA_CPU_KERNEL("HoraBroadcast", HoraBroadcastOp);
HORA_CPU_KERNEL("HoraGroupedBroadcast", HoraBroadcastOp);
HORA_CPU_KERNEL("HoraAlltoall", HoraAlltoallOp);
HORA_CPU_KERNEL("HoraReducescatter", HoraReducescatterOp);
HORA_CPU_KERNEL("HoraGroupedReducescatter", HoraReducescatterOp);
HORA_CPU_KERNEL("HoraJoin", HoraJoinOp);
HORA_CPU_KERNEL("HoraBarrier", HoraBarrierOp);
HORA_CPU_KERNEL("HoraRank", Query<0>);
HORA_CPU_KERNEL("HoraLocalRank", Query<1>);
HORA_CPU_KERNEL("HoraLocalSize", Query<2>);
HORA_CPU_KERNEL("HoraSize", Query<3>);
HORA_CPU_KERNEL("HoraProcessSetIncluded", Query<4>);
