// Data-parallel training of a small multi-layer perceptron on Fashion-MNIST with libhora.
//
//   horarun -np 4 -H localhost:4 fashion_mnist          # defaults reach >= 84% in 3 epochs
//   fashion_mnist --epochs 1 --limit 2000               # a world of one, quick
//
// How the ranks cooperate (the usual Horovod recipe, written out without a framework):
//   1. Every rank reads the whole dataset (the files are small) and keeps the training images
//      i = rank, rank + size, rank + 2*size, ...  as its shard.
//   2. Rank 0 initialises the weights; hora::broadcast copies them to every other rank.
//   3. Each step, every rank runs forward and backward on `--batch-size` images of its own shard
//      and averages its gradients with every other rank's (kAverage), the way a framework
//      integration does it (<hora/async.h>): each parameter tensor's gradient is submitted by
//      name as soon as backpropagation has produced it -- "grad/W2" and "grad/b2" when the
//      output layer's backward is done, then "grad/W1" and "grad/b1" -- so layer 2's gradients
//      travel while layer 1's are still being computed. The step then synchronizes every handle
//      before the optimizer reads the gradients. libhora's engine fuses the small tensors that
//      are ready together into one allreduce, and because the names and shapes repeat every
//      step its response cache reduces the negotiation to one bit-vector exchange per cycle.
//      `--blocking` instead makes one blocking hora::allreduce over the whole flat gradient
//      vector per step (fusion done by hand), for comparison.
//      Every rank applies the same averaged gradient with the same SGD-momentum rule, so the
//      weights stay bit-identical everywhere without further communication. The checksum every
//      rank prints at the end shows it. (Across two async runs the last bits may differ: which
//      tensors share a fusion buffer depends on timing, and the ring sums an element in an
//      order that depends on its offset in the buffer.)
//   4. After each epoch the training loss and the test accuracy are reduced across ranks (each
//      rank evaluates a strided slice of the test set) and rank 0 prints them.
//
// All parameters live in one contiguous vector (and all gradients in another); each tensor is a
// slice of it (see Layout), which is what lets --blocking reduce them all in one call.
// `horarun --timeline-filename timeline.json ...` records what the engine did with the four
// names (negotiation, fusion, the allreduce) for chrome://tracing or Perfetto.
//
// Only the public API (<hora/hora.h>, <hora/async.h>) and zlib are used: this file is meant to
// be copied.

#include <hora/async.h>
#include <hora/hora.h>
#include <CLI/CLI.hpp>

#include <zlib.h>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

// ---------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------

struct Options {
  static constexpr int kDefaultEpochs = 3;
  // Per rank; the global batch is size() times this. 64 x 4 ranks = 256 halves the allreduces of
  // a step of 32 (the allreduce dominates a step on 2 shared cores); with the cosine decay, lr
  // 0.1 reaches 86-87% at global batches 64 to 256 (-np 1 to 4).
  static constexpr int kDefaultBatchSize = 64;
  static constexpr float kDefaultLr = 0.1f;
  static constexpr float kMomentum = 0.9f;
  static constexpr int kDefaultHidden = 128;
  static constexpr std::uint64_t kDefaultSeed = 42;
  static constexpr const char* kDefaultDataDir = "/usr/share/datasets/fashion-mnist";

  int epochs = kDefaultEpochs;
  int batch_size = kDefaultBatchSize;
  float lr = kDefaultLr;
  int hidden = kDefaultHidden;
  long limit = 0;  // 0: every training image
  std::uint64_t seed = kDefaultSeed;
  std::string data_dir = kDefaultDataDir;
  bool blocking = false;  // one blocking allreduce per step instead of per-tensor async ops
};

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// CLI11 parses "--flag value" and "--flag=value" and checks every range; `app` prints --help.
void add_options(CLI::App& app, Options& o) {
  app.description(
      "Trains a 784-H-10 perceptron on Fashion-MNIST, data-parallel over the ranks horarun\n"
      "started (or alone when run directly). Example: horarun -np 4 -H localhost:4 fashion_mnist");
  app.add_option("--epochs", o.epochs, "passes over the training set")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--batch-size", o.batch_size,
                 "images per rank per step; the global batch is this times the ranks")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  app.add_option("--lr", o.lr,
                 "peak SGD learning rate (momentum 0.9, cosine decay to 0 over the run), applied "
                 "to the gradient averaged over all ranks")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--hidden", o.hidden, "width of the hidden layer")
      ->check(CLI::Range(1, 1 << 14))
      ->capture_default_str();
  app.add_option("--data", o.data_dir,
                 "folder with {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] (from `apt-get "
                 "install dataset-fashion-mnist`)")
      ->check(CLI::ExistingDirectory)
      ->capture_default_str();
  app.add_option("--limit", o.limit, "train on the first N training images only (0: all)")
      ->check(CLI::Range(0L, 1L << 40))
      ->capture_default_str();
  app.add_option("--seed", o.seed, "seed of the initial weights and the shuffling")
      ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{1} << 62))
      ->capture_default_str();
  app.add_flag("--blocking", o.blocking,
               "average the gradients with one blocking allreduce over all of them per step, "
               "instead of one async allreduce per parameter tensor submitted as soon as "
               "backpropagation produces it (the default, as a framework would)");
}

// ---------------------------------------------------------------------------------------------
// Dataset: the idx files of Fashion-MNIST, gzip-compressed or not (zlib reads both).
// ---------------------------------------------------------------------------------------------

constexpr int kImageSide = 28;
constexpr int kInputs = kImageSide * kImageSide;
constexpr int kClasses = 10;
constexpr float kPi = 3.14159265358979f;

struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string data_hint() {
  return "install the dataset with `apt-get install dataset-fashion-mnist`, or pass --data DIR "
         "naming a folder with train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, "
         "t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz";
}

// Owns a zlib stream; reads exactly the bytes asked for or throws naming the file.
class GzFile {
 public:
  explicit GzFile(std::string path) : path_(std::move(path)) {
    file_ = gzopen(path_.c_str(), "rb");
    if (file_ == nullptr) {
      int err = errno;
      throw DataError(path_ + ": cannot open: " +
                      (err != 0 ? std::strerror(err) : "out of memory") + "; " + data_hint());
    }
    gzbuffer(file_, 1 << 17);
  }
  GzFile(const GzFile&) = delete;
  GzFile& operator=(const GzFile&) = delete;
  ~GzFile() { gzclose(file_); }

  // Reads up to n bytes; returns how many (fewer only at the end of the data).
  std::size_t read_some(void* out, std::size_t n) {
    auto* p = static_cast<unsigned char*>(out);
    std::size_t done = 0;
    while (done < n) {
      unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(n - done, 1u << 30));
      int got = gzread(file_, p + done, chunk);
      if (got < 0) {
        int code = 0;
        const char* message = gzerror(file_, &code);
        throw DataError(path_ + ": not a readable gzip or idx file (" + message + "); " +
                        data_hint());
      }
      if (got == 0) break;
      done += static_cast<std::size_t>(got);
    }
    return done;
  }

  void read_exactly(void* out, std::size_t n, const char* what) {
    std::size_t got = read_some(out, n);
    if (got != n) {
      throw DataError(path_ + ": truncated: expected " + std::to_string(n) + " bytes of " + what +
                      ", found " + std::to_string(got) + "; " + data_hint());
    }
  }

  void expect_end() {
    unsigned char extra = 0;
    if (read_some(&extra, 1) != 0) {
      throw DataError(path_ + ": malformed: data continues past the size its header declares; " +
                      data_hint());
    }
  }

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  gzFile file_ = nullptr;
};

std::uint32_t big_endian_u32(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

// dir/name.gz if it exists, else dir/name (an uncompressed copy); the .gz name for the error.
std::string find_file(const std::string& dir, const std::string& name) {
  std::string gz = dir + "/" + name + ".gz";
  if (std::FILE* f = std::fopen(gz.c_str(), "rb")) {
    std::fclose(f);
    return gz;
  }
  std::string plain = dir + "/" + name;
  if (std::FILE* f = std::fopen(plain.c_str(), "rb")) {
    std::fclose(f);
    return plain;
  }
  return gz;
}

// An idx file is a big-endian header (magic 0x000008dd: unsigned bytes, d dimensions; then one
// u32 per dimension) followed by the bytes, row-major.
constexpr std::uint32_t kImagesMagic = 0x00000803;
constexpr std::uint32_t kLabelsMagic = 0x00000801;
constexpr std::uint32_t kMaxItems = 10'000'000;  // guards the allocation against a bad header

struct Split {
  std::vector<std::uint8_t> pixels;  // count * kInputs
  std::vector<std::uint8_t> labels;  // count, each 0..9
  std::size_t count = 0;
};

std::vector<std::uint8_t> read_idx(const std::string& path, std::uint32_t magic,
                                   std::size_t& count) {
  GzFile file(path);
  unsigned char header[16];
  const bool images = magic == kImagesMagic;
  const std::size_t header_size = images ? 16 : 8;
  file.read_exactly(header, header_size, "the idx header");
  std::uint32_t got_magic = big_endian_u32(header);
  if (got_magic != magic) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "bad magic number 0x%08x, expected 0x%08x (an idx %s file)",
                  got_magic, magic, images ? "images" : "labels");
    throw DataError(path + ": malformed: " + buf + "; " + data_hint());
  }
  count = big_endian_u32(header + 4);
  if (count == 0 || count > kMaxItems) {
    throw DataError(path + ": malformed: header declares " + std::to_string(count) + " items; " +
                    data_hint());
  }
  std::size_t item_size = 1;
  if (images) {
    std::uint32_t rows = big_endian_u32(header + 8);
    std::uint32_t cols = big_endian_u32(header + 12);
    if (rows != kImageSide || cols != kImageSide) {
      throw DataError(path + ": images are " + std::to_string(rows) + "x" + std::to_string(cols) +
                      ", this program expects 28x28; " + data_hint());
    }
    item_size = kInputs;
  }
  std::vector<std::uint8_t> data(count * item_size);
  file.read_exactly(data.data(), data.size(), images ? "the pixels" : "the labels");
  file.expect_end();
  return data;
}

Split load_split(const std::string& dir, const std::string& prefix) {
  Split split;
  std::string images_path = find_file(dir, prefix + "-images-idx3-ubyte");
  std::string labels_path = find_file(dir, prefix + "-labels-idx1-ubyte");
  std::size_t image_count = 0;
  split.pixels = read_idx(images_path, kImagesMagic, image_count);
  split.labels = read_idx(labels_path, kLabelsMagic, split.count);
  if (split.count != image_count) {
    throw DataError(labels_path + " has " + std::to_string(split.count) + " labels but " +
                    images_path + " has " + std::to_string(image_count) + " images; " +
                    data_hint());
  }
  for (std::size_t i = 0; i < split.count; ++i) {
    if (split.labels[i] >= kClasses) {
      throw DataError(labels_path + ": malformed: label " + std::to_string(split.labels[i]) +
                      " at index " + std::to_string(i) + " (expected 0..9); " + data_hint());
    }
  }
  return split;
}

// ---------------------------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------------------------

// The GEMM is compiled for three x86-64 levels and picked at load time (GCC/Clang function
// multi-versioning), so one binary is fast on AVX-512 and AVX2 machines and still runs anywhere.
// Not under a sanitizer: the load-time resolver runs before the sanitizer's runtime is set up
// (under clang's ThreadSanitizer it crashed in __tsan_func_entry). Clang names its sanitizers
// with __has_feature only.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FM_SANITIZED 1
#endif
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) && !defined(FM_SANITIZED)
#define FM_MULTIVERSION \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FM_MULTIVERSION
#endif

// 8 floats; the compiler lowers the arithmetic to whatever the target has (SSE pairs, AVX).
// v8f_u is the unaligned, may-alias view used to load and store rows of float arrays (as
// immintrin.h's __m256_u). Values never cross a function boundary, so no ABI question arises.
typedef float v8f __attribute__((vector_size(32)));
typedef float v8f_u __attribute__((vector_size(32), aligned(4), may_alias));
#define FM_LOAD8(p) (*reinterpret_cast<const v8f_u*>(p))
#define FM_STORE8(p, v) (*reinterpret_cast<v8f_u*>(p) = (v))

constexpr int kMr = 4;    // rows of C per micro-tile
constexpr int kNr = 16;   // columns of C per micro-tile: two v8f
constexpr int kKc = 256;  // depth of a panel: kKc x kNr floats of B stay in L1

// C[MR x 16] (+)= A[MR x K] * B[K x 16], accumulators in registers.
template <int MR>
__attribute__((always_inline)) inline void micro_tile(int K, const float* A, int lda,
                                                      const float* B, int ldb, float* C, int ldc,
                                                      bool accumulate) {
  v8f acc[MR][2];
  for (int r = 0; r < MR; ++r) {
    if (accumulate) {
      acc[r][0] = FM_LOAD8(C + r * ldc);
      acc[r][1] = FM_LOAD8(C + r * ldc + 8);
    } else {
      acc[r][0] = v8f{};
      acc[r][1] = v8f{};
    }
  }
  for (int k = 0; k < K; ++k) {
    const v8f b0 = FM_LOAD8(B + k * ldb);
    const v8f b1 = FM_LOAD8(B + k * ldb + 8);
    for (int r = 0; r < MR; ++r) {
      const float a = A[r * lda + k];
      acc[r][0] += a * b0;
      acc[r][1] += a * b1;
    }
  }
  for (int r = 0; r < MR; ++r) {
    FM_STORE8(C + r * ldc, acc[r][0]);
    FM_STORE8(C + r * ldc + 8, acc[r][1]);
  }
}

// C[M x N] = A[M x K] * B[K x N] (or += with accumulate); row-major, leading dimensions given.
// Blocked over K so a panel of B is reused by every row of A while it is hot in cache.
FM_MULTIVERSION
void gemm(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
          bool accumulate) {
  const int n_main = N - N % kNr;
  for (int k0 = 0; k0 < K; k0 += kKc) {
    const int kc = std::min(kKc, K - k0);
    const bool acc = accumulate || k0 > 0;
    for (int j = 0; j < n_main; j += kNr) {
      int i = 0;
      for (; i + kMr <= M; i += kMr) {
        micro_tile<kMr>(kc, A + i * lda + k0, lda, B + k0 * ldb + j, ldb, C + i * ldc + j, ldc,
                        acc);
      }
      for (; i < M; ++i) {
        micro_tile<1>(kc, A + i * lda + k0, lda, B + k0 * ldb + j, ldb, C + i * ldc + j, ldc, acc);
      }
    }
    // Leftover columns (N % 16, e.g. the 10 outputs): plain loops, a small share of the work.
    if (n_main < N) {
      for (int i = 0; i < M; ++i) {
        float* c = C + i * ldc;
        if (!acc) {
          for (int j = n_main; j < N; ++j) c[j] = 0.0f;
        }
        for (int k = 0; k < kc; ++k) {
          const float a = A[i * lda + k0 + k];
          const float* b = B + (k0 + k) * ldb;
          for (int j = n_main; j < N; ++j) c[j] += a * b[j];
        }
      }
    }
  }
}

// out[cols x rows] = in[rows x cols]^T
void transpose(int rows, int cols, const float* in, float* out) {
  constexpr int kBlock = 16;
  for (int i0 = 0; i0 < rows; i0 += kBlock) {
    for (int j0 = 0; j0 < cols; j0 += kBlock) {
      const int i1 = std::min(rows, i0 + kBlock);
      const int j1 = std::min(cols, j0 + kBlock);
      for (int i = i0; i < i1; ++i) {
        for (int j = j0; j < j1; ++j) out[j * rows + i] = in[i * cols + j];
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The model: 784 -> hidden (ReLU) -> 10 (softmax), all parameters in one flat vector.
// ---------------------------------------------------------------------------------------------

// The tensors lie in the order backward produces their gradients (output layer first), as
// PyTorch DDP orders its gradient buckets: the async path submits them in that order, so the
// engine finds each fused batch end to end in memory and reduces it where it lies, without the
// copies through its fusion buffer (the blocking path's single allreduce has none either).
struct Layout {
  int hidden;
  // Offsets into the flat vector (W2 is [H][10], W1 [784][H]) and their sizes.
  std::size_t w2, b2, w1, b1, total;
  std::size_t w2_size, b2_size, w1_size, b1_size;

  explicit Layout(int h)
      : hidden(h),
        w2_size(std::size_t(h) * kClasses),
        b2_size(kClasses),
        w1_size(std::size_t{kInputs} * h),
        b1_size(std::size_t(h)) {
    w2 = 0;
    b2 = w2 + w2_size;
    w1 = b2 + b2_size;
    b1 = w1 + w1_size;
    total = b1 + b1_size;
  }
};

// Uniform in [-limit, limit) from the top 24 bits: the same numbers on every platform.
void fill_uniform(float* out, std::size_t n, float limit, std::mt19937_64& rng) {
  for (std::size_t i = 0; i < n; ++i) {
    float u = static_cast<float>(rng() >> 40) * (1.0f / 16777216.0f);
    out[i] = (2.0f * u - 1.0f) * limit;
  }
}

// He-uniform for the ReLU layer, Glorot-uniform for the output layer, zero biases.
void init_parameters(const Layout& layout, std::uint64_t seed, std::vector<float>& params) {
  std::mt19937_64 rng(seed);
  std::fill(params.begin(), params.end(), 0.0f);
  fill_uniform(params.data() + layout.w1, layout.w1_size, std::sqrt(6.0f / kInputs), rng);
  fill_uniform(params.data() + layout.w2, layout.w2_size,
               std::sqrt(6.0f / float(layout.hidden + kClasses)), rng);
}

// Scratch space for one batch, allocated once.
struct Workspace {
  std::vector<float> x, xt, hidden, logits, d_logits, w2t, d_hidden;
  Workspace(int batch, int h)
      : x(std::size_t(batch) * kInputs),
        xt(std::size_t(batch) * kInputs),
        hidden(std::size_t(batch) * h),
        logits(std::size_t(batch) * kClasses),
        d_logits(std::size_t(batch) * kClasses),
        w2t(std::size_t(h) * kClasses),
        d_hidden(std::size_t(batch) * h) {}
};

void gather_batch(const Split& split, const std::uint32_t* indices, int n, float* x) {
  constexpr float kScale = 1.0f / 255.0f;
  for (int b = 0; b < n; ++b) {
    const std::uint8_t* src = split.pixels.data() + std::size_t(indices[b]) * kInputs;
    float* dst = x + std::size_t(b) * kInputs;
    for (int k = 0; k < kInputs; ++k) dst[k] = static_cast<float>(src[k]) * kScale;
  }
}

// Forward pass for n images in ws.x: fills ws.hidden (after ReLU) and ws.logits.
void forward(const Layout& L, const float* params, int n, Workspace& ws) {
  const int H = L.hidden;
  gemm(n, H, kInputs, ws.x.data(), kInputs, params + L.w1, H, ws.hidden.data(), H, false);
  const float* b1 = params + L.b1;
  for (int b = 0; b < n; ++b) {
    float* h = ws.hidden.data() + std::size_t(b) * H;
    for (int j = 0; j < H; ++j) h[j] = std::max(0.0f, h[j] + b1[j]);
  }
  gemm(n, kClasses, H, ws.hidden.data(), H, params + L.w2, kClasses, ws.logits.data(), kClasses,
       false);
  const float* b2 = params + L.b2;
  for (int b = 0; b < n; ++b) {
    for (int c = 0; c < kClasses; ++c) ws.logits[std::size_t(b) * kClasses + c] += b2[c];
  }
}

// Softmax cross-entropy on ws.logits. Writes d(mean loss)/d(logits) to ws.d_logits when asked;
// returns the summed loss and adds the number of correct predictions to *correct.
double softmax_cross_entropy(int n, const std::uint8_t* labels, Workspace& ws, bool gradient,
                             long* correct) {
  double loss = 0.0;
  const float inv_n = 1.0f / static_cast<float>(n);
  for (int b = 0; b < n; ++b) {
    const float* z = ws.logits.data() + std::size_t(b) * kClasses;
    int best = 0;
    for (int c = 1; c < kClasses; ++c) {
      if (z[c] > z[best]) best = c;
    }
    if (best == labels[b]) ++*correct;
    const float zmax = z[best];
    std::array<float, kClasses> e;
    float sum = 0.0f;
    for (int c = 0; c < kClasses; ++c) {
      e[c] = std::exp(z[c] - zmax);
      sum += e[c];
    }
    loss += std::log(sum) - (z[labels[b]] - zmax);
    if (gradient) {
      float* d = ws.d_logits.data() + std::size_t(b) * kClasses;
      const float inv_sum = 1.0f / sum;
      for (int c = 0; c < kClasses; ++c) {
        d[c] = (e[c] * inv_sum - (c == labels[b] ? 1.0f : 0.0f)) * inv_n;
      }
    }
  }
  return loss;
}

// The backward pass after forward + softmax_cross_entropy(gradient=true), in two halves so
// each layer's gradients can be sent as soon as they exist. Between the halves the engine owns
// the W2 and b2 slices of grad: the second half reads params (W2 itself) and the workspace,
// and writes only the W1 and b1 slices.

// Output layer: dW2 = hidden^T * d_logits; db2 = column sums. ReLU zeros are skipped.
void backward_output_layer(const Layout& L, int n, const Workspace& ws, float* grad) {
  const int H = L.hidden;
  float* dw2 = grad + L.w2;
  float* db2 = grad + L.b2;
  std::fill(dw2, dw2 + std::size_t(H) * kClasses, 0.0f);
  std::fill(db2, db2 + kClasses, 0.0f);
  for (int b = 0; b < n; ++b) {
    const float* h = ws.hidden.data() + std::size_t(b) * H;
    const float* d = ws.d_logits.data() + std::size_t(b) * kClasses;
    for (int c = 0; c < kClasses; ++c) db2[c] += d[c];
    for (int j = 0; j < H; ++j) {
      if (h[j] == 0.0f) continue;
      float* row = dw2 + std::size_t(j) * kClasses;
      for (int c = 0; c < kClasses; ++c) row[c] += h[j] * d[c];
    }
  }
}

// Hidden layer: d_hidden = (d_logits * W2^T) masked by ReLU'; db1 = column sums;
// dW1 = x^T * d_hidden.
void backward_hidden_layer(const Layout& L, const float* params, int n, Workspace& ws,
                           float* grad) {
  const int H = L.hidden;
  transpose(H, kClasses, params + L.w2, ws.w2t.data());
  gemm(n, H, kClasses, ws.d_logits.data(), kClasses, ws.w2t.data(), H, ws.d_hidden.data(), H,
       false);
  float* db1 = grad + L.b1;
  std::fill(db1, db1 + H, 0.0f);
  for (int b = 0; b < n; ++b) {
    const float* h = ws.hidden.data() + std::size_t(b) * H;
    float* dh = ws.d_hidden.data() + std::size_t(b) * H;
    for (int j = 0; j < H; ++j) {
      dh[j] = h[j] > 0.0f ? dh[j] : 0.0f;
      db1[j] += dh[j];
    }
  }
  // [784 x n] * [n x H].
  transpose(n, kInputs, ws.x.data(), ws.xt.data());
  gemm(kInputs, H, n, ws.xt.data(), n, ws.d_hidden.data(), H, grad + L.w1, H, false);
}

// One parameter tensor's gradient: a named slice of the flat gradient vector.
struct GradientTensor {
  const char* name;  // the async op's name: the same on every rank and every step
  std::size_t offset, count;
};

// Submits the gradients of `tensors` for averaging over all ranks, in place. The slices belong
// to libhora's engine until their handles are synchronized.
void submit_gradients(std::initializer_list<GradientTensor> tensors, std::vector<float>& grad,
                      std::vector<hora::Handle>& handles) {
  for (const GradientTensor& t : tensors) {
    float* slice = grad.data() + t.offset;
    handles.push_back(hora::allreduce_async(t.name, slice, slice, t.count, hora::DataType::kFloat32,
                                            hora::ReduceOp::kAverage));
  }
}

// FNV-1a, 64-bit, over the bytes of the parameters: equal on every rank iff the weights are.
std::uint64_t fnv1a64(const void* data, std::size_t bytes) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) {
    hash ^= p[i];
    hash *= 0x100000001b3ull;
  }
  return hash;
}

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Momentum keeps shrinking the velocity of weights whose gradient is zero (dead ReLU units,
// always-black pixels) into the subnormal range, where every multiply costs ~100 cycles; the
// epoch time then grows by half each epoch. Flushing subnormals to zero, as the deep-learning
// frameworks do, costs no accuracy. MXCSR is per thread: this program computes on one.
void flush_subnormals_to_zero() {
#if defined(__SSE__)
  _mm_setcsr(_mm_getcsr() | 0x8040);  // FTZ (bit 15) | DAZ (bit 6)
#endif
}

int run(const Options& options) {
  const auto job_start = Clock::now();
  flush_subnormals_to_zero();
  hora::init();
  const int rank = hora::rank();
  const int size = hora::size();

  Split train = load_split(options.data_dir, "train");
  Split test = load_split(options.data_dir, "t10k");
  const std::size_t train_count =
      options.limit > 0 ? std::min<std::size_t>(train.count, std::size_t(options.limit))
                        : train.count;
  if (train_count < std::size_t(size)) {
    throw UsageError("--limit " + std::to_string(options.limit) +
                     " leaves fewer training images (" + std::to_string(train_count) +
                     ") than ranks (" + std::to_string(size) + ")");
  }

  // Rank-strided shard. Every rank runs the same number of steps (a collective per step), set by
  // the smallest shard; each rank's leftover images change every epoch with the shuffle.
  std::vector<std::uint32_t> shard;
  for (std::size_t i = std::size_t(rank); i < train_count; i += std::size_t(size)) {
    shard.push_back(static_cast<std::uint32_t>(i));
  }
  const std::size_t smallest_shard = train_count / std::size_t(size);
  const int batch = static_cast<int>(std::min<std::size_t>(options.batch_size, smallest_shard));
  const std::size_t steps = smallest_shard / std::size_t(batch);

  const Layout layout(options.hidden);
  std::vector<float> params(layout.total, 0.0f);
  std::vector<float> grad(layout.total, 0.0f);
  std::vector<float> velocity(layout.total, 0.0f);
  if (rank == 0) init_parameters(layout, options.seed, params);
  hora::broadcast(params, 0);

  if (rank == 0) {
    std::printf(
        "fashion_mnist: %d rank%s, MLP %d-%d-%d (%zu parameters), %zu training images (%zu per "
        "rank), %zu test images\n"
        "fashion_mnist: batch %d per rank (%d global), %zu steps per epoch, lr %g (cosine), "
        "momentum %g, "
        "seed %llu\n"
        "fashion_mnist: gradients averaged by %s\n",
        size, size == 1 ? "" : "s", kInputs, options.hidden, kClasses, layout.total, train_count,
        smallest_shard, test.count, batch, batch * size, steps, double(options.lr),
        double(Options::kMomentum), static_cast<unsigned long long>(options.seed),
        options.blocking ? "one blocking allreduce per step (--blocking)"
                         : "async allreduces per tensor (grad/W2, grad/b2, then grad/W1, grad/b1)");
  }

  Workspace ws(std::max(batch, 256), options.hidden);
  std::mt19937_64 shuffle_rng(options.seed * 0x9e3779b97f4a7c15ull + std::uint64_t(rank) + 1);
  const float momentum = Options::kMomentum;
  const GradientTensor w1{"grad/W1", layout.w1, layout.w1_size};
  const GradientTensor b1{"grad/b1", layout.b1, layout.b1_size};
  const GradientTensor w2{"grad/W2", layout.w2, layout.w2_size};
  const GradientTensor b2{"grad/b2", layout.b2, layout.b2_size};
  std::vector<hora::Handle> handles;
  double final_accuracy = 0.0;

  for (int epoch = 1; epoch <= options.epochs; ++epoch) {
    const auto epoch_start = Clock::now();
    // Time the step spends blocked on gradient communication: in the blocking allreduce, or in
    // synchronize() after the async ops (whatever ran while layer 1 was computed is hidden).
    double comm_wait_seconds = 0.0;
    std::shuffle(shard.begin(), shard.end(), shuffle_rng);
    double loss_sum = 0.0;
    long train_correct = 0;
    std::vector<std::uint8_t> labels(static_cast<std::size_t>(batch));
    for (std::size_t step = 0; step < steps; ++step) {
      const std::uint32_t* idx = shard.data() + step * std::size_t(batch);
      gather_batch(train, idx, batch, ws.x.data());
      for (int b = 0; b < batch; ++b) labels[std::size_t(b)] = train.labels[idx[b]];
      forward(layout, params.data(), batch, ws);
      loss_sum += softmax_cross_entropy(batch, labels.data(), ws, true, &train_correct);
      if (options.blocking) {
        backward_output_layer(layout, batch, ws, grad.data());
        backward_hidden_layer(layout, params.data(), batch, ws, grad.data());
        const auto wait_start = Clock::now();
        hora::allreduce(grad, hora::ReduceOp::kAverage);
        comm_wait_seconds += seconds_since(wait_start);
      } else {
        handles.clear();
        backward_output_layer(layout, batch, ws, grad.data());
        submit_gradients({w2, b2}, grad, handles);
        backward_hidden_layer(layout, params.data(), batch, ws, grad.data());
        submit_gradients({w1, b1}, grad, handles);
        // The optimizer reads every gradient: wait for all of them (rethrows an op's error).
        const auto wait_start = Clock::now();
        for (const hora::Handle& h : handles) hora::synchronize(h);
        comm_wait_seconds += seconds_since(wait_start);
      }

      // SGD with momentum, the learning rate cosine-decayed from --lr to 0 over the run (the
      // decay settles the noisy last epoch: ~+1% test accuracy). Identical inputs on every rank
      // give identical weights.
      const float progress =
          float(std::size_t(epoch - 1) * steps + step) / float(std::size_t(options.epochs) * steps);
      const float lr = options.lr * 0.5f * (1.0f + std::cos(kPi * progress));
      for (std::size_t i = 0; i < layout.total; ++i) {
        velocity[i] = momentum * velocity[i] + grad[i];
        params[i] -= lr * velocity[i];
      }
    }
    const double train_seconds = seconds_since(epoch_start);

    // Test accuracy: each rank evaluates test images rank, rank + size, ...; counts are summed.
    long test_correct = 0;
    double test_loss = 0.0;
    {
      constexpr int kEvalBatch = 256;
      std::vector<std::uint32_t> idx;
      std::vector<std::uint8_t> eval_labels;
      for (std::size_t i = std::size_t(rank); i < test.count; i += std::size_t(size)) {
        idx.push_back(static_cast<std::uint32_t>(i));
      }
      for (std::size_t start = 0; start < idx.size(); start += kEvalBatch) {
        const int n = static_cast<int>(std::min<std::size_t>(kEvalBatch, idx.size() - start));
        gather_batch(test, idx.data() + start, n, ws.x.data());
        eval_labels.resize(std::size_t(n));
        for (int b = 0; b < n; ++b) eval_labels[std::size_t(b)] = test.labels[idx[start + b]];
        forward(layout, params.data(), n, ws);
        test_loss += softmax_cross_entropy(n, eval_labels.data(), ws, false, &test_correct);
      }
    }
    // One reduction for all the epoch's statistics: sums over ranks.
    std::vector<double> stats = {loss_sum, double(steps) * batch, double(train_correct), test_loss,
                                 double(test_correct)};
    hora::allreduce(stats, hora::ReduceOp::kSum);
    final_accuracy = stats[4] / double(test.count);
    if (rank == 0) {
      std::printf(
          "epoch %d/%d  train loss %.4f  train acc %.2f%%  test loss %.4f  test acc %.2f%%  "
          "time %.3f s (%s %.3f s)  eval %.2f s\n",
          epoch, options.epochs, stats[0] / stats[1], 100.0 * stats[2] / stats[1],
          stats[3] / double(test.count), 100.0 * final_accuracy, train_seconds,
          options.blocking ? "allreduce" : "sync wait", comm_wait_seconds,
          seconds_since(epoch_start) - train_seconds);
    }
  }

  if (rank == 0) {
    std::printf("fashion_mnist: final test accuracy %.2f%% after %d epoch%s, %.2f s in total\n",
                100.0 * final_accuracy, options.epochs, options.epochs == 1 ? "" : "s",
                seconds_since(job_start));
  }
  std::printf("rank %d: final weights fnv1a64 %016llx\n", rank,
              static_cast<unsigned long long>(
                  fnv1a64(params.data(), params.size() * sizeof(float))));
  hora::shutdown();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Line-buffered so horarun forwards each line as it is printed, not at exit.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  Options options;
  CLI::App app("", "fashion_mnist");
  add_options(app, options);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "fashion_mnist: %s (see --help)\n", e.what());
    return 2;
  }
  try {
    return run(options);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "fashion_mnist: %s\n", e.what());
    return 2;
  } catch (const DataError& e) {
    std::fprintf(stderr, "fashion_mnist: rank %d: %s\n", hora::is_initialized() ? hora::rank() : 0,
                 e.what());
    return 1;
  } catch (const hora::UsageError& e) {
    std::fprintf(stderr, "fashion_mnist: %s\n", e.what());
    return 2;
  } catch (const hora::Error& e) {
    // libhora's messages already name the rank, the host and the failed step.
    std::fprintf(stderr, "fashion_mnist: %s\n", e.what());
    return 1;
  }
}
