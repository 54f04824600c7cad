// Data types and reduction operations of hora's collectives.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hora {

enum class DataType : std::uint8_t {
  kUInt8 = 0,
  kInt8 = 1,
  kInt32 = 2,
  kInt64 = 3,
  kFloat16 = 4,   // IEEE 754 binary16
  kBFloat16 = 5,  // bfloat16 (upper half of a float32)
  kFloat32 = 6,
  kFloat64 = 7,
  kInt16 = 8,  // after the others: the numbers travel between ranks
};

enum class ReduceOp : std::uint8_t {
  kSum = 0,
  kAverage = 1,  // sum, then divide by the number of ranks (integers: truncating division)
  kMin = 2,
  kMax = 3,
  kProduct = 4,
};

// Which group of ranks a collective runs over (Horovod's definitions).
enum class Scope : std::uint8_t {
  kGlobal = 0,  // all ranks
  kLocal = 1,   // ranks on this host (local_rank 0..local_size-1)
  kCross = 2,   // ranks with this rank's local_rank, one per host (cross_rank)
};

// A process set (<hora/process_set.h>): a group of the job's ranks that runs collectives of its
// own. The default one, id 0, is the whole job.
struct ProcessSet {
  int id = 0;
};
inline constexpr ProcessSet kGlobalProcessSet{};

// Storage types for the two 16-bit floating point formats: the raw bits.
struct float16 {
  std::uint16_t bits;
};
struct bfloat16 {
  std::uint16_t bits;
};

std::size_t size_of(DataType type);
const char* name_of(DataType type);  // "uint8", "int8", "int16", "int32", "int64", "float16",
                                     // "bfloat16", "float32", "float64"
const char* name_of(ReduceOp op);    // "sum", "avg", "min", "max", "prod"
const char* name_of(Scope scope);    // "global", "local", "cross"

// Conversions used by the 16-bit reductions (round to nearest even).
float to_float(float16 v);
float to_float(bfloat16 v);
float16 to_float16(float v);
bfloat16 to_bfloat16(float v);

// dtype_of<T>() maps a C++ element type to its DataType.
template <typename T>
constexpr DataType dtype_of();
template <>
constexpr DataType dtype_of<std::uint8_t>() {
  return DataType::kUInt8;
}
template <>
constexpr DataType dtype_of<std::int8_t>() {
  return DataType::kInt8;
}
template <>
constexpr DataType dtype_of<std::int16_t>() {
  return DataType::kInt16;
}
template <>
constexpr DataType dtype_of<std::int32_t>() {
  return DataType::kInt32;
}
template <>
constexpr DataType dtype_of<std::int64_t>() {
  return DataType::kInt64;
}
template <>
constexpr DataType dtype_of<float16>() {
  return DataType::kFloat16;
}
template <>
constexpr DataType dtype_of<bfloat16>() {
  return DataType::kBFloat16;
}
template <>
constexpr DataType dtype_of<float>() {
  return DataType::kFloat32;
}
template <>
constexpr DataType dtype_of<double>() {
  return DataType::kFloat64;
}

}  // namespace hora
