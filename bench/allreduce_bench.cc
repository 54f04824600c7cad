// Collective benchmark in the format of nccl-tests, over libhora's public API.
//
//   horarun -np 4 -H localhost:4 allreduce_bench -b 4 -e 64M -f 2
//   horarun -np 2 allreduce_bench --collective allgather --dtype all -e 1M
//   horarun -np 8 -H gpu1:4,gpu2:4 allreduce_bench --device cuda -e 1G   # one GPU per rank
//
// For every size from -b to -e (multiplied by -f, or stepped by -i), every selected collective,
// data type and reduction: one checked run, -w warm-up runs, then -n timed runs, out of place and
// (where hora has an in-place form) in place. Rank 0 prints one row per size:
//
//   size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
//
// time is the mean wall time of one call in microseconds, averaged over the ranks (-a changes
// that); algbw = size / time and busbw = algbw * factor in GB/s (1e9 bytes per second), with
// nccl-tests' factors (doc/PERFORMANCE.md there): allreduce 2(n-1)/n; allgather, alltoall,
// reducescatter (n-1)/n; broadcast 1. size is the larger buffer of the call (allgather: what is
// received, reducescatter: what is sent, alltoall: what one rank sends), as in nccl-tests.
//
// #wrong counts the elements of the checked run that differ from the expected result, summed
// over the ranks. Inputs are small integers chosen so that every reduction is exact in every
// data type, so all checks are exact except the average of floating-point types, which allows
// the rounding of one division.
//
// In-place forms: allreduce and alltoall with sendbuf == recvbuf; as in NCCL, allgather with
// sendbuf pointing at this rank's block of recvbuf and reducescatter with recvbuf pointing at
// this rank's block of sendbuf. broadcast has only the in-place form ("n/a" out of place).
//
// --device cuda times GPU buffers instead: each rank selects hora::cuda_device(), allocates its
// buffers there with cudaMalloc and calls the stream overloads of <hora/cuda.h> on a stream of
// its own (libhora routes device buffers to NCCL). Inputs are written and results checked on the
// host, copied in and out with cudaMemcpyAsync outside the timed part. NCCL has no in-place
// alltoall, so that column is "n/a" on GPUs. The CUDA code is compiled only when hora's build
// found CUDA and NCCL (examples/meson.build defines HORA_EXAMPLE_CUDA and links the CUDA
// runtime); the CPU path needs neither.
//
// Exit status: 0 when every check passed, 1 when a check failed or a collective (or a CUDA call)
// threw, 2 for a usage error, 77 for `--device cuda` where it cannot run: this program or libhora
// built without CUDA/NCCL, or a rank with no CUDA device (a test harness counts 77 as
// "skipped"; every rank exits 77 together).

#include <hora/cuda.h>
#include <hora/hora.h>

#if HORA_EXAMPLE_CUDA
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <unistd.h>

namespace {

using hora::DataType;
using hora::ReduceOp;

enum class Collective { kAllreduce, kAllgather, kBroadcast, kAlltoall, kReducescatter };

constexpr Collective kAllCollectives[] = {Collective::kAllreduce, Collective::kAllgather,
                                          Collective::kBroadcast, Collective::kAlltoall,
                                          Collective::kReducescatter};
constexpr DataType kAllTypes[] = {DataType::kUInt8,   DataType::kInt8,    DataType::kInt32,
                                  DataType::kInt64,   DataType::kFloat16, DataType::kBFloat16,
                                  DataType::kFloat32, DataType::kFloat64};
constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                                ReduceOp::kProduct};

const char* name_of(Collective c) {
  switch (c) {
    case Collective::kAllreduce: return "allreduce";
    case Collective::kAllgather: return "allgather";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kAlltoall: return "alltoall";
    case Collective::kReducescatter: return "reducescatter";
  }
  return "?";
}

bool reduces(Collective c) {
  return c == Collective::kAllreduce || c == Collective::kReducescatter;
}

// ---------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------

// How the per-rank times become the one printed (nccl-tests' -a).
enum class TimeAcrossRanks { kRank0 = 0, kAverage = 1, kMin = 2, kMax = 3 };

struct Options {
  static constexpr std::size_t kDefaultMinBytes = 4;
  static constexpr std::size_t kDefaultMaxBytes = 1 << 20;
  static constexpr double kDefaultFactor = 2.0;
  static constexpr int kDefaultIters = 20;
  static constexpr int kDefaultWarmup = 5;
  // Above this size the iteration counts shrink in proportion (at least kMinScaledIters), so a
  // default sweep to 64 MiB takes seconds, not minutes. --full-iters turns that off.
  static constexpr std::size_t kScaleAboveBytes = 1 << 20;
  static constexpr int kMinScaledIters = 2;

  std::size_t min_bytes = kDefaultMinBytes;
  std::size_t max_bytes = kDefaultMaxBytes;
  double factor = kDefaultFactor;
  std::size_t increment = 0;  // nonzero: linear steps instead of the factor
  int iters = kDefaultIters;
  int warmup = kDefaultWarmup;
  bool check = true;
  bool full_iters = false;
  int root = 0;
  TimeAcrossRanks time_mode = TimeAcrossRanks::kAverage;
  std::vector<Collective> collectives{std::begin(kAllCollectives), std::end(kAllCollectives)};
  std::vector<DataType> types{DataType::kFloat32};
  std::vector<ReduceOp> ops{ReduceOp::kSum};
  std::string device = "cpu";
};

constexpr const char* kUsage =
    "usage: allreduce_bench [-b MIN] [-e MAX] [-f FACTOR | -i STEP] [-n ITERS] [-w WARMUP]\n"
    "                       [-c 0|1] [-a 0|1|2|3] [-r ROOT] [--op OP] [--dtype TYPE]\n"
    "                       [--collective NAME[,NAME...]] [--device cpu|cuda] [--full-iters]\n"
    "\n"
    "Times hora's collectives in the table format of nccl-tests. Run it under horarun:\n"
    "  horarun -np 4 -H localhost:4 allreduce_bench -b 4 -e 64M\n"
    "\n"
    "  -b, --minbytes N      smallest size in bytes; K, M, G suffixes (default 4)\n"
    "  -e, --maxbytes N      largest size in bytes (default 1M)\n"
    "  -f, --stepfactor X    multiply the size by X each row (default 2)\n"
    "  -i, --stepbytes N     add N bytes each row instead\n"
    "  -n, --iters N         timed calls per row (default 20; fewer above 1M unless --full-iters)\n"
    "  -w, --warmup_iters N  untimed calls before them (default 5; scaled the same way)\n"
    "  -c, --check 0|1       check the results and count wrong elements (default 1)\n"
    "  -a, --average 0..3    time printed: 0 rank 0's, 1 mean over ranks, 2 min, 3 max (default "
    "1)\n"
    "  -r, --root N          root rank of broadcast (default 0)\n"
    "  -o, --op OP           sum, avg, min, max, prod or all (default sum)\n"
    "  -d, --dtype TYPE      uint8, int8, int32, int64, float16, bfloat16, float32, float64\n"
    "                        or all (default float32)\n"
    "      --collective L    allreduce, allgather, broadcast, alltoall, reducescatter, a\n"
    "                        comma-separated list of them, or all (default all)\n"
    "      --device D        cpu (default): host buffers; cuda: buffers on this rank's GPU\n"
    "                        (hora::cuda_device()), collectives through NCCL; exit status 77\n"
    "                        when a rank has no GPU or hora was built without NCCL\n"
    "      --full-iters      run -n and -w calls at every size\n"
    "  -h, --help            this text\n"
    "\n"
    "Exit status: 0 all checks passed, 1 a check failed or a collective failed, 2 usage,\n"
    "77 --device cuda unavailable (no GPU, or built without CUDA/NCCL).\n";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::size_t parse_bytes(std::string_view flag, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  unsigned long long scale = 1;
  std::string_view suffix(end);
  if (suffix == "K" || suffix == "k")
    scale = 1ull << 10;
  else if (suffix == "M" || suffix == "m")
    scale = 1ull << 20;
  else if (suffix == "G" || suffix == "g")
    scale = 1ull << 30;
  else if (!suffix.empty())
    scale = 0;
  if (text.empty() || text[0] == '-' || end == text.c_str() || scale == 0 || errno == ERANGE ||
      value > (1ull << 40) / scale) {
    throw UsageError(std::string(flag) + " wants a size in bytes such as 4, 64K or 64M, got '" +
                     text + "'");
  }
  return static_cast<std::size_t>(value * scale);
}

long parse_integer(std::string_view flag, const std::string& text, long min, long max) {
  errno = 0;
  char* end = nullptr;
  long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || value < min || value > max) {
    throw UsageError(std::string(flag) + " wants an integer in [" + std::to_string(min) + ", " +
                     std::to_string(max) + "], got '" + text + "'");
  }
  return value;
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    std::size_t comma = text.find(',', start);
    parts.push_back(text.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return parts;
}

template <typename T, std::size_t N>
std::vector<T> parse_names(std::string_view flag, const std::string& text, const T (&all)[N],
                           const char* (*name)(T), const char* alias_from = nullptr,
                           const char* alias_to = nullptr) {
  if (text == "all") return std::vector<T>(std::begin(all), std::end(all));
  std::vector<T> out;
  for (std::string part : split_commas(text)) {
    if (alias_from != nullptr && part == alias_from) part = alias_to;
    bool found = false;
    for (T t : all) {
      if (part == name(t)) {
        if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
        found = true;
      }
    }
    if (!found) {
      std::string known;
      for (T t : all) known += std::string(known.empty() ? "" : ", ") + name(t);
      throw UsageError(std::string(flag) + ": unknown '" + part + "'; one of " + known +
                       ", or all");
    }
  }
  return out;
}

const char* type_name(DataType t) { return hora::name_of(t); }
const char* op_name(ReduceOp o) { return hora::name_of(o); }

// Returns false for --help. Accepts "-x value", "--long value" and "--long=value".
bool parse_options(int argc, char** argv, Options& o) {
  bool factor_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") return false;
    std::string value;
    bool inline_value = false;
    if (auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      inline_value = true;
    }
    auto take = [&]() -> const std::string& {
      if (!inline_value) {
        if (i + 1 >= argc) throw UsageError(arg + " needs a value");
        value = argv[++i];
      }
      return value;
    };
    if (arg == "-b" || arg == "--minbytes") {
      o.min_bytes = parse_bytes(arg, take());
    } else if (arg == "-e" || arg == "--maxbytes") {
      o.max_bytes = parse_bytes(arg, take());
    } else if (arg == "-f" || arg == "--stepfactor") {
      const std::string& text = take();
      char* end = nullptr;
      o.factor = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !(o.factor > 1.0) || !std::isfinite(o.factor)) {
        throw UsageError(arg + " wants a factor greater than 1, got '" + text + "'");
      }
      factor_given = true;
    } else if (arg == "-i" || arg == "--stepbytes") {
      o.increment = parse_bytes(arg, take());
      if (o.increment == 0) throw UsageError(arg + " wants a step greater than 0");
    } else if (arg == "-n" || arg == "--iters") {
      o.iters = static_cast<int>(parse_integer(arg, take(), 1, 1000000));
    } else if (arg == "-w" || arg == "--warmup_iters") {
      o.warmup = static_cast<int>(parse_integer(arg, take(), 0, 1000000));
    } else if (arg == "-c" || arg == "--check") {
      o.check = parse_integer(arg, take(), 0, 1) == 1;
    } else if (arg == "-a" || arg == "--average") {
      o.time_mode = static_cast<TimeAcrossRanks>(parse_integer(arg, take(), 0, 3));
    } else if (arg == "-r" || arg == "--root") {
      o.root = static_cast<int>(parse_integer(arg, take(), 0, 1 << 24));
    } else if (arg == "-o" || arg == "--op") {
      o.ops = parse_names(arg, take(), kAllOps, op_name, "average", "avg");
    } else if (arg == "-d" || arg == "--dtype") {
      o.types = parse_names(arg, take(), kAllTypes, type_name, "float", "float32");
    } else if (arg == "--collective") {
      o.collectives = parse_names(arg, take(), kAllCollectives, name_of);
    } else if (arg == "--device") {
      o.device = take();
      if (o.device != "cpu" && o.device != "cuda") {
        throw UsageError("--device wants cpu or cuda, got '" + o.device + "'");
      }
    } else if (arg == "--full-iters") {
      o.full_iters = true;
    } else {
      throw UsageError("unknown argument '" + std::string(argv[i]) + "'");
    }
  }
  if (o.increment != 0 && factor_given) {
    throw UsageError("-f and -i both given: choose a factor or a step");
  }
  if (o.min_bytes > o.max_bytes) {
    throw UsageError("-b " + std::to_string(o.min_bytes) + " is larger than -e " +
                     std::to_string(o.max_bytes));
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Typed access to untyped buffers. Every value written is a small integer, exact in every type.
// ---------------------------------------------------------------------------------------------

void put(void* buffer, DataType t, std::size_t i, double v) {
  switch (t) {
    case DataType::kUInt8: static_cast<std::uint8_t*>(buffer)[i] = std::uint8_t(v); break;
    case DataType::kInt8: static_cast<std::int8_t*>(buffer)[i] = std::int8_t(v); break;
    case DataType::kInt16: static_cast<std::int16_t*>(buffer)[i] = std::int16_t(v); break;
    case DataType::kInt32: static_cast<std::int32_t*>(buffer)[i] = std::int32_t(v); break;
    case DataType::kInt64: static_cast<std::int64_t*>(buffer)[i] = std::int64_t(v); break;
    case DataType::kFloat16:
      static_cast<hora::float16*>(buffer)[i] = hora::to_float16(float(v));
      break;
    case DataType::kBFloat16:
      static_cast<hora::bfloat16*>(buffer)[i] = hora::to_bfloat16(float(v));
      break;
    case DataType::kFloat32: static_cast<float*>(buffer)[i] = float(v); break;
    case DataType::kFloat64: static_cast<double*>(buffer)[i] = v; break;
  }
}

double get(const void* buffer, DataType t, std::size_t i) {
  switch (t) {
    case DataType::kUInt8: return static_cast<const std::uint8_t*>(buffer)[i];
    case DataType::kInt8: return static_cast<const std::int8_t*>(buffer)[i];
    case DataType::kInt16: return static_cast<const std::int16_t*>(buffer)[i];
    case DataType::kInt32: return static_cast<const std::int32_t*>(buffer)[i];
    case DataType::kInt64: return double(static_cast<const std::int64_t*>(buffer)[i]);
    case DataType::kFloat16: return hora::to_float(static_cast<const hora::float16*>(buffer)[i]);
    case DataType::kBFloat16: return hora::to_float(static_cast<const hora::bfloat16*>(buffer)[i]);
    case DataType::kFloat32: return static_cast<const float*>(buffer)[i];
    case DataType::kFloat64: return static_cast<const double*>(buffer)[i];
  }
  return 0.0;
}

bool is_float(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kBFloat16 || t == DataType::kFloat32 ||
         t == DataType::kFloat64;
}

// Relative error allowed for the average of floating-point types: the division rounds once in
// the type (and 16-bit types may round an intermediate float result once more).
double average_tolerance(DataType t) {
  switch (t) {
    case DataType::kFloat16: return 2.0 / 1024;
    case DataType::kBFloat16: return 2.0 / 128;
    case DataType::kFloat32: return 2.0 / (1 << 23);
    case DataType::kFloat64: return 2.0 / (1ull << 52);
    default: return 0.0;
  }
}

// The input rank r holds at element i. Values stay within 0..12, and a reduction over n ranks
// within 0..2n (sum) or 1..8 (product: at most three ranks contribute a 2, the rest 1), so the
// int8 sum is exact up to 63 ranks and the bfloat16 sum up to 128.
double input_value(Collective c, ReduceOp op, int r, int n, std::size_t i) {
  if (reduces(c)) {
    if (op == ReduceOp::kProduct) {
      const std::size_t twos = 1 + i % 3;
      return (i + std::size_t(r)) % std::size_t(n) < twos ? 2.0 : 1.0;
    }
    return double((i + std::size_t(r)) % 3);
  }
  return double((std::size_t(r) * 7 + i) % 13);
}

double reduce_inputs(Collective c, ReduceOp op, int n, std::size_t i, DataType t) {
  double acc = input_value(c, op, 0, n, i);
  for (int r = 1; r < n; ++r) {
    const double v = input_value(c, op, r, n, i);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage: acc += v; break;
      case ReduceOp::kMin: acc = std::min(acc, v); break;
      case ReduceOp::kMax: acc = std::max(acc, v); break;
      case ReduceOp::kProduct: acc *= v; break;
    }
  }
  if (op == ReduceOp::kAverage) acc = is_float(t) ? acc / n : std::trunc(acc / n);
  return acc;
}

bool matches(double got, double expected, DataType t, ReduceOp op) {
  if (op == ReduceOp::kAverage && is_float(t)) {
    return std::fabs(got - expected) <= average_tolerance(t) * std::max(1.0, std::fabs(expected));
  }
  return got == expected;
}

// ---------------------------------------------------------------------------------------------
// One row of the table
// ---------------------------------------------------------------------------------------------

struct Shape {
  std::size_t count;     // elements the "size" column counts
  std::size_t per_rank;  // allgather: elements each rank sends; alltoall: per peer;
                         // reducescatter: elements each rank receives
};

// count is rounded down to a multiple of the ranks where the collective splits it evenly, and
// never below one element per rank.
Shape shape_for(Collective c, std::size_t bytes, DataType t, int n) {
  std::size_t count = std::max<std::size_t>(1, bytes / hora::size_of(t));
  if (c == Collective::kAllreduce || c == Collective::kBroadcast) return {count, count};
  std::size_t per = std::max<std::size_t>(1, count / std::size_t(n));
  return {per * std::size_t(n), per};
}

double bus_factor(Collective c, int n) {
  switch (c) {
    case Collective::kAllreduce: return 2.0 * (n - 1) / n;
    case Collective::kBroadcast: return 1.0;
    default: return double(n - 1) / n;
  }
}

// Thrown when a CUDA runtime call fails; the message names the rank, host, call and CUDA error.
struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

#if HORA_EXAMPLE_CUDA
void check_cuda(cudaError_t status, const std::string& what) {
  if (status == cudaSuccess) return;
  throw CudaError("rank " + std::to_string(hora::rank()) + " on " + hora::hostname() + ": " + what +
                  " failed: " + cudaGetErrorString(status) + " (" + cudaGetErrorName(status) + ")");
}
#endif

// Where the collectives run: host memory through <hora/hora.h>, or this rank's GPU through the
// stream overloads of <hora/cuda.h>.
struct Device {
  bool cuda = false;
  int index = -1;          // the CUDA device (hora::cuda_device()) when cuda
  void* stream = nullptr;  // a cudaStream_t this program created, when cuda
};

// The buffers of one row. send and recv are host memory: the collective's buffers on the CPU,
// and on a GPU the staging area where inputs are written and results checked. With a GPU the
// collective runs on dev_send / dev_recv, device memory of the same sizes owned by this object.
class Buffers {
 public:
  Buffers(std::size_t bytes, const Device& device) : device_(device) {
    send.assign(bytes, 0);
    recv.assign(bytes, 0);
#if HORA_EXAMPLE_CUDA
    if (device_.cuda) {
      check_cuda(cudaMalloc(reinterpret_cast<void**>(&dev_send_), bytes),
                 "cudaMalloc of " + std::to_string(bytes) + " bytes (send buffer)");
      const cudaError_t status = cudaMalloc(reinterpret_cast<void**>(&dev_recv_), bytes);
      if (status != cudaSuccess)
        cudaFree(dev_send_);  // no destructor runs for a failed constructor
      check_cuda(status, "cudaMalloc of " + std::to_string(bytes) + " bytes (receive buffer)");
    }
#endif
  }
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;
  ~Buffers() {
#if HORA_EXAMPLE_CUDA
    // A failure to free cannot be reported from a destructor and changes no result: ignored.
    if (dev_send_ != nullptr) cudaFree(dev_send_);
    if (dev_recv_ != nullptr) cudaFree(dev_recv_);
#endif
  }

  // What the collective reads and writes.
  unsigned char* send_ptr() { return device_.cuda ? dev_send_ : send.data(); }
  unsigned char* recv_ptr() { return device_.cuda ? dev_recv_ : recv.data(); }

  // Host -> device after fill_inputs, device -> host before count_wrong; no-ops on the CPU.
  void upload() { copy(true); }
  void download() { copy(false); }

  std::vector<unsigned char> send, recv;

 private:
  void copy([[maybe_unused]] bool to_device) {
#if HORA_EXAMPLE_CUDA
    if (!device_.cuda) return;
    auto stream = static_cast<cudaStream_t>(device_.stream);
    const auto kind = to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    const std::string what =
        to_device ? "cudaMemcpyAsync host to device" : "cudaMemcpyAsync device to host";
    for (auto [host, dev] :
         {std::pair{send.data(), dev_send_}, std::pair{recv.data(), dev_recv_}}) {
      check_cuda(cudaMemcpyAsync(to_device ? static_cast<void*>(dev) : host,
                                 to_device ? static_cast<const void*>(host) : dev, send.size(),
                                 kind, stream),
                 what + " of " + std::to_string(send.size()) + " bytes");
    }
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize after " + what);
#endif
  }

  Device device_;
  unsigned char* dev_send_ = nullptr;
  unsigned char* dev_recv_ = nullptr;
};

// Runs the collective once. in_place selects NCCL's in-place layout (see the top of the file).
// With a GPU the stream overloads of <hora/cuda.h> run it; they return once it has completed.
void run_once(Collective c, const Shape& s, DataType t, ReduceOp op, int root, bool in_place,
              Buffers& b, const Device& d) {
  const int n = hora::size();
  const int me = hora::rank();
  const std::size_t es = hora::size_of(t);
  unsigned char* send = b.send_ptr();
  unsigned char* recv = b.recv_ptr();
  switch (c) {
    case Collective::kAllreduce: {
      const void* src = in_place ? recv : send;
      if (d.cuda)
        hora::allreduce(src, recv, s.count, t, op, d.stream);
      else
        hora::allreduce(src, recv, s.count, t, op);
      break;
    }
    case Collective::kAllgather: {
      std::vector<std::size_t> counts(std::size_t(n), s.per_rank);
      const void* src = in_place ? recv + std::size_t(me) * s.per_rank * es : send;
      if (d.cuda)
        hora::allgather(src, s.per_rank, recv, counts, t, d.stream);
      else
        hora::allgather(src, s.per_rank, recv, counts, t);
      break;
    }
    case Collective::kBroadcast:
      if (d.cuda)
        hora::broadcast(recv, s.count, t, root, d.stream);
      else
        hora::broadcast(recv, s.count, t, root);
      break;
    case Collective::kAlltoall: {
      std::vector<std::size_t> splits(std::size_t(n), s.per_rank);
      const void* src = in_place ? recv : send;
      if (d.cuda)
        hora::alltoall(src, splits, recv, splits, t, d.stream);
      else
        hora::alltoall(src, splits, recv, splits, t);
      break;
    }
    case Collective::kReducescatter: {
      void* dst = in_place ? send + std::size_t(me) * s.per_rank * es : recv;
      if (d.cuda)
        hora::reducescatter(send, s.count, dst, t, op, d.stream);
      else
        hora::reducescatter(send, s.count, dst, t, op);
      break;
    }
  }
}

// Fills the inputs for one checked (or timed) call. For in-place calls the input goes where the
// collective reads it: recv for allreduce, alltoall and broadcast, this rank's block of recv for
// allgather, send for reducescatter.
void fill_inputs(Collective c, const Shape& s, DataType t, ReduceOp op, int root, bool in_place,
                 Buffers& b) {
  const int n = hora::size();
  const int me = hora::rank();
  switch (c) {
    case Collective::kAllreduce:
      for (std::size_t i = 0; i < s.count; ++i) {
        put(in_place ? b.recv.data() : b.send.data(), t, i, input_value(c, op, me, n, i));
        if (!in_place) put(b.recv.data(), t, i, 99.0);
      }
      break;
    case Collective::kAllgather:
      for (std::size_t i = 0; i < s.count; ++i) put(b.recv.data(), t, i, 99.0);
      for (std::size_t i = 0; i < s.per_rank; ++i) {
        const double v = input_value(c, op, me, n, i);
        if (in_place)
          put(b.recv.data(), t, std::size_t(me) * s.per_rank + i, v);
        else
          put(b.send.data(), t, i, v);
      }
      break;
    case Collective::kBroadcast:
      for (std::size_t i = 0; i < s.count; ++i) {
        put(b.recv.data(), t, i, me == root ? input_value(c, op, root, n, i) : 99.0);
      }
      break;
    case Collective::kAlltoall:
      // The block for peer p carries input_value(me, index of the element in the whole send).
      for (std::size_t i = 0; i < s.count; ++i) {
        const double v = input_value(c, op, me, n, i);
        if (in_place) {
          put(b.recv.data(), t, i, v);
        } else {
          put(b.send.data(), t, i, v);
          put(b.recv.data(), t, i, 99.0);
        }
      }
      break;
    case Collective::kReducescatter:
      for (std::size_t i = 0; i < s.count; ++i)
        put(b.send.data(), t, i, input_value(c, op, me, n, i));
      for (std::size_t i = 0; i < s.per_rank; ++i) put(b.recv.data(), t, i, 99.0);
      break;
  }
}

// Counts the elements of this rank's result that differ from what the inputs above must give.
std::int64_t count_wrong(Collective c, const Shape& s, DataType t, ReduceOp op, int root,
                         bool in_place, const Buffers& b) {
  const int n = hora::size();
  const int me = hora::rank();
  std::int64_t wrong = 0;
  switch (c) {
    case Collective::kAllreduce:
      for (std::size_t i = 0; i < s.count; ++i) {
        wrong += !matches(get(b.recv.data(), t, i), reduce_inputs(c, op, n, i, t), t, op);
      }
      break;
    case Collective::kAllgather:
      for (std::size_t i = 0; i < s.count; ++i) {
        const int from = int(i / s.per_rank);
        wrong += get(b.recv.data(), t, i) != input_value(c, op, from, n, i % s.per_rank);
      }
      break;
    case Collective::kBroadcast:
      for (std::size_t i = 0; i < s.count; ++i) {
        wrong += get(b.recv.data(), t, i) != input_value(c, op, root, n, i);
      }
      break;
    case Collective::kAlltoall:
      // Block p of what arrives is block `me` of what rank p sent.
      for (std::size_t i = 0; i < s.count; ++i) {
        const int from = int(i / s.per_rank);
        const std::size_t sent_index = std::size_t(me) * s.per_rank + i % s.per_rank;
        wrong += get(b.recv.data(), t, i) != input_value(c, op, from, n, sent_index);
      }
      break;
    case Collective::kReducescatter: {
      const std::size_t offset = std::size_t(me) * s.per_rank;
      const unsigned char* result =
          in_place ? b.send.data() + offset * hora::size_of(t) : b.recv.data();
      for (std::size_t i = 0; i < s.per_rank; ++i) {
        wrong += !matches(get(result, t, i), reduce_inputs(c, op, n, offset + i, t), t, op);
      }
      break;
    }
  }
  return wrong;
}

struct Result {
  bool available = false;
  double usec = 0.0;
  double algbw = 0.0;
  double busbw = 0.0;
  std::int64_t wrong = -1;  // -1: not checked
};

// Collective calls below are made by every rank in the same order; only rank 0 prints.
Result measure(const Options& o, Collective c, const Shape& s, DataType t, ReduceOp op,
               bool in_place, Buffers& b, const Device& d) {
  const int n = hora::size();
  Result r;
  // NCCL has no in-place alltoall (<hora/cuda.h>): that column stays "n/a" on GPUs.
  if (d.cuda && c == Collective::kAlltoall && in_place) return r;
  r.available = true;

  std::int64_t wrong = 0;
  if (o.check) {
    fill_inputs(c, s, t, op, o.root, in_place, b);
    b.upload();
    run_once(c, s, t, op, o.root, in_place, b, d);
    b.download();
    wrong = count_wrong(c, s, t, op, o.root, in_place, b);
  }

  int iters = o.iters;
  int warmup = o.warmup;
  const std::size_t bytes = s.count * hora::size_of(t);
  if (!o.full_iters && bytes > Options::kScaleAboveBytes) {
    const double scale = double(Options::kScaleAboveBytes) / double(bytes);
    iters = std::max(std::min(o.iters, Options::kMinScaledIters), int(o.iters * scale));
    warmup = std::min(o.warmup, std::max(1, int(o.warmup * scale)));
  }
  for (int i = 0; i < warmup; ++i) run_once(c, s, t, op, o.root, in_place, b, d);
  if (d.cuda)
    hora::barrier(d.stream);
  else
    hora::barrier();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) run_once(c, s, t, op, o.root, in_place, b, d);
  const double local_usec =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
      iters;

  // Times and wrong counts from every rank: [usec, wrong] gathered in rank order.
  std::vector<double> mine = {local_usec, double(wrong)};
  std::vector<double> all(2 * std::size_t(n));
  hora::allgather(mine.data(), 2, all.data(), std::vector<std::size_t>(std::size_t(n), 2),
                  DataType::kFloat64);
  double usec = all[0];
  double wrong_total = 0.0;
  for (int i = 0; i < n; ++i) {
    const double u = all[2 * std::size_t(i)];
    wrong_total += all[2 * std::size_t(i) + 1];
    switch (o.time_mode) {
      case TimeAcrossRanks::kRank0: break;
      case TimeAcrossRanks::kAverage:
        if (i > 0) usec += u;
        break;
      case TimeAcrossRanks::kMin: usec = std::min(usec, u); break;
      case TimeAcrossRanks::kMax: usec = std::max(usec, u); break;
    }
  }
  if (o.time_mode == TimeAcrossRanks::kAverage) usec /= n;
  r.usec = usec;
  r.algbw = double(bytes) / (usec * 1e-6) / 1e9;
  r.busbw = r.algbw * bus_factor(c, n);
  r.wrong = o.check ? std::int64_t(wrong_total) : -1;
  return r;
}

std::vector<std::size_t> sizes(const Options& o) {
  std::vector<std::size_t> out;
  for (std::size_t b = o.min_bytes; b <= o.max_bytes;) {
    out.push_back(b);
    std::size_t next =
        o.increment != 0 ? b + o.increment : std::size_t(std::ceil(double(b) * o.factor));
    if (next <= b) next = b + 1;
    b = next;
  }
  return out;
}

void print_result(const Result& r) {
  if (!r.available) {
    std::printf("  %7s %7s %7s %6s", "n/a", "n/a", "n/a", "n/a");
    return;
  }
  char wrong[32];
  if (r.wrong < 0)
    std::snprintf(wrong, sizeof wrong, "N/A");
  else
    std::snprintf(wrong, sizeof wrong, "%lld", static_cast<long long>(r.wrong));
  // nccl-tests' precision: fewer decimals as the time grows, so the column keeps its width.
  const char* time_format = r.usec >= 10000.0 ? "  %7.0f" : r.usec >= 100.0 ? "  %7.1f" : "  %7.2f";
  std::printf(time_format, r.usec);
  std::printf(" %7.2f %7.2f %6s", r.algbw, r.busbw, wrong);
}

struct Totals {
  std::int64_t wrong = 0;
  double busbw_sum = 0.0;
  int busbw_rows = 0;
};

void run_collective(const Options& o, const Device& d, Collective c, Totals& totals) {
  const int n = hora::size();
  const bool leader = hora::rank() == 0;
  if (leader) {
    std::printf("#\n# Collective: %s\n#\n", name_of(c));
    // Row layout: 48 characters of description, then two 32-character result groups.
    std::printf("#%47s%22s%10s%20s%12s\n", "", "out-of-place", "", "in-place", "");
    std::printf("# %10s %12s %8s %6s %6s  %7s %7s %7s %6s  %7s %7s %7s %6s\n", "size", "count",
                "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
                "busbw", "#wrong");
    std::printf("# %10s %12s %8s %6s %6s  %7s %7s %7s %6s  %7s %7s %7s %6s\n", "(B)", "(elements)",
                "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  }
  const std::vector<ReduceOp> no_op = {ReduceOp::kSum};
  for (DataType t : o.types) {
    for (ReduceOp op : reduces(c) ? o.ops : no_op) {
      std::size_t previous_count = 0;
      for (std::size_t bytes : sizes(o)) {
        const Shape s = shape_for(c, bytes, t, n);
        if (s.count == previous_count) continue;  // rounding made this row a repeat
        previous_count = s.count;
        const std::size_t es = hora::size_of(t);
        Buffers b(s.count * es, d);

        Result out_of_place;
        if (c != Collective::kBroadcast) out_of_place = measure(o, c, s, t, op, false, b, d);
        Result in_place = measure(o, c, s, t, op, true, b, d);

        for (const Result* r : {&out_of_place, &in_place}) {
          if (!r->available) continue;
          if (r->wrong > 0) totals.wrong += r->wrong;
          totals.busbw_sum += r->busbw;
          ++totals.busbw_rows;
        }
        if (leader) {
          std::printf("  %10zu %12zu %8s %6s %6d", s.count * es, s.count, hora::name_of(t),
                      reduces(c) ? hora::name_of(op) : "none",
                      c == Collective::kBroadcast ? o.root : -1);
          print_result(out_of_place);
          print_result(in_place);
          std::printf("\n");
        }
      }
    }
  }
}

constexpr int kExitSkipped = 77;

// --device cuda: why this rank cannot run on a GPU, or "" when it can.
std::string cuda_unavailable_reason() {
#if HORA_EXAMPLE_CUDA
  if (!hora::cuda_built()) {
    return "libhora was built without NCCL (configure hora with -Dnccl=enabled, with the CUDA "
           "toolkit and NCCL installed)";
  }
  if (!hora::gpu_available()) {
    return "CUDA reports no usable device (no GPU or no driver on this host, or "
           "CUDA_VISIBLE_DEVICES hides them)";
  }
  return "";
#else
  return "this allreduce_bench was built without CUDA support (hora's meson setup found no CUDA "
         "and NCCL; see 'NCCL (GPU collectives)' in its summary)";
#endif
}

#if HORA_EXAMPLE_CUDA
// The stream the benchmark's GPU collectives are enqueued on; destroyed with this object.
class CudaStream {
 public:
  CudaStream() {
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
               "cudaStreamCreateWithFlags");
  }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  // Nothing waits on the stream any more (every collective and copy was synchronized); a
  // failure here changes no result, so it is ignored.
  ~CudaStream() { cudaStreamDestroy(stream_); }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};
#endif

int run(const Options& o) {
  hora::init();
  const int n = hora::size();
  const bool leader = hora::rank() == 0;
  if (o.root >= n) {
    throw UsageError("-r " + std::to_string(o.root) + " is not a rank of this job (ranks 0.." +
                     std::to_string(n - 1) + ")");
  }

  Device device;
  std::string device_name = "cpu";
  if (o.device == "cuda") {
    // The ranks decide together, so that a rank without a GPU does not leave the others waiting
    // in a collective: either every rank runs on its GPU or every rank exits 77.
    const std::string reason = cuda_unavailable_reason();
    const std::vector<std::uint8_t> usable =
        hora::allgather(std::vector<std::uint8_t>{std::uint8_t(reason.empty() ? 1 : 0)});
    const long lacking = std::count(usable.begin(), usable.end(), std::uint8_t{0});
    if (lacking > 0) {
      if (lacking == n) {
        if (leader) {
          std::fprintf(stderr,
                       "allreduce_bench: --device cuda is not available on any of the %d "
                       "rank%s (rank 0 on %s: %s); use --device cpu\n",
                       n, n == 1 ? "" : "s", hora::hostname().c_str(), reason.c_str());
        }
      } else if (!reason.empty()) {
        std::fprintf(stderr,
                     "allreduce_bench: rank %d on %s: --device cuda is not available: %s; every "
                     "rank exits %d; use --device cpu or give every rank a GPU\n",
                     hora::rank(), hora::hostname().c_str(), reason.c_str(), kExitSkipped);
      }
      hora::shutdown();
      return kExitSkipped;
    }
  }
#if HORA_EXAMPLE_CUDA
  std::unique_ptr<CudaStream> stream;
  if (o.device == "cuda") {
    device.cuda = true;
    device.index = hora::cuda_device();
    check_cuda(cudaSetDevice(device.index),
               "cudaSetDevice(" + std::to_string(device.index) + ") (hora::cuda_device())");
    stream = std::make_unique<CudaStream>();
    device.stream = stream->get();
    cudaDeviceProp prop{};
    check_cuda(cudaGetDeviceProperties(&prop, device.index), "cudaGetDeviceProperties");
    device_name = "cuda:" + std::to_string(device.index) + " (" + prop.name + ")";
  }
#endif

  // Host lines of every rank, gathered to all (every rank must take part in the collective).
  {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    const std::string line = "#  Rank " + std::to_string(hora::rank()) + " Pid " +
                             std::to_string(getpid()) + " on " + host + " device " + device_name +
                             "\n";
    const std::vector<std::uint8_t> all =
        hora::allgather(std::vector<std::uint8_t>(line.begin(), line.end()));
    if (leader) {
      std::printf("# hora allreduce_bench: %d rank%s  minBytes %zu  maxBytes %zu  step: ", n,
                  n == 1 ? "" : "s", o.min_bytes, o.max_bytes);
      if (o.increment != 0)
        std::printf("%zu(bytes)", o.increment);
      else
        std::printf("%g(factor)", o.factor);
      std::printf("  warmup iters: %d  iters: %d%s  validation: %d\n", o.warmup, o.iters,
                  o.full_iters ? "" : " (scaled down above 1 MiB)", o.check ? 1 : 0);
      std::printf("#\n# Using devices\n");
      std::fwrite(all.data(), 1, all.size(), stdout);
    }
  }
  Totals totals;
  for (Collective c : o.collectives) run_collective(o, device, c, totals);
  if (leader) {
    std::printf("#\n# Out of bounds values : %lld %s\n", static_cast<long long>(totals.wrong),
                !o.check            ? "(not checked)"
                : totals.wrong == 0 ? "OK"
                                    : "FAILED");
    std::printf("# Avg bus bandwidth    : %g\n#\n",
                totals.busbw_rows > 0 ? totals.busbw_sum / totals.busbw_rows : 0.0);
  }
  hora::shutdown();
  return totals.wrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  Options options;
  try {
    if (!parse_options(argc, argv, options)) {
      std::fputs(kUsage, stdout);
      return 0;
    }
  } catch (const UsageError& e) {
    std::fprintf(stderr, "allreduce_bench: %s\n%s", e.what(), kUsage);
    return 2;
  }
  try {
    return run(options);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "allreduce_bench: %s\n", e.what());
    return 2;
  } catch (const hora::UsageError& e) {
    std::fprintf(stderr, "allreduce_bench: %s\n", e.what());
    return 2;
  } catch (const hora::Error& e) {
    // libhora's messages name the rank, the host and the failed step.
    std::fprintf(stderr, "allreduce_bench: %s\n", e.what());
    return 1;
  } catch (const CudaError& e) {
    std::fprintf(stderr, "allreduce_bench: %s\n", e.what());
    return 1;
  }
}
