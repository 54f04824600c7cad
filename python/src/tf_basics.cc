// The C functions hora.tensorflow calls through ctypes for what is not a TensorFlow op: init,
// shutdown, the rank and size queries, process sets, the timeline and the elastic calls. They
// live in the op library (one .so, as Horovod's mpi_lib) but in a translation unit of their own
// that includes no TensorFlow header, so it builds in a second.
//
// Every function returns 0 on success, or the kind of hora::Error it caught (below); the message
// is then in hora_tf_last_error(), per thread. ctypes releases the GIL around every call, so a
// blocking call (init, barrier, join, add_process_set) lets other Python threads run.
#include <hora/async.h>
#include <hora/elastic.h>
#include <hora/error.h>
#include <hora/hora.h>
#include <hora/process_set.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

namespace {

// Kinds; python/hora/tensorflow/mpi_ops.py maps them to hora's Python exception classes.
enum Kind : int {
  kOk = 0,
  kUsage = 1,
  kConnection = 2,
  kTimeout = 3,
  kPeer = 4,
  kMismatch = 5,
  kAborted = 6,
  kOther = 7,
  kHostsUpdated = 8,
};

thread_local std::string last_error;

int caught() {
  try {
    throw;
  } catch (const hora::elastic::HostsUpdatedInterrupt& e) {
    last_error = e.what();
    return kHostsUpdated;
  } catch (const hora::UsageError& e) {
    last_error = e.what();
    return kUsage;
  } catch (const hora::ConnectionError& e) {
    last_error = e.what();
    return kConnection;
  } catch (const hora::TimeoutError& e) {
    last_error = e.what();
    return kTimeout;
  } catch (const hora::PeerFailure& e) {
    last_error = e.what();
    return kPeer;
  } catch (const hora::MismatchError& e) {
    last_error = e.what();
    return kMismatch;
  } catch (const hora::AbortedError& e) {
    last_error = e.what();
    return kAborted;
  } catch (const std::exception& e) {
    last_error = e.what();
    return kOther;
  } catch (...) {
    last_error = "unknown exception";
    return kOther;
  }
}

template <typename Fn>
int guarded(Fn&& fn) {
  try {
    fn();
    return kOk;
  } catch (...) {
    return caught();
  }
}

hora::ProcessSet set_of(int id) { return hora::ProcessSet{id}; }

// Copies `values` into out[0..capacity) and their number into *n (the caller retries with more
// room when *n > capacity).
void copy_out(const std::vector<int>& values, int* out, int capacity, int* n) {
  *n = static_cast<int>(values.size());
  for (int i = 0; i < capacity && i < *n; ++i) out[i] = values[i];
}

}  // namespace

extern "C" {

const char* hora_tf_last_error() { return last_error.c_str(); }

int hora_tf_init() {
  return guarded([] { hora::init(); });
}
int hora_tf_shutdown() {
  return guarded([] { hora::shutdown(); });
}
int hora_tf_is_initialized() { return hora::is_initialized() ? 1 : 0; }

int hora_tf_rank(int* out) {
  return guarded([&] { *out = hora::rank(); });
}
int hora_tf_size(int* out) {
  return guarded([&] { *out = hora::size(); });
}
int hora_tf_local_rank(int* out) {
  return guarded([&] { *out = hora::local_rank(); });
}
int hora_tf_local_size(int* out) {
  return guarded([&] { *out = hora::local_size(); });
}
int hora_tf_cross_rank(int* out) {
  return guarded([&] { *out = hora::cross_rank(); });
}
int hora_tf_cross_size(int* out) {
  return guarded([&] { *out = hora::cross_size(); });
}

int hora_tf_barrier(int set) {
  return guarded([&] {
    if (set == 0) {
      hora::barrier();
    } else {
      hora::barrier(set_of(set));
    }
  });
}
int hora_tf_join(int* last) {
  return guarded([&] { *last = hora::join(); });
}

int hora_tf_add_process_set(const int* ranks, int n, int* id) {
  return guarded([&] { *id = hora::add_process_set(std::vector<int>(ranks, ranks + n)).id; });
}
int hora_tf_remove_process_set(int id) {
  return guarded([&] { hora::remove_process_set(set_of(id)); });
}
int hora_tf_process_set_ids(int* out, int capacity, int* n) {
  return guarded([&] {
    std::vector<int> ids;
    for (hora::ProcessSet s : hora::process_sets()) ids.push_back(s.id);
    copy_out(ids, out, capacity, n);
  });
}
int hora_tf_process_set_ranks(int id, int* out, int capacity, int* n) {
  return guarded([&] { copy_out(hora::ranks(set_of(id)), out, capacity, n); });
}
int hora_tf_process_set_rank(int id, int* out) {
  return guarded([&] { *out = hora::rank(set_of(id)); });
}
int hora_tf_process_set_size(int id, int* out) {
  return guarded([&] { *out = hora::size(set_of(id)); });
}

int hora_tf_start_timeline(const char* path, int mark_cycles) {
  return guarded([&] { hora::start_timeline(path, mark_cycles != 0); });
}
int hora_tf_stop_timeline() {
  return guarded([] { hora::stop_timeline(); });
}

int hora_tf_elastic_enabled() { return hora::elastic::enabled() ? 1 : 0; }
int hora_tf_elastic_round(int* out) {
  return guarded([&] { *out = hora::elastic::round(); });
}
int hora_tf_elastic_reset_pending() { return hora::elastic::reset_pending() ? 1 : 0; }
int hora_tf_elastic_reset(double timeout_seconds) {
  return guarded([&] {
    hora::elastic::reset(std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000)));
  });
}

}  // extern "C"
