// Elementwise op wrappers (ops_unary.cpp, ops_binary.cpp, ops_ternary.cpp). Most ops come in
// three variants: functional `name`, in-place `name_`, and `name_out`.
#pragma once

#include <ATen/ATen.h>

#define FOO_DECLARE_UNARY(name)                 \
  at::Tensor name(const at::Tensor& self);      \
  at::Tensor& name##_(at::Tensor& self);        \
  at::Tensor& name##_out(const at::Tensor& self, at::Tensor& out);

#define FOO_DECLARE_BINARY(name)                                         \
  at::Tensor name(const at::Tensor& self, const at::Tensor& other);      \
  at::Tensor& name##_(at::Tensor& self, const at::Tensor& other);        \
  at::Tensor& name##_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out);

#define FOO_DECLARE_COMPARE_SCALAR(name)                                 \
  at::Tensor name##_scalar(const at::Tensor& self, const c10::Scalar& other); \
  at::Tensor& name##_scalar_(at::Tensor& self, const c10::Scalar& other);     \
  at::Tensor& name##_scalar_out(const at::Tensor& self, const c10::Scalar& other, at::Tensor& out);

namespace foo::ops {

// ---- unary: float results (integers promote to the default float dtype) ------------------
FOO_DECLARE_UNARY(exp)
FOO_DECLARE_UNARY(exp2)
FOO_DECLARE_UNARY(expm1)
FOO_DECLARE_UNARY(log)
FOO_DECLARE_UNARY(log2)
FOO_DECLARE_UNARY(log10)
FOO_DECLARE_UNARY(log1p)
FOO_DECLARE_UNARY(sqrt)
FOO_DECLARE_UNARY(rsqrt)
FOO_DECLARE_UNARY(reciprocal)
FOO_DECLARE_UNARY(sin)
FOO_DECLARE_UNARY(cos)
FOO_DECLARE_UNARY(tan)
FOO_DECLARE_UNARY(tanh)
FOO_DECLARE_UNARY(asin)
FOO_DECLARE_UNARY(acos)
FOO_DECLARE_UNARY(atan)
FOO_DECLARE_UNARY(sinh)
FOO_DECLARE_UNARY(cosh)
FOO_DECLARE_UNARY(asinh)
FOO_DECLARE_UNARY(acosh)
FOO_DECLARE_UNARY(atanh)
FOO_DECLARE_UNARY(sigmoid)
FOO_DECLARE_UNARY(erf)
FOO_DECLARE_UNARY(erfc)
FOO_DECLARE_UNARY(erfinv)
// ---- unary: same dtype in and out ----------------------------------------------------------
FOO_DECLARE_UNARY(neg)
FOO_DECLARE_UNARY(abs)
FOO_DECLARE_UNARY(sign)
FOO_DECLARE_UNARY(sgn)
FOO_DECLARE_UNARY(floor)
FOO_DECLARE_UNARY(ceil)
FOO_DECLARE_UNARY(trunc)
FOO_DECLARE_UNARY(frac)
FOO_DECLARE_UNARY(round)
FOO_DECLARE_UNARY(bitwise_not)
FOO_DECLARE_UNARY(silu)
FOO_DECLARE_UNARY(mish)
FOO_DECLARE_UNARY(hardsigmoid)
FOO_DECLARE_UNARY(hardswish)
FOO_DECLARE_UNARY(logical_not)
FOO_DECLARE_UNARY(signbit)
at::Tensor round_decimals(const at::Tensor& self, int64_t decimals);
at::Tensor& round_decimals_(at::Tensor& self, int64_t decimals);
at::Tensor& round_decimals_out(const at::Tensor& self, int64_t decimals, at::Tensor& out);
at::Tensor isnan(const at::Tensor& self);
at::Tensor isinf(const at::Tensor& self);
at::Tensor isposinf(const at::Tensor& self);
at::Tensor& isposinf_out(const at::Tensor& self, at::Tensor& out);
at::Tensor isneginf(const at::Tensor& self);
at::Tensor& isneginf_out(const at::Tensor& self, at::Tensor& out);
at::Tensor relu(const at::Tensor& self);
at::Tensor& relu_(at::Tensor& self);
at::Tensor gelu(const at::Tensor& self, c10::string_view approximate);
at::Tensor& gelu_(at::Tensor& self, c10::string_view approximate);
at::Tensor& gelu_out(const at::Tensor& self, c10::string_view approximate, at::Tensor& out);
at::Tensor softplus(const at::Tensor& self, const c10::Scalar& beta, const c10::Scalar& threshold);
at::Tensor& softplus_out(const at::Tensor& self, const c10::Scalar& beta, const c10::Scalar& threshold, at::Tensor& out);
at::Tensor leaky_relu(const at::Tensor& self, const c10::Scalar& negative_slope);
at::Tensor& leaky_relu_(at::Tensor& self, const c10::Scalar& negative_slope);
at::Tensor& leaky_relu_out(const at::Tensor& self, const c10::Scalar& negative_slope, at::Tensor& out);
at::Tensor elu(const at::Tensor& self, const c10::Scalar& alpha, const c10::Scalar& scale, const c10::Scalar& input_scale);
at::Tensor& elu_(at::Tensor& self, const c10::Scalar& alpha, const c10::Scalar& scale, const c10::Scalar& input_scale);
at::Tensor& elu_out(const at::Tensor& self, const c10::Scalar& alpha, const c10::Scalar& scale,
                    const c10::Scalar& input_scale, at::Tensor& out);
at::Tensor hardtanh(const at::Tensor& self, const c10::Scalar& min_val, const c10::Scalar& max_val);
at::Tensor& hardtanh_(at::Tensor& self, const c10::Scalar& min_val, const c10::Scalar& max_val);
at::Tensor& hardtanh_out(const at::Tensor& self, const c10::Scalar& min_val, const c10::Scalar& max_val, at::Tensor& out);
at::Tensor clamp(const at::Tensor& self, const std::optional<c10::Scalar>& min, const std::optional<c10::Scalar>& max);
at::Tensor& clamp_(at::Tensor& self, const std::optional<c10::Scalar>& min, const std::optional<c10::Scalar>& max);
at::Tensor& clamp_out(const at::Tensor& self, const std::optional<c10::Scalar>& min, const std::optional<c10::Scalar>& max,
                      at::Tensor& out);
at::Tensor clamp_min(const at::Tensor& self, const c10::Scalar& min);
at::Tensor& clamp_min_(at::Tensor& self, const c10::Scalar& min);
at::Tensor& clamp_min_out(const at::Tensor& self, const c10::Scalar& min, at::Tensor& out);
at::Tensor clamp_max(const at::Tensor& self, const c10::Scalar& max);
at::Tensor& clamp_max_(at::Tensor& self, const c10::Scalar& max);
at::Tensor& clamp_max_out(const at::Tensor& self, const c10::Scalar& max, at::Tensor& out);
at::Tensor clamp_tensor(const at::Tensor& self, const std::optional<at::Tensor>& min,
                        const std::optional<at::Tensor>& max);
at::Tensor& clamp_tensor_(at::Tensor& self, const std::optional<at::Tensor>& min, const std::optional<at::Tensor>& max);
at::Tensor& clamp_tensor_out(const at::Tensor& self, const std::optional<at::Tensor>& min,
                             const std::optional<at::Tensor>& max, at::Tensor& out);
at::Tensor clamp_min_tensor(const at::Tensor& self, const at::Tensor& min);
at::Tensor& clamp_min_tensor_(at::Tensor& self, const at::Tensor& min);
at::Tensor& clamp_min_tensor_out(const at::Tensor& self, const at::Tensor& min, at::Tensor& out);
at::Tensor clamp_max_tensor(const at::Tensor& self, const at::Tensor& max);
at::Tensor& clamp_max_tensor_(at::Tensor& self, const at::Tensor& max);
at::Tensor& clamp_max_tensor_out(const at::Tensor& self, const at::Tensor& max, at::Tensor& out);
at::Tensor threshold(const at::Tensor& self, const c10::Scalar& threshold, const c10::Scalar& value);
at::Tensor& threshold_(at::Tensor& self, const c10::Scalar& threshold, const c10::Scalar& value);
at::Tensor& threshold_out(const at::Tensor& self, const c10::Scalar& threshold, const c10::Scalar& value,
                          at::Tensor& out);
at::Tensor nan_to_num(const at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                      std::optional<double> neginf);
at::Tensor& nan_to_num_(at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                        std::optional<double> neginf);
at::Tensor& nan_to_num_out(const at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                           std::optional<double> neginf, at::Tensor& out);

// ---- binary ---------------------------------------------------------------------------------
at::Tensor add(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha);
at::Tensor& add_(at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha);
at::Tensor& add_out(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha, at::Tensor& out);
at::Tensor sub(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha);
at::Tensor& sub_(at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha);
at::Tensor& sub_out(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha, at::Tensor& out);
at::Tensor rsub(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha);
FOO_DECLARE_BINARY(mul)
FOO_DECLARE_BINARY(floor_divide)
FOO_DECLARE_BINARY(div)
at::Tensor div_mode(const at::Tensor& self, const at::Tensor& other, std::optional<c10::string_view> rounding_mode);
at::Tensor& div_mode_(at::Tensor& self, const at::Tensor& other, std::optional<c10::string_view> rounding_mode);
at::Tensor& div_mode_out(const at::Tensor& self, const at::Tensor& other, std::optional<c10::string_view> rounding_mode,
                         at::Tensor& out);
FOO_DECLARE_BINARY(remainder)
FOO_DECLARE_BINARY(fmod)
FOO_DECLARE_BINARY(pow)
at::Tensor pow_scalar_exp(const at::Tensor& self, const c10::Scalar& exponent);
at::Tensor& pow_scalar_exp_(at::Tensor& self, const c10::Scalar& exponent);
at::Tensor& pow_scalar_exp_out(const at::Tensor& self, const c10::Scalar& exponent, at::Tensor& out);
at::Tensor pow_scalar_base(const c10::Scalar& self, const at::Tensor& exponent);
at::Tensor& pow_scalar_base_out(const c10::Scalar& self, const at::Tensor& exponent, at::Tensor& out);
at::Tensor maximum(const at::Tensor& self, const at::Tensor& other);
at::Tensor& maximum_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out);
at::Tensor minimum(const at::Tensor& self, const at::Tensor& other);
at::Tensor& minimum_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out);
at::Tensor fmax(const at::Tensor& self, const at::Tensor& other);
at::Tensor& fmax_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out);
at::Tensor fmin(const at::Tensor& self, const at::Tensor& other);
at::Tensor& fmin_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out);
FOO_DECLARE_BINARY(atan2)
FOO_DECLARE_BINARY(hypot)
FOO_DECLARE_BINARY(copysign)
FOO_DECLARE_BINARY(xlogy)
at::Tensor logaddexp(const at::Tensor& self, const at::Tensor& other);
at::Tensor& logaddexp_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out);
FOO_DECLARE_BINARY(eq)
FOO_DECLARE_BINARY(ne)
FOO_DECLARE_BINARY(lt)
FOO_DECLARE_BINARY(le)
FOO_DECLARE_BINARY(gt)
FOO_DECLARE_BINARY(ge)
FOO_DECLARE_COMPARE_SCALAR(eq)
FOO_DECLARE_COMPARE_SCALAR(ne)
FOO_DECLARE_COMPARE_SCALAR(lt)
FOO_DECLARE_COMPARE_SCALAR(le)
FOO_DECLARE_COMPARE_SCALAR(gt)
FOO_DECLARE_COMPARE_SCALAR(ge)
FOO_DECLARE_BINARY(logical_and)
FOO_DECLARE_BINARY(logical_or)
FOO_DECLARE_BINARY(logical_xor)
FOO_DECLARE_BINARY(bitwise_and)
FOO_DECLARE_BINARY(bitwise_or)
FOO_DECLARE_BINARY(bitwise_xor)
FOO_DECLARE_BINARY(bitwise_left_shift)
FOO_DECLARE_BINARY(bitwise_right_shift)
at::Tensor lshift(const at::Tensor& self, const at::Tensor& other);
at::Tensor& ilshift(at::Tensor& self, const at::Tensor& other);
at::Tensor rshift(const at::Tensor& self, const at::Tensor& other);
at::Tensor& irshift(at::Tensor& self, const at::Tensor& other);
at::Tensor lshift_scalar(const at::Tensor& self, const c10::Scalar& other);
at::Tensor& ilshift_scalar(at::Tensor& self, const c10::Scalar& other);
at::Tensor rshift_scalar(const at::Tensor& self, const c10::Scalar& other);
at::Tensor& irshift_scalar(at::Tensor& self, const c10::Scalar& other);

// ---- activation backward: (grad, saved) -> grad_input -------------------------------------
at::Tensor threshold_backward(const at::Tensor& grad, const at::Tensor& self, const c10::Scalar& threshold);
at::Tensor& threshold_backward_out(const at::Tensor& grad, const at::Tensor& self, const c10::Scalar& threshold,
                                   at::Tensor& grad_input);
at::Tensor sigmoid_backward(const at::Tensor& grad, const at::Tensor& output);
at::Tensor& sigmoid_backward_out(const at::Tensor& grad, const at::Tensor& output, at::Tensor& grad_input);
at::Tensor tanh_backward(const at::Tensor& grad, const at::Tensor& output);
at::Tensor& tanh_backward_out(const at::Tensor& grad, const at::Tensor& output, at::Tensor& grad_input);
at::Tensor silu_backward(const at::Tensor& grad, const at::Tensor& self);
at::Tensor& silu_backward_out(const at::Tensor& grad, const at::Tensor& self, at::Tensor& grad_input);
at::Tensor gelu_backward(const at::Tensor& grad, const at::Tensor& self, c10::string_view approximate);
at::Tensor& gelu_backward_out(const at::Tensor& grad, const at::Tensor& self, c10::string_view approximate,
                              at::Tensor& grad_input);
at::Tensor softplus_backward(const at::Tensor& grad, const at::Tensor& self, const c10::Scalar& beta,
                             const c10::Scalar& threshold);
at::Tensor& softplus_backward_out(const at::Tensor& grad, const at::Tensor& self, const c10::Scalar& beta,
                                  const c10::Scalar& threshold, at::Tensor& grad_input);
at::Tensor leaky_relu_backward(const at::Tensor& grad, const at::Tensor& self, const c10::Scalar& negative_slope,
                               bool self_is_result);
at::Tensor& leaky_relu_backward_out(const at::Tensor& grad, const at::Tensor& self, const c10::Scalar& negative_slope,
                                    bool self_is_result, at::Tensor& grad_input);
at::Tensor hardtanh_backward(const at::Tensor& grad, const at::Tensor& self, const c10::Scalar& min_val,
                             const c10::Scalar& max_val);
at::Tensor& hardtanh_backward_out(const at::Tensor& grad, const at::Tensor& self, const c10::Scalar& min_val,
                                  const c10::Scalar& max_val, at::Tensor& grad_input);
at::Tensor hardswish_backward(const at::Tensor& grad, const at::Tensor& self);
at::Tensor hardsigmoid_backward(const at::Tensor& grad, const at::Tensor& self);
at::Tensor& hardsigmoid_backward_out(const at::Tensor& grad, const at::Tensor& self, at::Tensor& grad_input);
at::Tensor mish_backward(const at::Tensor& grad, const at::Tensor& self);

// ---- ternary --------------------------------------------------------------------------------
at::Tensor where_self(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other);
at::Tensor& where_self_out(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other, at::Tensor& out);
at::Tensor lerp_scalar(const at::Tensor& self, const at::Tensor& end, const c10::Scalar& weight);
at::Tensor& lerp_scalar_(at::Tensor& self, const at::Tensor& end, const c10::Scalar& weight);
at::Tensor& lerp_scalar_out(const at::Tensor& self, const at::Tensor& end, const c10::Scalar& weight, at::Tensor& out);
at::Tensor lerp_tensor(const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight);
at::Tensor& lerp_tensor_(at::Tensor& self, const at::Tensor& end, const at::Tensor& weight);
at::Tensor& lerp_tensor_out(const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight, at::Tensor& out);
at::Tensor addcmul(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2, const c10::Scalar& value);
at::Tensor& addcmul_(at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2, const c10::Scalar& value);
at::Tensor& addcmul_out(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2, const c10::Scalar& value,
                        at::Tensor& out);
at::Tensor addcdiv(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2, const c10::Scalar& value);
at::Tensor& addcdiv_(at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2, const c10::Scalar& value);
at::Tensor& addcdiv_out(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2, const c10::Scalar& value,
                        at::Tensor& out);
at::Tensor& masked_fill_scalar_(at::Tensor& self, const at::Tensor& mask, const c10::Scalar& value);
at::Tensor& masked_fill_tensor_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& value);

}  // namespace foo::ops
