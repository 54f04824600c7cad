// fusion_bench: what tensor fusion buys on a ResNet-like gradient list.
//
// Each step allreduces 200 float32 gradients of 4 KiB to 4 MiB (half of them small, like batch
// norm parameters; half spread geometrically, like convolution weights; ~75 MiB in all) and
// reports the step time (slowest rank, median over the steps) for:
//   async    all 200 submitted with hora::allreduce_async, then synchronized (the engine fuses
//            up to HORA_FUSION_THRESHOLD bytes per batch; 0 disables fusion)
//   blocking the same tensors through hora::allreduce one by one
//
// The fusion threshold is read by hora::init(), so one job measures one threshold. Two ways to
// run it:
//   horarun -np 4 -H localhost:4 fusion_bench [--modes async,blocking]   # one job, its rows
//   fusion_bench --launch --np 4 [--horarun PATH]   # runs the jobs for fused (default
//       threshold), unfused (HORA_FUSION_THRESHOLD=0) and blocking, and prints one table
// Options: --steps N (5), --warmup N (1), --tensors N (200), --min-kib K (4), --max-kib K (4096).
//
// Public API only (<hora/hora.h>, <hora/async.h>): it doubles as an example of the async API.
#include <hora/async.h>
#include <hora/hora.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Options {
  int steps = 5;
  int warmup = 1;
  int tensors = 200;
  double min_kib = 4;
  double max_kib = 4096;
  std::vector<std::string> modes{"async", "blocking"};
  bool launch = false;
  int np = 4;
  std::string horarun;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "fusion_bench: %s\n"
               "usage: fusion_bench [--steps N] [--warmup N] [--tensors N] [--min-kib K] "
               "[--max-kib K] [--modes async,blocking]\n"
               "       fusion_bench --launch [--np N] [--horarun PATH] [same options]\n",
               why.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    auto number = [&](const std::string& v) {
      char* end = nullptr;
      double d = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || d <= 0)
        usage(a + " needs a positive number, got '" + v + "'");
      return d;
    };
    if (a == "--steps")
      o.steps = static_cast<int>(number(next()));
    else if (a == "--warmup") {
      std::string v = next();
      o.warmup = v == "0" ? 0 : static_cast<int>(number(v));
    } else if (a == "--tensors")
      o.tensors = static_cast<int>(number(next()));
    else if (a == "--min-kib")
      o.min_kib = number(next());
    else if (a == "--max-kib")
      o.max_kib = number(next());
    else if (a == "--np")
      o.np = static_cast<int>(number(next()));
    else if (a == "--horarun")
      o.horarun = next();
    else if (a == "--launch")
      o.launch = true;
    else if (a == "--modes") {
      o.modes.clear();
      std::stringstream ss(next());
      for (std::string m; std::getline(ss, m, ',');) {
        if (m != "async" && m != "blocking") usage("unknown mode '" + m + "' (async, blocking)");
        o.modes.push_back(m);
      }
    } else {
      usage("unknown option '" + a + "'");
    }
  }
  if (o.min_kib > o.max_kib) usage("--min-kib is larger than --max-kib");
  return o;
}

// Element counts (float32) of the gradient list: odd indices small (min..4 x min, like batch
// norm), even indices geometric from 4 x min to max (like convolution and dense weights).
std::vector<std::size_t> gradient_sizes(const Options& o) {
  std::vector<std::size_t> counts;
  const int big = (o.tensors + 1) / 2;
  const double lo = std::min(4 * o.min_kib, o.max_kib);
  for (int i = 0; i < o.tensors; ++i) {
    double kib;
    if (i % 2 == 1) {
      kib = std::min(o.min_kib * (1 << (i % 3)), o.max_kib);
    } else {
      double t = big > 1 ? static_cast<double>(i / 2) / (big - 1) : 1.0;
      kib = lo * std::pow(o.max_kib / lo, t);
    }
    counts.push_back(std::max<std::size_t>(1, static_cast<std::size_t>(kib * 1024 / 4)));
  }
  return counts;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Runs the steps of one mode; returns per-step times (slowest rank) in seconds.
std::vector<double> run_mode(const std::string& mode, const Options& o,
                             std::vector<std::vector<float>>& grads, std::size_t& wrong) {
  std::vector<double> times;
  const int n = hora::size();
  for (int step = -o.warmup; step < o.steps; ++step) {
    for (std::size_t i = 0; i < grads.size(); ++i) {
      std::fill(grads[i].begin(), grads[i].end(), static_cast<float>(hora::rank() + 1));
    }
    hora::barrier();
    const auto start = std::chrono::steady_clock::now();
    // Backpropagation produces the last layer's gradient first.
    if (mode == "async") {
      std::vector<hora::Handle> handles;
      handles.reserve(grads.size());
      for (std::size_t k = grads.size(); k-- > 0;) {
        handles.push_back(
            hora::allreduce_async("grad/" + std::to_string(k), grads[k], hora::ReduceOp::kSum));
      }
      for (const hora::Handle& h : handles) hora::synchronize(h);
    } else {
      for (std::size_t k = grads.size(); k-- > 0;) hora::allreduce(grads[k], hora::ReduceOp::kSum);
    }
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    hora::allreduce(&seconds, &seconds, 1, hora::DataType::kFloat64, hora::ReduceOp::kMax);
    if (step >= 0) times.push_back(seconds);
    const float expect = static_cast<float>(n * (n + 1) / 2);
    for (const auto& g : grads) {
      if (g.front() != expect || g.back() != expect) ++wrong;
    }
  }
  return times;
}

int worker(const Options& o) {
  hora::init();
  const std::vector<std::size_t> counts = gradient_sizes(o);
  std::vector<std::vector<float>> grads;
  std::size_t bytes = 0;
  for (std::size_t c : counts) {
    grads.emplace_back(c);
    bytes += c * sizeof(float);
  }
  const char* threshold = std::getenv("HORA_FUSION_THRESHOLD");
  const std::string fusion = threshold == nullptr || *threshold == '\0' ? std::string("default")
                             : std::string(threshold) == "0"            ? "off"
                                                             : std::string(threshold) + " B";
  int failures = 0;
  for (const std::string& mode : o.modes) {
    std::size_t wrong = 0;
    std::vector<double> t = run_mode(mode, o, grads, wrong);
    if (wrong > 0) ++failures;
    if (hora::rank() == 0) {
      const double med = median(t);
      std::printf(
          "FUSION_BENCH_ROW %-8s fusion=%-8s np=%d tensors=%zu MiB=%.1f step_ms=%.2f "
          "min_ms=%.2f max_ms=%.2f algbw_GBps=%.3f wrong=%zu\n",
          mode.c_str(), mode == "blocking" ? "n/a" : fusion.c_str(), hora::size(), counts.size(),
          static_cast<double>(bytes) / (1 << 20), med * 1e3,
          *std::min_element(t.begin(), t.end()) * 1e3, *std::max_element(t.begin(), t.end()) * 1e3,
          bytes / med / 1e9, wrong);
      std::fflush(stdout);
    }
  }
  hora::shutdown();
  return failures == 0 ? 0 : 1;
}

std::string find_horarun(const Options& o, const char* argv0) {
  if (!o.horarun.empty()) return o.horarun;
  // Next to the build tree's layout (build/bench/fusion_bench -> build/cli/horarun).
  std::error_code ec;
  std::filesystem::path self = std::filesystem::canonical("/proc/self/exe", ec);
  if (!ec) {
    for (std::filesystem::path p = self.parent_path(); !p.empty() && p != p.root_path();
         p = p.parent_path()) {
      if (std::filesystem::exists(p / "cli" / "horarun")) return (p / "cli" / "horarun").string();
    }
  }
  (void)argv0;
  return "horarun";  // from PATH
}

int launch(const Options& o, const char* argv0) {
  const std::string horarun = find_horarun(o, argv0);
  std::error_code ec;
  const std::string self = std::filesystem::canonical("/proc/self/exe", ec).string();
  const std::string common = " --steps " + std::to_string(o.steps) + " --warmup " +
                             std::to_string(o.warmup) + " --tensors " + std::to_string(o.tensors) +
                             " --min-kib " + std::to_string(o.min_kib) + " --max-kib " +
                             std::to_string(o.max_kib);
  struct Job {
    const char* label;
    const char* env;
    const char* modes;
  };
  const Job jobs[] = {{"async, fused (default threshold)", "", "async,blocking"},
                      {"async, HORA_FUSION_THRESHOLD=0", "HORA_FUSION_THRESHOLD=0 ", "async"}};
  std::map<std::string, double> step_ms;
  std::map<std::string, std::string> rows;
  for (const Job& job : jobs) {
    const std::string cmd = std::string("env ") + job.env + "'" + horarun + "' -np " +
                            std::to_string(o.np) + " -H localhost:" + std::to_string(o.np) + " '" +
                            self + "' --modes " + job.modes + common + " 2>&1";
    std::FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) {
      std::fprintf(stderr, "fusion_bench: cannot run %s: %s\n", cmd.c_str(), std::strerror(errno));
      return 1;
    }
    char line[4096];
    std::string output;
    while (std::fgets(line, sizeof line, p) != nullptr) {
      output += line;
      const char* row = std::strstr(line, "FUSION_BENCH_ROW ");
      if (row == nullptr) continue;
      std::string r = row + std::strlen("FUSION_BENCH_ROW ");
      std::string mode = r.substr(0, r.find(' '));
      std::string key = mode == "blocking" ? "blocking, one by one" : job.label;
      double ms = std::strtod(std::strstr(row, "step_ms=") + 8, nullptr);
      step_ms[key] = ms;
      rows[key] = r;
    }
    int status = ::pclose(p);
    if (status != 0) {
      std::fprintf(stderr, "fusion_bench: the job failed (%s):\n%s", cmd.c_str(), output.c_str());
      return 1;
    }
  }
  const auto& sizes = gradient_sizes(o);
  std::size_t bytes = 0;
  for (std::size_t c : sizes) bytes += c * 4;
  std::printf(
      "# fusion_bench: %zu float32 gradients, %.1f MiB per step, -np %d, median of %d steps\n",
      sizes.size(), static_cast<double>(bytes) / (1 << 20), o.np, o.steps);
  std::printf("%-36s %12s %12s %10s\n", "variant", "step (ms)", "algbw GB/s", "speedup");
  const double base = step_ms.count("blocking, one by one") ? step_ms["blocking, one by one"] : 0;
  for (const char* key : {"async, fused (default threshold)", "async, HORA_FUSION_THRESHOLD=0",
                          "blocking, one by one"}) {
    if (!step_ms.count(key)) continue;
    const double ms = step_ms[key];
    std::printf("%-36s %12.2f %12.3f %9.2fx\n", key, ms, bytes / (ms / 1e3) / 1e9,
                base > 0 ? base / ms : 0.0);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  try {
    return o.launch ? launch(o, argv[0]) : worker(o);
  } catch (const hora::Error& e) {
    std::fprintf(stderr, "fusion_bench: %s\n", e.what());
    return 1;
  }
}
