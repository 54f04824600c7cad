// A stand-in for the Gloo that pip's torch carries inside libtorch_cpu: a library that exports
// one of Gloo's functions under Gloo's own name. test_foreign_gloo.py preloads it (LD_PRELOAD,
// so it sits in the process's global scope, ahead of everything dlopen'ed later) and checks that
// libhora still calls its own libgloo. If libhora ever binds to this one, the call says so and
// aborts the rank.
#include <cstdio>
#include <cstdlib>
#include <memory>

namespace gloo::transport {
class Device;
namespace tcp {
struct attr;

std::shared_ptr<::gloo::transport::Device> CreateDevice(const attr&) {
  std::fprintf(stderr, "foreign_gloo: libhora called a foreign Gloo's CreateDevice\n");
  std::abort();
}

}  // namespace tcp
}  // namespace gloo::transport

namespace {
// Proof that the preload took effect.
[[gnu::constructor]] void loaded() { std::fprintf(stderr, "foreign_gloo: loaded\n"); }
}  // namespace
