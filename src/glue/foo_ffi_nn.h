// The nn family's C ABI (src/ffi/nn.rs). Operands are contiguous; optional tensors are null.
// Reductions use ATen's codes (0 none, 1 mean, 2 sum).
#pragma once

#include "foo_ffi.h"

#ifdef __cplusplus
extern "C" {
#endif

int32_t foo_softmax(const FooTensor* out, const FooTensor* input, int64_t dim, int32_t log);
int32_t foo_softmax_backward(const FooTensor* grad_input, const FooTensor* grad_output, const FooTensor* output,
                             int64_t dim, int32_t log);
int32_t foo_nll_loss(const FooTensor* output, const FooTensor* total_weight, const FooTensor* input,
                     const FooTensor* target, const FooTensor* weight, int64_t reduction, int64_t ignore_index);
int32_t foo_nll_loss_backward(const FooTensor* grad_input, const FooTensor* grad_output, const FooTensor* target,
                              const FooTensor* weight, const FooTensor* total_weight, int64_t reduction,
                              int64_t ignore_index);
int32_t foo_mse_loss(const FooTensor* out, const FooTensor* input, const FooTensor* target, int64_t reduction);
int32_t foo_mse_loss_backward(const FooTensor* grad_input, const FooTensor* grad_output, const FooTensor* input,
                              const FooTensor* target, int64_t reduction);
int32_t foo_bce_loss(const FooTensor* out, const FooTensor* input, const FooTensor* target, const FooTensor* weight,
                     int64_t reduction);
int32_t foo_bce_loss_backward(const FooTensor* grad_input, const FooTensor* grad_output, const FooTensor* input,
                              const FooTensor* target, const FooTensor* weight, int64_t reduction);
int32_t foo_layer_norm(const FooTensor* out, const FooTensor* mean, const FooTensor* rstd, const FooTensor* input,
                       const FooTensor* weight, const FooTensor* bias, double eps);
int32_t foo_layer_norm_backward(const FooTensor* grad_input, const FooTensor* grad_weight, const FooTensor* grad_bias,
                                const FooTensor* grad_out, const FooTensor* input, const FooTensor* mean,
                                const FooTensor* rstd, const FooTensor* weight);
int32_t foo_batch_norm(const FooTensor* out, const FooTensor* save_mean, const FooTensor* save_invstd,
                       const FooTensor* input, const FooTensor* weight, const FooTensor* bias,
                       const FooTensor* running_mean, const FooTensor* running_var, int32_t training, double momentum,
                       double eps);
int32_t foo_batch_norm_backward(const FooTensor* grad_input, const FooTensor* grad_weight, const FooTensor* grad_bias,
                                const FooTensor* grad_out, const FooTensor* input, const FooTensor* weight,
                                const FooTensor* mean, const FooTensor* invstd_or_var, int32_t training, double eps);
int32_t foo_embedding_backward(const FooTensor* grad_weight, const FooTensor* grad, const FooTensor* indices,
                               int64_t padding_idx, int32_t scale_grad_by_freq);

#ifdef __cplusplus
}
#endif
