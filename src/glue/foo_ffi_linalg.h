// The C side of src/ffi/linalg.rs (matrix products).
#pragma once

#include "foo_ffi.h"

#ifdef __cplusplus
extern "C" {
#endif

// out = beta * c + alpha * (a @ b) over 3-D descriptors [B,M,K] x [B,K,N] -> [B,M,N]; c may be
// null or broadcast (zero strides) to [B,M,N]; c == out (same data and strides) is read in place.
// Dtypes: float32/64 and complex (gemm), float16/bfloat16 (in float32), integers; all the same dtype.
int32_t foo_matmul(const FooTensor* out, const FooTensor* a, const FooTensor* b, const FooTensor* c,
                   const FooScalar* beta, const FooScalar* alpha);

#ifdef __cplusplus
}
#endif
