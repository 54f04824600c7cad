#include "runtime/src/reduce.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace hora::detail {
namespace {

// Arithmetic on storage type S through compute type C. Integers compute in the unsigned type of
// the same width so overflow wraps instead of being undefined.
template <typename T>
struct Traits {
  using Compute = T;
  static Compute load(T v) { return v; }
  static T store(Compute v) { return v; }
};
template <>
struct Traits<float16> {
  using Compute = float;
  static float load(float16 v) { return to_float(v); }
  static float16 store(float v) { return to_float16(v); }
};
template <>
struct Traits<bfloat16> {
  using Compute = float;
  static float load(bfloat16 v) { return to_float(v); }
  static bfloat16 store(float v) { return to_bfloat16(v); }
};

template <typename C>
C add(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

template <typename C>
C mul(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    // Promote to at least unsigned int before multiplying: uint16 * uint16 would promote to
    // signed int and could overflow.
    using U = std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned, std::make_unsigned_t<C>>;
    return static_cast<C>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}

template <typename C>
C min_of(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
  }
  return b < a ? b : a;
}

template <typename C>
C max_of(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
  }
  return a < b ? b : a;
}

template <typename T, typename Op>
void reduce_loop(void* out, const void* a, const void* b, std::size_t count, Op op) {
  using Tr = Traits<T>;
  // memcpy per element: buffers come from users and may be unaligned; compilers turn this
  // into plain loads for aligned data.
  auto* o = static_cast<unsigned char*>(out);
  const auto* x = static_cast<const unsigned char*>(a);
  const auto* y = static_cast<const unsigned char*>(b);
  for (std::size_t i = 0; i < count; ++i) {
    T va;
    T vb;
    std::memcpy(&va, x + i * sizeof(T), sizeof(T));
    std::memcpy(&vb, y + i * sizeof(T), sizeof(T));
    const T r = Tr::store(op(Tr::load(va), Tr::load(vb)));
    std::memcpy(o + i * sizeof(T), &r, sizeof(T));
  }
}

template <typename T>
ReduceFn for_op(ReduceOp op) {
  using C = typename Traits<T>::Compute;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      return [](void* o, const void* a, const void* b, std::size_t n) {
        reduce_loop<T>(o, a, b, n, add<C>);
      };
    case ReduceOp::kProduct:
      return [](void* o, const void* a, const void* b, std::size_t n) {
        reduce_loop<T>(o, a, b, n, mul<C>);
      };
    case ReduceOp::kMin:
      return [](void* o, const void* a, const void* b, std::size_t n) {
        reduce_loop<T>(o, a, b, n, min_of<C>);
      };
    case ReduceOp::kMax:
      return [](void* o, const void* a, const void* b, std::size_t n) {
        reduce_loop<T>(o, a, b, n, max_of<C>);
      };
  }
  return nullptr;
}

template <typename T>
void divide_loop(void* data, std::size_t count, int n) {
  using Tr = Traits<T>;
  using C = typename Tr::Compute;
  auto* p = static_cast<unsigned char*>(data);
  for (std::size_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    C c = Tr::load(v);
    if constexpr (std::is_integral_v<C>) {
      c = static_cast<C>(static_cast<std::int64_t>(c) / n);  // C++ division truncates toward zero
    } else {
      c = c / static_cast<C>(n);
    }
    const T r = Tr::store(c);
    std::memcpy(p + i * sizeof(T), &r, sizeof(T));
  }
}

}  // namespace

ReduceFn reduce_function(DataType type, ReduceOp op) {
  switch (type) {
    case DataType::kUInt8: return for_op<std::uint8_t>(op);
    case DataType::kInt8: return for_op<std::int8_t>(op);
    case DataType::kInt32: return for_op<std::int32_t>(op);
    case DataType::kInt64: return for_op<std::int64_t>(op);
    case DataType::kFloat16: return for_op<float16>(op);
    case DataType::kBFloat16: return for_op<bfloat16>(op);
    case DataType::kFloat32: return for_op<float>(op);
    case DataType::kFloat64: return for_op<double>(op);
  }
  return nullptr;
}

void divide(void* data, std::size_t count, DataType type, int n) {
  switch (type) {
    case DataType::kUInt8: return divide_loop<std::uint8_t>(data, count, n);
    case DataType::kInt8: return divide_loop<std::int8_t>(data, count, n);
    case DataType::kInt32: return divide_loop<std::int32_t>(data, count, n);
    case DataType::kInt64: return divide_loop<std::int64_t>(data, count, n);
    case DataType::kFloat16: return divide_loop<float16>(data, count, n);
    case DataType::kBFloat16: return divide_loop<bfloat16>(data, count, n);
    case DataType::kFloat32: return divide_loop<float>(data, count, n);
    case DataType::kFloat64: return divide_loop<double>(data, count, n);
  }
}

}  // namespace hora::detail
