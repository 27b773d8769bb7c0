// Kernel wrappers of the linalg (matrix product), convolution and pooling families.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <optional>
#include <tuple>

namespace foo::ops {

// ---- matrix products (ops_linalg.cpp) ------------------------------------------------------
at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2);
at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out);
at::Tensor bmm(const at::Tensor& self, const at::Tensor& mat2);
at::Tensor& bmm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out);
at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const c10::Scalar& beta,
                 const c10::Scalar& alpha);
at::Tensor& addmm_(at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const c10::Scalar& beta,
                   const c10::Scalar& alpha);
at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const c10::Scalar& beta,
                      const c10::Scalar& alpha, at::Tensor& out);
at::Tensor baddbmm(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2, const c10::Scalar& beta,
                   const c10::Scalar& alpha);
at::Tensor& baddbmm_(at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2, const c10::Scalar& beta,
                     const c10::Scalar& alpha);
at::Tensor& baddbmm_out(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                        const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out);
at::Tensor addmv(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const c10::Scalar& beta,
                 const c10::Scalar& alpha);
at::Tensor& addmv_(at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const c10::Scalar& beta,
                   const c10::Scalar& alpha);
at::Tensor& addmv_out(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const c10::Scalar& beta,
                      const c10::Scalar& alpha, at::Tensor& out);
at::Tensor mv(const at::Tensor& self, const at::Tensor& vec);
at::Tensor& mv_out(const at::Tensor& self, const at::Tensor& vec, at::Tensor& out);
at::Tensor dot(const at::Tensor& self, const at::Tensor& other);
at::Tensor& dot_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out);
at::Tensor addbmm(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2, const c10::Scalar& beta,
                  const c10::Scalar& alpha);
at::Tensor& addbmm_(at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2, const c10::Scalar& beta,
                    const c10::Scalar& alpha);
at::Tensor& addbmm_out(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                       const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out);
at::Tensor vdot(const at::Tensor& self, const at::Tensor& other);
at::Tensor& vdot_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out);

// ---- convolution (ops_conv.cpp) --------------------------------------------------------------
at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                                    at::IntArrayRef output_padding, int64_t groups);
std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding, int64_t groups,
    std::array<bool, 3> output_mask);

// ---- pooling (ops_pool.cpp) ------------------------------------------------------------------
std::tuple<at::Tensor, at::Tensor> max_pool2d_with_indices(const at::Tensor& self, at::IntArrayRef kernel_size,
                                                           at::IntArrayRef stride, at::IntArrayRef padding,
                                                           at::IntArrayRef dilation, bool ceil_mode);
std::tuple<at::Tensor&, at::Tensor&> max_pool2d_with_indices_out(const at::Tensor& self, at::IntArrayRef kernel_size,
                                                                 at::IntArrayRef stride, at::IntArrayRef padding,
                                                                 at::IntArrayRef dilation, bool ceil_mode,
                                                                 at::Tensor& out, at::Tensor& indices);
at::Tensor max_pool2d_with_indices_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                            at::IntArrayRef kernel_size, at::IntArrayRef stride,
                                            at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode,
                                            const at::Tensor& indices);
at::Tensor& max_pool2d_with_indices_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                                 at::IntArrayRef kernel_size, at::IntArrayRef stride,
                                                 at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode,
                                                 const at::Tensor& indices, at::Tensor& grad_input);
at::Tensor avg_pool2d(const at::Tensor& self, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                      at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                      std::optional<int64_t> divisor_override);
at::Tensor& avg_pool2d_out(const at::Tensor& self, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                           at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                           std::optional<int64_t> divisor_override, at::Tensor& out);
at::Tensor avg_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& self, at::IntArrayRef kernel_size,
                               at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode,
                               bool count_include_pad, std::optional<int64_t> divisor_override);
at::Tensor& avg_pool2d_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                    at::IntArrayRef kernel_size, at::IntArrayRef stride, at::IntArrayRef padding,
                                    bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override,
                                    at::Tensor& grad_input);
at::Tensor adaptive_avg_pool2d(const at::Tensor& self, c10::SymIntArrayRef output_size);
at::Tensor& adaptive_avg_pool2d_out(const at::Tensor& self, c10::SymIntArrayRef output_size, at::Tensor& out);
at::Tensor adaptive_avg_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& self);
at::Tensor& adaptive_avg_pool2d_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                             at::Tensor& out);

}  // namespace foo::ops
