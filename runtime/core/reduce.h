// Element-wise reductions for every DataType x ReduceOp, shared by every backend that reduces
// on the CPU (Gloo's ring allreduce calls them through AllreduceOptions::setReduceFunction,
// the reduce-scatter ring and the local fallbacks call them directly).
//
// Semantics, also promised in hora.h: integer sum and product wrap around (two's complement);
// float16 and bfloat16 are reduced in float32 and rounded back after every pairwise step;
// min and max of floating types propagate NaN. kAverage reduces as kSum; the caller divides
// the final result once with divide().
#pragma once

#include <cstddef>

#include <hora/types.h>

namespace hora::detail {

// out[i] = a[i] op b[i] for i < count. out may alias a or b.
using ReduceFn = void (*)(void* out, const void* a, const void* b, std::size_t count);

// Never null for a valid type and op.
ReduceFn reduce_function(DataType type, ReduceOp op);

// data[i] /= n. Integers: truncating division (toward zero); 16-bit floats: in float32.
void divide(void* data, std::size_t count, DataType type, int n);

}  // namespace hora::detail
