#include "runtime/engine/executor.h"

#include <cstring>
#include <string>

#include <hora/error.h>

#include "runtime/core/copy.h"
#include "runtime/engine/error_context.h"

namespace hora::detail::engine {
namespace {

std::string describe(const ReadyOp& op) {
  return std::string(name_of(op.response.request.type)) + " '" + op.response.request.name + "'";
}

bool fusable(const ReadyOp& a, const ReadyOp& b) {
  const Request& x = a.response.request;
  const Request& y = b.response.request;
  return b.response.ok() && y.type == OpType::kAllreduce && x.dtype == y.dtype && x.op == y.op &&
         x.device == y.device;
}

void update_max(std::atomic<std::uint64_t>& target, std::uint64_t value) {
  std::uint64_t cur = target.load();
  while (value > cur && !target.compare_exchange_weak(cur, value)) {
  }
}

// Calls op's output allocator; if it throws, the collective still has to run on this rank (the
// others are in it), so the data lands in `scratch` and the op fails afterwards with the
// allocator's exception.
void* allocate_output(Handle::State& state, std::size_t count, std::size_t elem,
                      std::vector<std::uint8_t>& scratch, std::exception_ptr& failure) {
  void* out = nullptr;
  try {
    if (!state.output) throw UsageError("no output allocator was given");
    out = state.output(count);
    if (out == nullptr && count > 0) throw UsageError("the output allocator returned nullptr");
  } catch (...) {
    failure = std::current_exception();
    scratch.resize(count * elem);
    out = scratch.data();
  }
  return out;
}

}  // namespace

Executor::Executor(Transport& transport, const EngineOptions& options, Timeline& timeline,
                   EngineCounters& counters)
    : transport_(transport),
      fusion_threshold_(options.fusion_threshold),
      timeline_(timeline),
      counters_(counters) {}

void Executor::run(std::vector<ReadyOp>& ops, const Finish& finish) {
  if (timeline_.enabled()) {
    for (ReadyOp& op : ops) {
      std::string negotiate = std::string("NEGOTIATE_") + upper_name_of(op.response.request.type);
      timeline_.span(op.response.request.name, negotiate, op.state->submitted, op.agreed);
    }
  }
  std::vector<bool> done(ops.size(), false);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (done[i]) continue;
    done[i] = true;
    ReadyOp& op = ops[i];
    if (!op.response.ok()) {
      std::exception_ptr error;
      if (op.response.error_kind == Response::ErrorKind::kMismatch) {
        counters_.mismatches++;
        error = std::make_exception_ptr(MismatchError(op.response.error, transport_.rank()));
      } else {
        counters_.abandoned++;
        error = std::make_exception_ptr(TimeoutError(op.response.error, transport_.rank()));
      }
      finish(op, error);
      continue;
    }
    if (op.response.request.type != OpType::kAllreduce) {
      run_one(op, finish);
      continue;
    }
    std::vector<ReadyOp*> batch{&op};
    std::size_t bytes = op.response.bytes();
    if (fusion_threshold_ > 0 && bytes <= fusion_threshold_ && bytes < kDirectAllreduceBytes) {
      for (std::size_t j = i + 1; j < ops.size(); ++j) {
        if (done[j] || !fusable(op, ops[j])) continue;
        std::size_t b = ops[j].response.bytes();
        if (bytes + b > fusion_threshold_ || b >= kDirectAllreduceBytes) continue;
        bytes += b;
        batch.push_back(&ops[j]);
        done[j] = true;
      }
    }
    run_allreduce_batch(batch, finish);
  }
}

std::optional<std::pair<const void*, void*>> Executor::adjacent_span(
    const std::vector<ReadyOp*>& batch, std::size_t elem) {
  auto at = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p); };
  const Handle::State& head = *batch.front()->state;
  std::uintptr_t send = at(head.sendbuf), recv = at(head.recvbuf);
  if (send == 0 || recv == 0) return std::nullopt;
  const std::uintptr_t send0 = send, recv0 = recv;
  for (const ReadyOp* op : batch) {
    const Handle::State& s = *op->state;
    if (at(s.sendbuf) != send || at(s.recvbuf) != recv) return std::nullopt;
    const std::size_t n = static_cast<std::size_t>(op->response.request.count) * elem;
    send += n;
    recv += n;
  }
  // In place, or two spans that do not overlap at all.
  if (send0 != recv0 && send0 < recv && recv0 < send) return std::nullopt;
  return std::make_pair(head.sendbuf, head.recvbuf);
}

void Executor::run_allreduce_batch(const std::vector<ReadyOp*>& batch, const Finish& finish) {
  const Request& first = batch.front()->response.request;
  const std::size_t elem = size_of(first.dtype);
  std::size_t total = 0;
  for (const ReadyOp* op : batch) total += static_cast<std::size_t>(op->response.request.count);
  const auto start = Clock::now();
  const std::uint64_t id = ++batch_id_;
  const std::string args = "\"bytes\":" + std::to_string(total * elem) +
                           ",\"fused\":" + std::to_string(batch.size()) +
                           ",\"batch\":" + std::to_string(id);
  for (const ReadyOp* op : batch) {
    timeline_.span(op->response.request.name, "QUEUE", op->agreed, start);
  }
  try {
    counters_.allreduce_calls++;
    update_max(counters_.largest_batch, batch.size());
    if (batch.size() == 1) {
      Handle::State& s = *batch.front()->state;
      transport_.allreduce(s.sendbuf, s.recvbuf, total, first.dtype, first.op);
      timeline_.span(first.name, "ALLREDUCE", start, Clock::now(), args);
    } else if (const auto span = adjacent_span(batch, elem)) {
      // The tensors lie end to end in batch order on this rank (a flat gradient vector whose
      // slices were submitted in memory order): reduced where they are, without the two copies
      // through the fusion buffer. Every rank reduces the same elements in the same order,
      // whether it copies or not.
      counters_.fused_batches++;
      counters_.fused_tensors += batch.size();
      counters_.fused_in_place++;
      transport_.allreduce(span->first, span->second, total, first.dtype, first.op);
      const auto reduced = Clock::now();
      for (const ReadyOp* op : batch) {
        timeline_.span(op->response.request.name, "ALLREDUCE", start, reduced, args);
      }
    } else {
      counters_.fused_batches++;
      counters_.fused_tensors += batch.size();
      if (fusion_buffer_.size() < total * elem) fusion_buffer_.resize(total * elem);
      std::uint8_t* buf = fusion_buffer_.data();
      std::size_t offset = 0;
      for (const ReadyOp* op : batch) {
        std::size_t n = static_cast<std::size_t>(op->response.request.count) * elem;
        if (n > 0) copy_bytes(buf + offset, op->state->sendbuf, n);
        offset += n;
      }
      const auto packed = Clock::now();
      transport_.allreduce(buf, buf, total, first.dtype, first.op);
      const auto reduced = Clock::now();
      offset = 0;
      for (const ReadyOp* op : batch) {
        std::size_t n = static_cast<std::size_t>(op->response.request.count) * elem;
        if (n > 0) copy_bytes(op->state->recvbuf, buf + offset, n);
        offset += n;
      }
      const auto unpacked = Clock::now();
      for (const ReadyOp* op : batch) {
        const std::string& name = op->response.request.name;
        timeline_.span(name, "MEMCPY_IN_FUSION_BUFFER", start, packed, args);
        timeline_.span(name, "ALLREDUCE", packed, reduced, args);
        timeline_.span(name, "MEMCPY_OUT_FUSION_BUFFER", reduced, unpacked, args);
      }
    }
  } catch (...) {
    std::exception_ptr error = std::current_exception();
    for (ReadyOp* op : batch) finish(*op, with_context(error, describe(*op) + " failed"));
    throw;
  }
  for (ReadyOp* op : batch) finish(*op, nullptr);
}

void Executor::run_one(ReadyOp& op, const Finish& finish) {
  const Request& r = op.response.request;
  const auto start = Clock::now();
  timeline_.span(r.name, "QUEUE", op.agreed, start);
  Handle::State& s = *op.state;
  std::exception_ptr local_failure;
  try {
    switch (r.type) {
      case OpType::kAllreduce:  // handled by run_allreduce_batch
        break;
      case OpType::kJoin: s.received_counts = {static_cast<std::size_t>(r.root)}; break;
      case OpType::kBroadcast:
        transport_.broadcast(s.recvbuf, static_cast<std::size_t>(r.count), r.dtype, r.root);
        break;
      case OpType::kReducescatter:
        transport_.reducescatter(s.sendbuf, s.recvbuf, static_cast<std::size_t>(r.count), r.dtype,
                                 r.op);
        break;
      case OpType::kAllgather: {
        std::vector<std::size_t> counts(op.response.rank_counts.begin(),
                                        op.response.rank_counts.end());
        std::size_t total = 0;
        for (std::size_t c : counts) total += c;
        std::vector<std::uint8_t> scratch;
        void* out = allocate_output(s, total, size_of(r.dtype), scratch, local_failure);
        transport_.allgatherv(s.sendbuf, out, counts, r.dtype);
        s.received_counts = std::move(counts);
        break;
      }
      case OpType::kAlltoall: {
        // The receive splits are exchanged here rather than negotiated: they form an n x n
        // matrix that would not fit the response cache at large n.
        const int n = transport_.size();
        std::vector<std::int64_t> send_sizes(s.send_splits.begin(), s.send_splits.end());
        std::vector<std::int64_t> recv_sizes(static_cast<std::size_t>(n));
        std::vector<std::size_t> ones(static_cast<std::size_t>(n), 1);
        transport_.alltoallv(send_sizes.data(), ones, recv_sizes.data(), ones, DataType::kInt64);
        std::vector<std::size_t> recv_splits(recv_sizes.begin(), recv_sizes.end());
        std::size_t total = 0;
        for (std::size_t c : recv_splits) total += c;
        std::vector<std::uint8_t> scratch;
        void* out = allocate_output(s, total, size_of(r.dtype), scratch, local_failure);
        transport_.alltoallv(s.sendbuf, s.send_splits, out, recv_splits, r.dtype);
        s.received_counts = std::move(recv_splits);
        break;
      }
    }
  } catch (...) {
    finish(op, with_context(std::current_exception(), describe(op) + " failed"));
    throw;
  }
  timeline_.span(r.name, upper_name_of(r.type), start, Clock::now(),
                 "\"bytes\":" + std::to_string(op.response.bytes()));
  finish(op, local_failure
                 ? with_context(local_failure, describe(op) + ": output allocation failed")
                 : nullptr);
}

}  // namespace hora::detail::engine
