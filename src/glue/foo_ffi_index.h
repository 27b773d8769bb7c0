// The C side of src/ffi/index.rs (the index / data-movement family). A Rust test
// (ffi::index::tests) checks that the codes below match the Rust enums.
#pragma once

#include "foo_ffi.h"

#ifdef __cplusplus
extern "C" {
#endif

// How a scatter combines source and destination elements (kernels::index::advanced::Reduce).
enum FooIndexReduce {
  FOO_REDUCE_ASSIGN = 0,
  FOO_REDUCE_ADD = 1,
  FOO_REDUCE_MUL = 2,
  FOO_REDUCE_MAX = 3,
  FOO_REDUCE_MIN = 4,
};

// Out-of-range handling (allow_negative | style << 1), each with ATen's CPU message:
// INDEX  negatives wrap; "index 5 is out of bounds for dimension 0 with size 3"
// STRICT negatives are errors; same message (gather, scatter, index_add, index_copy)
// SELECT negatives are errors; "index out of range in self" (index_select)
// TAKE   negatives wrap; "out of range: tried to access index 15 on a tensor of 12 elements."
enum FooIndexBounds {
  FOO_BOUNDS_INDEX = 1,
  FOO_BOUNDS_STRICT = 0,
  FOO_BOUNDS_SELECT = 2,
  FOO_BOUNDS_TAKE = 5,
};

// An int64 index tensor broadcast to the iteration shape, the size and stride (elements) of
// the data dim it indexes, and the dim number errors report.
typedef struct FooIndexer {
  FooTensor index;
  int64_t size;
  int64_t stride;
  int64_t dim;
} FooIndexer;

int32_t foo_index_gather(const FooTensor* out, const FooTensor* src, const FooIndexer* idx, int32_t nidx, int32_t mode);
int32_t foo_index_scatter(const FooTensor* dst, const FooTensor* src, const FooIndexer* idx, int32_t nidx, int32_t mode,
                          int32_t reduce, const FooScalar* alpha);
int32_t foo_cat(const FooTensor* out, const FooTensor* inputs, int32_t n, int64_t dim);
int32_t foo_count_nonzero(const FooTensor* src, int64_t* count);
int32_t foo_nonzero(const FooTensor* out, const FooTensor* src);
int32_t foo_masked_select(const FooTensor* out, const FooTensor* src, const FooTensor* mask);
int32_t foo_masked_scatter(const FooTensor* dst, const FooTensor* mask, const FooTensor* source);
int32_t foo_sort(const FooTensor* values, const FooTensor* indices, const FooTensor* src, int64_t dim, bool descending);
int32_t foo_topk(const FooTensor* values, const FooTensor* indices, const FooTensor* src, int64_t k, int64_t dim,
                 bool largest);
int32_t foo_arange(const FooTensor* out, const FooScalar* start, const FooScalar* step);
int32_t foo_linspace(const FooTensor* out, const FooScalar* start, const FooScalar* end, int64_t steps);
int32_t foo_tril_triu(const FooTensor* out, const FooTensor* src, int64_t k, bool upper);

#ifdef __cplusplus
}
#endif
