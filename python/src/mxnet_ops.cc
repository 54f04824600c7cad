// The C half of hora.mxnet: C functions over libhora's public API, called by
// python/hora/mxnet/mpi_ops.py through ctypes with the data pointers of MXNet NDArrays (read
// after wait_to_read(), so MXNet's engine has finished writing them). No MXNet header is used:
// the library builds without MXNet and is loaded into any Python that has it.
//
// Every collective is submitted to libhora's async engine by name and synchronized before the
// call returns (ctypes releases the GIL meanwhile): ranks may call them in different orders, as
// with Horovod's MXNet ops, and the engine fuses small allreduces that other threads submit.
//
// Every function returns 0 on success, or the kind of hora::Error it caught (the numbers of
// hora.tensorflow's: 1 usage, 2 connection, 3 timeout, 4 peer failure, 5 mismatch, 6 aborted,
// 7 other); the message is then in hora_mx_last_error(), per thread.
#include <hora/async.h>
#include <hora/error.h>
#include <hora/hora.h>
#include <hora/process_set.h>
#include <hora/types.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

namespace {

thread_local std::string last_error;

template <typename Fn>
int guarded(Fn&& fn) {
  try {
    fn();
    return 0;
  } catch (const hora::UsageError& e) {
    last_error = e.what();
    return 1;
  } catch (const hora::ConnectionError& e) {
    last_error = e.what();
    return 2;
  } catch (const hora::TimeoutError& e) {
    last_error = e.what();
    return 3;
  } catch (const hora::PeerFailure& e) {
    last_error = e.what();
    return 4;
  } catch (const hora::MismatchError& e) {
    last_error = e.what();
    return 5;
  } catch (const hora::AbortedError& e) {
    last_error = e.what();
    return 6;
  } catch (const std::exception& e) {
    last_error = e.what();
    return 7;
  }
}

hora::ProcessSet set_of(int id) {
  hora::ProcessSet s;
  s.id = id;
  return s;
}

hora::Shape shape_of(const int64_t* dims, int ndim) {
  hora::Shape shape(dims, dims + ndim);
  if (shape.empty()) shape.push_back(1);  // a scalar is one element, as in Horovod
  return shape;
}

}  // namespace

extern "C" {

const char* hora_mx_last_error() { return last_error.c_str(); }

int hora_mx_init() {
  return guarded([] {
    if (!hora::is_initialized()) hora::init();
  });
}
int hora_mx_shutdown() {
  return guarded([] { hora::shutdown(); });
}
int hora_mx_is_initialized() { return hora::is_initialized() ? 1 : 0; }

// what: 0 rank, 1 size, 2 local_rank, 3 local_size, 4 cross_rank, 5 cross_size.
int hora_mx_query(int what, int* out) {
  return guarded([&] {
    switch (what) {
      case 0: *out = hora::rank(); break;
      case 1: *out = hora::size(); break;
      case 2: *out = hora::local_rank(); break;
      case 3: *out = hora::local_size(); break;
      case 4: *out = hora::cross_rank(); break;
      default: *out = hora::cross_size(); break;
    }
  });
}

// A process set's size and this rank's rank in it (-1: not a member); id 0 is the global set.
int hora_mx_set_query(int id, int* size, int* rank) {
  return guarded([&] {
    if (id == 0) {
      *size = hora::size();
      *rank = hora::rank();
      return;
    }
    std::vector<int> ranks = hora::ranks(set_of(id));
    *size = static_cast<int>(ranks.size());
    *rank = -1;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i] == hora::rank()) *rank = static_cast<int>(i);
    }
  });
}

int hora_mx_add_process_set(const int* ranks, int n, int* id) {
  return guarded([&] { *id = hora::add_process_set(std::vector<int>(ranks, ranks + n)).id; });
}
int hora_mx_remove_process_set(int id) {
  return guarded([&] { hora::remove_process_set(set_of(id)); });
}

// recv = the reduction of send over the set's ranks (send == recv: in place). dtype and op are
// hora::DataType and hora::ReduceOp numbers.
int hora_mx_allreduce(const char* name, const void* send, void* recv, const int64_t* dims, int ndim,
                      int dtype, int op, int set) {
  return guarded([&] {
    hora::synchronize(hora::allreduce_async(name, send, recv, shape_of(dims, ndim),
                                            static_cast<hora::DataType>(dtype),
                                            static_cast<hora::ReduceOp>(op), nullptr, set_of(set)));
  });
}

// The concatenation of every rank's rows, in a buffer this library allocates (*out, freed by
// hora_mx_free); *count is its number of elements.
int hora_mx_allgather(const char* name, const void* send, const int64_t* dims, int ndim, int dtype,
                      int set, void** out, int64_t* count) {
  *out = nullptr;
  *count = 0;
  return guarded([&] {
    const std::size_t element = hora::size_of(static_cast<hora::DataType>(dtype));
    hora::OutputAllocator allocate = [out, count, element](std::size_t n) -> void* {
      *out = std::malloc(n * element + 1);  // + 1: malloc(0) may return nullptr
      if (*out == nullptr) throw hora::Error("hora.mxnet allgather: out of memory");
      *count = static_cast<int64_t>(n);
      return *out;
    };
    try {
      hora::synchronize(hora::allgather_async(name, send, shape_of(dims, ndim),
                                              static_cast<hora::DataType>(dtype),
                                              std::move(allocate), nullptr, set_of(set)));
    } catch (...) {
      std::free(*out);
      *out = nullptr;
      throw;
    }
  });
}
void hora_mx_free(void* p) { std::free(p); }

// buffer = the root's buffer (root: a rank of the set).
int hora_mx_broadcast(const char* name, void* buffer, const int64_t* dims, int ndim, int dtype,
                      int root, int set) {
  return guarded([&] {
    hora::synchronize(hora::broadcast_async(name, buffer, shape_of(dims, ndim),
                                            static_cast<hora::DataType>(dtype), root, nullptr,
                                            set_of(set)));
  });
}

int hora_mx_barrier() {
  return guarded([] { hora::barrier(); });
}

}  // extern "C"
