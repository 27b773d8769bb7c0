// C side of src/ffi/random.rs; op codes of kernels::random::RandomOp (checked by a Rust test).
#pragma once

#include "foo_ffi.h"

#ifdef __cplusplus
extern "C" {
#endif

enum FooRandomOp {
  FOO_RANDOM_UNIFORM = 0,
  FOO_RANDOM_NORMAL = 1,
  FOO_RANDOM_BERNOULLI = 2,
  FOO_RANDOM_RANDOM_RANGE = 3,
  FOO_RANDOM_EXPONENTIAL = 4,
  FOO_RANDOM_GEOMETRIC = 5,
  FOO_RANDOM_LOG_NORMAL = 6,
  FOO_RANDOM_CAUCHY = 7,
};

int32_t foo_random(int32_t op, const FooTensor* out, uint64_t gen, const FooScalar* params, int32_t nparams);
int32_t foo_bernoulli_tensor(const FooTensor* out, const FooTensor* prob, uint64_t gen);
int32_t foo_dropout(const FooTensor* out, const FooTensor* mask, const FooTensor* input, double p, uint64_t gen);
int32_t foo_randperm(const FooTensor* out, uint64_t gen);
int32_t foo_multinomial(const FooTensor* out, const FooTensor* prob, int64_t samples, bool replacement, uint64_t gen);

#ifdef __cplusplus
}
#endif
