// A rank process for public_api_test: joins the job from its environment with hora::init()
// (public API only), checks an allreduce, prints one line, and leaves.
//   rank_child            return from main without hora::shutdown() (the atexit path)
//   rank_child shutdown   call hora::shutdown() first
#include <cstdio>
#include <cstring>
#include <vector>

#include <hora/async.h>
#include <hora/hora.h>

int main(int argc, char** argv) {
  try {
    hora::init();
    hora::init();  // harmless
    std::vector<double> v{static_cast<double>(hora::rank() + 1)};
    hora::allreduce(v, hora::ReduceOp::kSum);
    std::vector<std::int32_t> mine(static_cast<std::size_t>(hora::rank() + 1), hora::rank());
    const auto gathered = hora::allgather(mine);
    // The async engine (its own Gloo context, its own thread): submitted in a different order on
    // every rank, completed in one agreed order.
    std::vector<float> a(100, 1.0f), b(50, 2.0f);
    std::vector<hora::Handle> handles;
    if (hora::rank() % 2 == 0) {
      handles.push_back(hora::allreduce_async("a", a, hora::ReduceOp::kSum));
      handles.push_back(hora::allreduce_async("b", b, hora::ReduceOp::kSum));
    } else {
      handles.push_back(hora::allreduce_async("b", b, hora::ReduceOp::kSum));
      handles.push_back(hora::allreduce_async("a", a, hora::ReduceOp::kSum));
    }
    for (auto& h : handles) hora::synchronize(h);
    const double async_sum = a[99] + b[49];
    std::printf("rank %d of %d local %d/%d cross %d/%d host %s sum %g gathered %zu async %g\n",
                hora::rank(), hora::size(), hora::local_rank(), hora::local_size(),
                hora::cross_rank(), hora::cross_size(), hora::hostname().c_str(), v[0],
                gathered.size(), async_sum);
    if (argc > 1 && std::strcmp(argv[1], "shutdown") == 0) hora::shutdown();
    return 0;
  } catch (const hora::Error& e) {
    std::fprintf(stderr, "rank_child: %s\n", e.what());
    return 1;
  }
}
