// Registrations of the convolution and pooling kernels (ops_conv.cpp, ops_pool.cpp).
#include <torch/library.h>

#include "common.h"
#include "ops_linalg.h"

namespace foo {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  FOO_IMPL(m, "convolution_overrideable", ops::convolution_overrideable);
  FOO_IMPL(m, "convolution_backward_overrideable", ops::convolution_backward_overrideable);
  FOO_IMPL(m, "max_pool2d_with_indices", ops::max_pool2d_with_indices);
  FOO_IMPL(m, "max_pool2d_with_indices.out", ops::max_pool2d_with_indices_out);
  FOO_IMPL(m, "max_pool2d_with_indices_backward", ops::max_pool2d_with_indices_backward);
  FOO_IMPL(m, "max_pool2d_with_indices_backward.grad_input", ops::max_pool2d_with_indices_backward_out);
  FOO_IMPL(m, "avg_pool2d", ops::avg_pool2d);
  FOO_IMPL(m, "avg_pool2d.out", ops::avg_pool2d_out);
  FOO_IMPL(m, "avg_pool2d_backward", ops::avg_pool2d_backward);
  FOO_IMPL(m, "avg_pool2d_backward.grad_input", ops::avg_pool2d_backward_out);
  FOO_IMPL(m, "_adaptive_avg_pool2d", ops::adaptive_avg_pool2d);
  FOO_IMPL(m, "_adaptive_avg_pool2d.out", ops::adaptive_avg_pool2d_out);
  FOO_IMPL(m, "adaptive_avg_pool2d.out", ops::adaptive_avg_pool2d_out);
  FOO_IMPL(m, "_adaptive_avg_pool2d_backward", ops::adaptive_avg_pool2d_backward);
  FOO_IMPL(m, "_adaptive_avg_pool2d_backward.out", ops::adaptive_avg_pool2d_backward_out);
}

}  // namespace foo
