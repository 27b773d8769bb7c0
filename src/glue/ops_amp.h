// GradScaler's ops (ops_amp.cpp).
#pragma once

#include <ATen/ATen.h>

namespace foo::ops {

void amp_foreach_non_finite_check_and_unscale_(at::TensorList grads, at::Tensor& found_inf,
                                               const at::Tensor& inv_scale);
at::Tensor& amp_update_scale_(at::Tensor& scale, at::Tensor& growth_tracker, const at::Tensor& found_inf,
                              double growth_factor, double backoff_factor, int64_t growth_interval);

}  // namespace foo::ops
