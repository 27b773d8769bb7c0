// The C side of src/ffi/amp.rs: GradScaler's kernels.
#pragma once

#include "foo_ffi.h"

#ifdef __cplusplus
extern "C" {
#endif

// grads[i] *= inv_scale in place (opmath: float32 for float16/bfloat16); found_inf (1-element
// float32) is set to 1.0 when any gradient holds an inf or NaN. inv_scale: 1-element float32.
int32_t foo_amp_unscale(const FooTensor* grads, int64_t n, const FooTensor* found_inf, const FooTensor* inv_scale);
// scale (float32) and growth_tracker (int32) updated in place from found_inf (float32).
int32_t foo_amp_update_scale(const FooTensor* scale, const FooTensor* growth_tracker, const FooTensor* found_inf,
                             double growth_factor, double backoff_factor, int64_t growth_interval);

#ifdef __cplusplus
}
#endif
