// The fused attention's C ABI (src/ffi/attention.rs). Operands are 4-D [batch, heads, seq, dim]
// views with a unit last stride; the mask [B, Hq, L, S] may have any strides (zero where it is
// broadcast) and be null, as may grad_bias. dropout_p == 0 means no dropout. The workspace is a
// byte tensor of foo memory (caching allocator) of foo_attention_workspace bytes.
#pragma once

#include "foo_ffi.h"

#ifdef __cplusplus
extern "C" {
#endif

int32_t foo_attention_rng(uint64_t generator, uint64_t count, uint64_t* seed, uint64_t* offset);
// Bytes of scratch (packed keys and values) the forward (backward == 0) or backward needs.
int32_t foo_attention_workspace(const FooTensor* q, const FooTensor* k, const FooTensor* v, int32_t backward,
                                size_t* bytes);
int32_t foo_attention_forward(const FooTensor* output, const FooTensor* lse, const FooTensor* q, const FooTensor* k,
                              const FooTensor* v, const FooTensor* mask, const FooTensor* workspace, double scale,
                              int32_t causal, double dropout_p, uint64_t seed, uint64_t offset);
int32_t foo_attention_backward(const FooTensor* grad_q, const FooTensor* grad_k, const FooTensor* grad_v,
                               const FooTensor* grad_bias, const FooTensor* grad_out, const FooTensor* q,
                               const FooTensor* k, const FooTensor* v, const FooTensor* output, const FooTensor* lse,
                               const FooTensor* mask, const FooTensor* workspace, double scale, int32_t causal,
                               double dropout_p, uint64_t seed, uint64_t offset);

#ifdef __cplusplus
}
#endif
