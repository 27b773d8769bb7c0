// C side of src/ffi/reduce.rs: reductions and scans. A Rust test (ffi::reduce::tests) checks
// that these op codes match the Rust enums.
#pragma once

#include "foo_ffi.h"

#ifdef __cplusplus
extern "C" {
#endif

enum FooReduceOp {
  FOO_REDUCE_SUM = 0,
  FOO_REDUCE_MEAN = 1,
  FOO_REDUCE_NAN_SUM = 2,
  FOO_REDUCE_PROD = 3,
  FOO_REDUCE_MAX = 4,
  FOO_REDUCE_MIN = 5,
  FOO_REDUCE_ARG_MAX = 6,
  FOO_REDUCE_ARG_MIN = 7,
  FOO_REDUCE_VAR = 8,
  FOO_REDUCE_STD = 9,
  FOO_REDUCE_NORM = 10,
  FOO_REDUCE_ALL = 11,
  FOO_REDUCE_ANY = 12,
  FOO_REDUCE_LOG_SUM_EXP = 13,
};

enum FooScanOp {
  FOO_SCAN_CUM_SUM = 0,
  FOO_SCAN_CUM_PROD = 1,
};

// out/out2 have the input's rank, size 1 at reduced dims; out2 may be NULL.
int32_t foo_reduce(int32_t op, const FooTensor* out, const FooTensor* out2, const FooTensor* input,
                   const FooScalar* params, int32_t nparams);
int32_t foo_scan(int32_t op, const FooTensor* out, const FooTensor* input, int32_t dim);

#ifdef __cplusplus
}
#endif
