// The C side of src/ffi/optim.rs: fused optimizer steps (torch.optim's fused=True).
#pragma once

#include "foo_ffi.h"

#ifdef __cplusplus
extern "C" {
#endif

// Mirrors kernels::optim::AdamArgs (#[repr(C)]).
typedef struct FooAdamArgs {
  double lr, beta1, beta2, weight_decay, eps;
  bool amsgrad, maximize, decoupled;
} FooAdamArgs;

// Mirrors kernels::optim::SgdArgs.
typedef struct FooSgdArgs {
  double lr, weight_decay, momentum, dampening;
  bool nesterov, maximize, is_first_step;
} FooSgdArgs;

// Mirrors kernels::optim::AdagradArgs.
typedef struct FooAdagradArgs {
  double lr, lr_decay, weight_decay, eps;
  bool maximize;
} FooAdagradArgs;

// Each list holds n descriptors of dense (contiguous) tensors; grad_scale and found_inf are null
// or 1-element float32 tensors. The whole step is skipped when found_inf holds 1.0.
int32_t foo_fused_adam(const FooTensor* params, const FooTensor* grads, const FooTensor* exp_avgs,
                       const FooTensor* exp_avg_sqs, const FooTensor* max_exp_avg_sqs, const FooTensor* steps,
                       int64_t n, const FooAdamArgs* args, const FooTensor* grad_scale, const FooTensor* found_inf);
int32_t foo_fused_sgd(const FooTensor* params, const FooTensor* grads, const FooTensor* momentum_buffers, int64_t n,
                      const FooSgdArgs* args, const FooTensor* grad_scale, const FooTensor* found_inf);
int32_t foo_fused_adagrad(const FooTensor* params, const FooTensor* grads, const FooTensor* state_sums,
                          const FooTensor* steps, int64_t n, const FooAdagradArgs* args, const FooTensor* grad_scale,
                          const FooTensor* found_inf);

#ifdef __cplusplus
}
// The Rust side asserts the same sizes (kernels::optim tests): a field added on one side only fails both.
static_assert(sizeof(FooAdamArgs) == 48 && sizeof(FooSgdArgs) == 40 && sizeof(FooAdagradArgs) == 40,
              "FooAdamArgs/FooSgdArgs/FooAdagradArgs must mirror kernels::optim's #[repr(C)] structs");
#endif
