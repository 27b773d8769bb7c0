// Unary elementwise ops: metadata from TensorIterator (as ATen's CPU kernels build it), values
// from Rust (foo_unary).
#include <ATen/Dispatch_v2.h>
#include <ATen/native/TypeProperties.h>
#include <torch/library.h>

#include <limits>

#include "elementwise.h"

namespace foo::ops {
namespace {

using at::TensorIterator;

const at::Tensor& same(TensorIterator& it, int32_t op, std::initializer_list<c10::Scalar> params = {}) {
  return ew::launch_unary(it, op, it.common_dtype(), it.common_dtype(), params);
}

// A predicate: reads the input in its own dtype, writes bool (converted into `out` if needed).
at::Tensor predicate(at::Tensor& out, const at::Tensor& self, int32_t op) {
  auto it = ew::fixed_dtype_op(out, {&self}, at::kBool);
  return ew::launch_unary(it, op, at::kBool, self.scalar_type());
}

// ATen's CPU kernels have no bool version of these (the integer ones are identities).
void check_not_bool(const at::Tensor& self, const char* cpu_kernel) {
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool, "\"", cpu_kernel, "\" not implemented for 'Bool'");
}

// round(x, decimals=...) is a floating-point kernel on the CPU, refusing integers, bool and complex
// (even decimals=0, which takes "round_vml_cpu"; plain round(x) takes integers).
void check_round_decimals(const at::Tensor& self, int64_t decimals) {
  const auto st = self.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(st), "\"", decimals == 0 ? "round_vml_cpu" : "round_cpu",
                              "\" not implemented for '", st, "'");
}

// Complex abs has a real result, which the TensorIterator below does not build: the CPU's does.
void check_abs(const at::Tensor& self) {
  check_not_bool(self, "abs_cpu");
  if (self.is_complex()) needs_fallback("abs: no foo kernel for complex inputs");
}

// Activation parameters, which the CPU kernels convert to their compute type (range-checked).
void check_params_fit(const TensorIterator& it, std::initializer_list<c10::Scalar> params) {
  for (const auto& p : params) check_scalar_fits_opmath(p, it.common_dtype());
}

// op(self, params) into `out`, undefined (a new result) or `self` (in place): over the dense memory
// where ew::dense_operands allows it (building the iterator was a third of a 1000-float relu),
// else through the iterator, which raises the overlap and dtype errors.
at::Tensor activation(at::Tensor& out, const at::Tensor& self, int32_t op,
                      std::initializer_list<c10::Scalar> params = {}) {
  if (ew::dense_operands(FOO_FLOAT_OP_unary_op, out, self)) {
    for (const auto& p : params) check_scalar_fits_opmath(p, self.scalar_type());
    ew::dense_unary(out, op, self, params);
    return out;
  }
  auto it = ew::unary_op(out, self);
  check_params_fit(it, params);
  return same(it, op, params);
}

c10::Scalar approximate_code(c10::string_view approximate) {
  if (approximate == "none") return 0;
  TORCH_CHECK(approximate == "tanh", "approximate argument must be either none or tanh.");
  return 1;
}

#define FOO_UNARY(name, builder, code, checks)                                \
  at::Tensor name(const at::Tensor& self) {                                   \
    checks;                                                                   \
    at::Tensor out;                                                           \
    if (ew::dense_operands(FOO_FLOAT_OP_##builder, out, self)) {              \
      ew::dense_unary(out, code, self);                                       \
      return out;                                                             \
    }                                                                         \
    auto it = ew::builder(out, self);                                         \
    return same(it, code);                                                    \
  }                                                                           \
  at::Tensor& name##_(at::Tensor& self) {                                     \
    checks;                                                                   \
    if (ew::dense_operands(FOO_FLOAT_OP_##builder, self, self)) {             \
      ew::dense_unary(self, code, self);                                      \
      return self;                                                            \
    }                                                                         \
    auto it = ew::builder(self, self);                                        \
    same(it, code);                                                           \
    return self;                                                              \
  }                                                                           \
  at::Tensor& name##_out(const at::Tensor& self, at::Tensor& out) {           \
    checks;                                                                   \
    auto it = ew::builder(out, self);                                         \
    same(it, code);                                                           \
    return out;                                                               \
  }

FOO_UNARY(exp, unary_float_op, FOO_UNARY_OP_EXP, (void)0)
FOO_UNARY(exp2, unary_float_op, FOO_UNARY_OP_EXP2, (void)0)
FOO_UNARY(expm1, unary_float_op, FOO_UNARY_OP_EXPM1, (void)0)
FOO_UNARY(log, unary_float_op, FOO_UNARY_OP_LOG, (void)0)
FOO_UNARY(log2, unary_float_op, FOO_UNARY_OP_LOG2, (void)0)
FOO_UNARY(log10, unary_float_op, FOO_UNARY_OP_LOG10, (void)0)
FOO_UNARY(log1p, unary_float_op, FOO_UNARY_OP_LOG1P, (void)0)
FOO_UNARY(sqrt, unary_float_op, FOO_UNARY_OP_SQRT, (void)0)
FOO_UNARY(rsqrt, unary_float_op, FOO_UNARY_OP_RSQRT, (void)0)
FOO_UNARY(reciprocal, unary_float_op, FOO_UNARY_OP_RECIPROCAL, (void)0)
FOO_UNARY(sin, unary_float_op, FOO_UNARY_OP_SIN, (void)0)
FOO_UNARY(cos, unary_float_op, FOO_UNARY_OP_COS, (void)0)
FOO_UNARY(tan, unary_float_op, FOO_UNARY_OP_TAN, (void)0)
FOO_UNARY(tanh, unary_float_op, FOO_UNARY_OP_TANH, (void)0)
FOO_UNARY(asin, unary_float_op, FOO_UNARY_OP_ASIN, (void)0)
FOO_UNARY(acos, unary_float_op, FOO_UNARY_OP_ACOS, (void)0)
FOO_UNARY(atan, unary_float_op, FOO_UNARY_OP_ATAN, (void)0)
FOO_UNARY(sinh, unary_float_op, FOO_UNARY_OP_SINH, (void)0)
FOO_UNARY(cosh, unary_float_op, FOO_UNARY_OP_COSH, (void)0)
FOO_UNARY(asinh, unary_float_op, FOO_UNARY_OP_ASINH, (void)0)
FOO_UNARY(acosh, unary_float_op, FOO_UNARY_OP_ACOSH, (void)0)
FOO_UNARY(atanh, unary_float_op, FOO_UNARY_OP_ATANH, (void)0)
FOO_UNARY(sigmoid, unary_float_op, FOO_UNARY_OP_SIGMOID, (void)0)
FOO_UNARY(erf, unary_float_op, FOO_UNARY_OP_ERF, (void)0)
FOO_UNARY(erfc, unary_float_op, FOO_UNARY_OP_ERFC, (void)0)
FOO_UNARY(erfinv, unary_float_op, FOO_UNARY_OP_ERFINV, (void)0)
FOO_UNARY(sinc, unary_float_op, FOO_UNARY_OP_SINC, (void)0)
// neg's meta function refuses bool before anything else (an expanded bool tensor's neg_ raises
// this, not the overlap error).
FOO_UNARY(neg, unary_op, FOO_UNARY_OP_NEG,
          TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool,
                                      "Negation, the `-` operator, on a bool tensor is not supported. If you are "
                                      "trying to invert a mask, use the `~` or `logical_not()` operator instead."))
FOO_UNARY(abs, unary_op, FOO_UNARY_OP_ABS, check_abs(self))
FOO_UNARY(sign, unary_op, FOO_UNARY_OP_SIGN, (void)0)
FOO_UNARY(sgn, unary_op, FOO_UNARY_OP_SGN, (void)0)
FOO_UNARY(floor, unary_op, FOO_UNARY_OP_FLOOR, check_not_bool(self, "floor_vml_cpu"))
FOO_UNARY(ceil, unary_op, FOO_UNARY_OP_CEIL, check_not_bool(self, "ceil_vml_cpu"))
FOO_UNARY(trunc, unary_op, FOO_UNARY_OP_TRUNC, check_not_bool(self, "trunc_vml_cpu"))
FOO_UNARY(frac, unary_op, FOO_UNARY_OP_FRAC, (void)0)
FOO_UNARY(round, unary_op, FOO_UNARY_OP_ROUND, check_not_bool(self, "round_vml_cpu"))
FOO_UNARY(bitwise_not, unary_op, FOO_UNARY_OP_BITWISE_NOT, (void)0)
FOO_UNARY(silu, unary_op, FOO_UNARY_OP_SILU, (void)0)
FOO_UNARY(mish, unary_op, FOO_UNARY_OP_MISH, (void)0)
FOO_UNARY(hardsigmoid, unary_op, FOO_UNARY_OP_HARDSIGMOID, (void)0)
FOO_UNARY(hardswish, unary_op, FOO_UNARY_OP_HARDSWISH, (void)0)
#undef FOO_UNARY

at::Tensor round_decimals(const at::Tensor& self, int64_t decimals) {
  check_round_decimals(self, decimals);
  at::Tensor out;
  auto it = ew::unary_op(out, self);
  return same(it, FOO_UNARY_OP_ROUND, {decimals});
}
at::Tensor& round_decimals_(at::Tensor& self, int64_t decimals) {
  check_round_decimals(self, decimals);
  auto it = ew::unary_op(self, self);
  same(it, FOO_UNARY_OP_ROUND, {decimals});
  return self;
}
at::Tensor& round_decimals_out(const at::Tensor& self, int64_t decimals, at::Tensor& out) {
  check_round_decimals(self, decimals);
  auto it = ew::unary_op(out, self);
  same(it, FOO_UNARY_OP_ROUND, {decimals});
  return out;
}

// ---- predicates -------------------------------------------------------------------------------
at::Tensor logical_not(const at::Tensor& self) {
  at::Tensor out;
  return predicate(out, self, FOO_UNARY_OP_LOGICAL_NOT);
}
at::Tensor& logical_not_(at::Tensor& self) {
  predicate(self, self, FOO_UNARY_OP_LOGICAL_NOT);
  return self;
}
at::Tensor& logical_not_out(const at::Tensor& self, at::Tensor& out) {
  predicate(out, self, FOO_UNARY_OP_LOGICAL_NOT);
  return out;
}
at::Tensor signbit(const at::Tensor& self) {
  TORCH_CHECK_NOT_IMPLEMENTED(!self.is_complex(), "signbit is not implemented for complex tensors.");
  at::Tensor out;
  return predicate(out, self, FOO_UNARY_OP_SIGNBIT);
}
at::Tensor& signbit_out(const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK_NOT_IMPLEMENTED(!self.is_complex(), "signbit is not implemented for complex tensors.");
  predicate(out, self, FOO_UNARY_OP_SIGNBIT);
  return out;
}
at::Tensor isnan(const at::Tensor& self) {
  at::Tensor out;
  return predicate(out, self, FOO_UNARY_OP_IS_NAN);
}
at::Tensor isinf(const at::Tensor& self) {
  at::Tensor out;
  return predicate(out, self, FOO_UNARY_OP_IS_INF);
}
at::Tensor isposinf(const at::Tensor& self) {
  TORCH_CHECK_TYPE(!self.is_complex(), "isposinf does not support complex inputs.");
  at::Tensor out;
  return predicate(out, self, FOO_UNARY_OP_IS_POS_INF);
}
at::Tensor& isposinf_out(const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK_TYPE(!self.is_complex(), "isposinf does not support complex inputs.");
  TORCH_CHECK(out.scalar_type() == at::kBool, "isposinf does not support non-boolean outputs.");
  predicate(out, self, FOO_UNARY_OP_IS_POS_INF);
  return out;
}
at::Tensor isneginf(const at::Tensor& self) {
  TORCH_CHECK_TYPE(!self.is_complex(), "isneginf does not support complex inputs.");
  at::Tensor out;
  return predicate(out, self, FOO_UNARY_OP_IS_NEG_INF);
}
at::Tensor& isneginf_out(const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK_TYPE(!self.is_complex(), "isneginf does not support complex inputs.");
  TORCH_CHECK(out.scalar_type() == at::kBool, "isneginf does not support non-boolean outputs.");
  predicate(out, self, FOO_UNARY_OP_IS_NEG_INF);
  return out;
}

// ---- activations with parameters ---------------------------------------------------------
at::Tensor relu(const at::Tensor& self) {
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  at::Tensor out;
  return activation(out, self, FOO_UNARY_OP_RELU);
}
at::Tensor& relu_(at::Tensor& self) {
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  activation(self, self, FOO_UNARY_OP_RELU);
  return self;
}

at::Tensor gelu(const at::Tensor& self, c10::string_view approximate) {
  at::Tensor out;
  return activation(out, self, FOO_UNARY_OP_GELU, {approximate_code(approximate)});
}
at::Tensor& gelu_(at::Tensor& self, c10::string_view approximate) {
  activation(self, self, FOO_UNARY_OP_GELU, {approximate_code(approximate)});
  return self;
}
at::Tensor& gelu_out(const at::Tensor& self, c10::string_view approximate, at::Tensor& out) {
  auto it = ew::unary_op(out, self);
  same(it, FOO_UNARY_OP_GELU, {approximate_code(approximate)});
  return out;
}

at::Tensor softplus(const at::Tensor& self, const c10::Scalar& beta, const c10::Scalar& threshold) {
  at::Tensor out;
  return activation(out, self, FOO_UNARY_OP_SOFTPLUS, {beta, threshold});
}
at::Tensor& softplus_out(const at::Tensor& self, const c10::Scalar& beta, const c10::Scalar& threshold, at::Tensor& out) {
  auto it = ew::unary_op(out, self);
  check_params_fit(it, {beta, threshold});
  same(it, FOO_UNARY_OP_SOFTPLUS, {beta, threshold});
  return out;
}
at::Tensor leaky_relu(const at::Tensor& self, const c10::Scalar& negative_slope) {
  at::Tensor out;
  return activation(out, self, FOO_UNARY_OP_LEAKY_RELU, {negative_slope});
}
at::Tensor& leaky_relu_(at::Tensor& self, const c10::Scalar& negative_slope) {
  activation(self, self, FOO_UNARY_OP_LEAKY_RELU, {negative_slope});
  return self;
}
at::Tensor& leaky_relu_out(const at::Tensor& self, const c10::Scalar& negative_slope, at::Tensor& out) {
  auto it = ew::unary_op(out, self);
  check_params_fit(it, {negative_slope});
  same(it, FOO_UNARY_OP_LEAKY_RELU, {negative_slope});
  return out;
}
at::Tensor elu(const at::Tensor& self, const c10::Scalar& alpha, const c10::Scalar& scale, const c10::Scalar& input_scale) {
  at::Tensor out;
  return activation(out, self, FOO_UNARY_OP_ELU, {alpha, scale, input_scale});
}
at::Tensor& elu_(at::Tensor& self, const c10::Scalar& alpha, const c10::Scalar& scale, const c10::Scalar& input_scale) {
  activation(self, self, FOO_UNARY_OP_ELU, {alpha, scale, input_scale});
  return self;
}
at::Tensor& elu_out(const at::Tensor& self, const c10::Scalar& alpha, const c10::Scalar& scale,
                    const c10::Scalar& input_scale, at::Tensor& out) {
  auto it = ew::unary_op(out, self);
  check_params_fit(it, {alpha, scale, input_scale});
  same(it, FOO_UNARY_OP_ELU, {alpha, scale, input_scale});
  return out;
}

// ---- clamp family -------------------------------------------------------------------------------

// ATen's range rule for clamp's scalar bounds: one that does not fit a float result dtype is an
// error; for an integer result, only a bound that no value can satisfy (a min above the dtype's
// range, a max below it) is, while one on the far side just clamps nothing.
void check_clamp_bound(const c10::Scalar& bound, at::ScalarType result, bool is_min) {
  if (!at::isIntegralType(result, true)) return check_scalar_fits(bound, result);
  double lowest = 0, highest = 0;
  AT_DISPATCH_V2(result, "clamp", AT_WRAP([&] {
    lowest = static_cast<double>(std::numeric_limits<scalar_t>::lowest());
    highest = static_cast<double>(std::numeric_limits<scalar_t>::max());
  }), AT_EXPAND(AT_INTEGRAL_TYPES), c10::kBool, c10::kUInt16, c10::kUInt32, c10::kUInt64);
  const double v = bound.toDouble();
  TORCH_CHECK(is_min ? v <= highest : v >= lowest, "Clamp ", is_min ? "min" : "max", " value ", v,
              " is outside the representable range of ", result);
}

// clamp's type promotion: bounds take part (clamp(int_tensor, 0.5) is float); in-place must
// not change the dtype.
at::Tensor clamp_into(at::Tensor& out, const at::Tensor& self, const std::optional<c10::Scalar>& min,
                      const std::optional<c10::Scalar>& max, bool inplace) {
  TORCH_CHECK(min.has_value() || max.has_value(), "torch.clamp: At least one of 'min' or 'max' must not be None");
  at::ScalarType result = self.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(!at::isComplexType(result), "clamp is not supported for complex types");
  if (!at::isFloatingType(result)) {
    at::native::ResultTypeState state{};
    state = at::native::update_result_type_state(self, state);
    if (min) state = at::native::update_result_type_state(*min, state);
    if (max) state = at::native::update_result_type_state(*max, state);
    result = at::native::result_type(state);
    TORCH_CHECK(result == self.scalar_type() || !inplace, "result type ", result,
                " can't be cast to the desired output type ", self.scalar_type());
  }
  TORCH_CHECK_NOT_IMPLEMENTED(!at::isComplexType(result), "clamp is not supported for complex types");
  if (min) check_clamp_bound(*min, result, true);
  if (max) check_clamp_bound(*max, result, false);
  const at::Tensor input = self.scalar_type() == result ? self : self.to(result);
  auto it = ew::unary_op(out, input);
  return ew::launch_unary_raw(it, FOO_UNARY_OP_CLAMP, it.common_dtype(), it.common_dtype(),
                              {min ? to_ffi(*min) : ew::absent(), max ? to_ffi(*max) : ew::absent()});
}

at::Tensor clamp(const at::Tensor& self, const std::optional<c10::Scalar>& min, const std::optional<c10::Scalar>& max) {
  at::Tensor out;
  return clamp_into(out, self, min, max, false);
}
at::Tensor& clamp_(at::Tensor& self, const std::optional<c10::Scalar>& min, const std::optional<c10::Scalar>& max) {
  clamp_into(self, self, min, max, true);
  return self;
}
at::Tensor& clamp_out(const at::Tensor& self, const std::optional<c10::Scalar>& min, const std::optional<c10::Scalar>& max,
                      at::Tensor& out) {
  clamp_into(out, self, min, max, false);
  return out;
}
at::Tensor clamp_min(const at::Tensor& self, const c10::Scalar& min) { return ops::clamp(self, min, std::nullopt); }
at::Tensor& clamp_min_(at::Tensor& self, const c10::Scalar& min) { return ops::clamp_(self, min, std::nullopt); }
at::Tensor& clamp_min_out(const at::Tensor& self, const c10::Scalar& min, at::Tensor& out) {
  return ops::clamp_out(self, min, std::nullopt, out);
}
at::Tensor clamp_max(const at::Tensor& self, const c10::Scalar& max) { return ops::clamp(self, std::nullopt, max); }
at::Tensor& clamp_max_(at::Tensor& self, const c10::Scalar& max) { return ops::clamp_(self, std::nullopt, max); }
at::Tensor& clamp_max_out(const at::Tensor& self, const c10::Scalar& max, at::Tensor& out) {
  return ops::clamp_out(self, std::nullopt, max, out);
}
// The CPU's hardtanh writes clamp's result into a tensor of the input's dtype: an integer input
// stays integer, clamped in float when a bound is a float and then truncated (hardtanh of int64
// [-3, 0, 5] to [-1.5, 2.5] is [-1, 0, 2]); clamp alone would return float32 or, in place, refuse.
void check_hardtanh(const at::Tensor& self) {
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool, "Bool inputs not supported for hardtanh");
}

at::Tensor hardtanh(const at::Tensor& self, const c10::Scalar& min_val, const c10::Scalar& max_val) {
  check_hardtanh(self);
  at::Tensor r = ops::clamp(self, min_val, max_val);
  return r.scalar_type() == self.scalar_type() ? r : r.to(self.scalar_type());
}
at::Tensor& hardtanh_(at::Tensor& self, const c10::Scalar& min_val, const c10::Scalar& max_val) {
  check_hardtanh(self);
  if (at::isIntegralType(self.scalar_type(), /*includeBool=*/false)) return self.copy_(ops::clamp(self, min_val, max_val));
  return ops::clamp_(self, min_val, max_val);
}
at::Tensor& hardtanh_out(const at::Tensor& self, const c10::Scalar& min_val, const c10::Scalar& max_val, at::Tensor& out) {
  check_hardtanh(self);
  return ops::clamp_out(self, min_val, max_val, out);
}

// ---- threshold: x <= threshold ? value : x (ReLU's general form) ------------------------------
void check_threshold(const at::Tensor& self) {
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool && !self.is_complex(),
                              "\"threshold_cpu\" not implemented for '", self.scalar_type(), "'");
}
// As the CPU kernel converts them: the threshold to the compute type, the value to the dtype.
void check_threshold_params(const at::TensorIterator& it, const c10::Scalar& threshold, const c10::Scalar& value) {
  check_scalar_fits_opmath(threshold, it.common_dtype());
  check_scalar_fits(value, it.common_dtype());
}

at::Tensor threshold(const at::Tensor& self, const c10::Scalar& threshold, const c10::Scalar& value) {
  check_threshold(self);
  at::Tensor out;
  auto it = ew::unary_op(out, self);
  check_threshold_params(it, threshold, value);
  return same(it, FOO_UNARY_OP_THRESHOLD, {threshold, value});
}
at::Tensor& threshold_(at::Tensor& self, const c10::Scalar& threshold, const c10::Scalar& value) {
  check_threshold(self);
  auto it = ew::unary_op(self, self);
  check_threshold_params(it, threshold, value);
  same(it, FOO_UNARY_OP_THRESHOLD, {threshold, value});
  return self;
}
at::Tensor& threshold_out(const at::Tensor& self, const c10::Scalar& threshold, const c10::Scalar& value,
                          at::Tensor& out) {
  check_threshold(self);
  auto it = ew::unary_op(out, self);
  check_threshold_params(it, threshold, value);
  same(it, FOO_UNARY_OP_THRESHOLD, {threshold, value});
  return out;
}

// ---- nan_to_num ------------------------------------------------------------------------------
at::Tensor nan_to_num_into(at::Tensor& out, const at::Tensor& self, std::optional<double> nan,
                           std::optional<double> posinf, std::optional<double> neginf) {
  if (self.is_complex()) needs_fallback("nan_to_num: no foo kernel for complex inputs");
  auto it = ew::unary_op(out, self);
  return ew::launch_unary_raw(it, FOO_UNARY_OP_NAN_TO_NUM, it.common_dtype(), it.common_dtype(),
                              {to_ffi(c10::Scalar(nan.value_or(0.0))), posinf ? to_ffi(c10::Scalar(*posinf)) : ew::absent(),
                               neginf ? to_ffi(c10::Scalar(*neginf)) : ew::absent()});
}

at::Tensor nan_to_num(const at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                      std::optional<double> neginf) {
  at::Tensor out;
  return nan_to_num_into(out, self, nan, posinf, neginf);
}
at::Tensor& nan_to_num_(at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                        std::optional<double> neginf) {
  nan_to_num_into(self, self, nan, posinf, neginf);
  return self;
}
at::Tensor& nan_to_num_out(const at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                           std::optional<double> neginf, at::Tensor& out) {
  nan_to_num_into(out, self, nan, posinf, neginf);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  FOO_IMPL(m, "exp", exp);
  FOO_IMPL(m, "exp_", exp_);
  FOO_IMPL(m, "exp.out", exp_out);
  FOO_IMPL(m, "exp2", exp2);
  FOO_IMPL(m, "exp2_", exp2_);
  FOO_IMPL(m, "exp2.out", exp2_out);
  FOO_IMPL(m, "expm1", expm1);
  FOO_IMPL(m, "expm1_", expm1_);
  FOO_IMPL(m, "expm1.out", expm1_out);
  FOO_IMPL(m, "sinc", sinc);
  FOO_IMPL(m, "sinc_", sinc_);
  FOO_IMPL(m, "sinc.out", sinc_out);
  FOO_IMPL(m, "log", log);
  FOO_IMPL(m, "log_", log_);
  FOO_IMPL(m, "log.out", log_out);
  FOO_IMPL(m, "log2", log2);
  FOO_IMPL(m, "log2_", log2_);
  FOO_IMPL(m, "log2.out", log2_out);
  FOO_IMPL(m, "log10", log10);
  FOO_IMPL(m, "log10_", log10_);
  FOO_IMPL(m, "log10.out", log10_out);
  FOO_IMPL(m, "log1p", log1p);
  FOO_IMPL(m, "log1p_", log1p_);
  FOO_IMPL(m, "log1p.out", log1p_out);
  FOO_IMPL(m, "sqrt", sqrt);
  FOO_IMPL(m, "sqrt_", sqrt_);
  FOO_IMPL(m, "sqrt.out", sqrt_out);
  FOO_IMPL(m, "rsqrt", rsqrt);
  FOO_IMPL(m, "rsqrt_", rsqrt_);
  FOO_IMPL(m, "rsqrt.out", rsqrt_out);
  FOO_IMPL(m, "reciprocal", reciprocal);
  FOO_IMPL(m, "reciprocal_", reciprocal_);
  FOO_IMPL(m, "reciprocal.out", reciprocal_out);
  FOO_IMPL(m, "sin", sin);
  FOO_IMPL(m, "sin_", sin_);
  FOO_IMPL(m, "sin.out", sin_out);
  FOO_IMPL(m, "cos", cos);
  FOO_IMPL(m, "cos_", cos_);
  FOO_IMPL(m, "cos.out", cos_out);
  FOO_IMPL(m, "tan", tan);
  FOO_IMPL(m, "tan_", tan_);
  FOO_IMPL(m, "tan.out", tan_out);
  FOO_IMPL(m, "tanh", tanh);
  FOO_IMPL(m, "tanh_", tanh_);
  FOO_IMPL(m, "tanh.out", tanh_out);
  FOO_IMPL(m, "asin", asin);
  FOO_IMPL(m, "asin_", asin_);
  FOO_IMPL(m, "asin.out", asin_out);
  FOO_IMPL(m, "acos", acos);
  FOO_IMPL(m, "acos_", acos_);
  FOO_IMPL(m, "acos.out", acos_out);
  FOO_IMPL(m, "atan", atan);
  FOO_IMPL(m, "atan_", atan_);
  FOO_IMPL(m, "atan.out", atan_out);
  FOO_IMPL(m, "sinh", sinh);
  FOO_IMPL(m, "sinh_", sinh_);
  FOO_IMPL(m, "sinh.out", sinh_out);
  FOO_IMPL(m, "cosh", cosh);
  FOO_IMPL(m, "cosh_", cosh_);
  FOO_IMPL(m, "cosh.out", cosh_out);
  FOO_IMPL(m, "asinh", asinh);
  FOO_IMPL(m, "asinh_", asinh_);
  FOO_IMPL(m, "asinh.out", asinh_out);
  FOO_IMPL(m, "acosh", acosh);
  FOO_IMPL(m, "acosh_", acosh_);
  FOO_IMPL(m, "acosh.out", acosh_out);
  FOO_IMPL(m, "atanh", atanh);
  FOO_IMPL(m, "atanh_", atanh_);
  FOO_IMPL(m, "atanh.out", atanh_out);
  FOO_IMPL(m, "sigmoid", sigmoid);
  FOO_IMPL(m, "sigmoid_", sigmoid_);
  FOO_IMPL(m, "sigmoid.out", sigmoid_out);
  FOO_IMPL(m, "erf", erf);
  FOO_IMPL(m, "erf_", erf_);
  FOO_IMPL(m, "erf.out", erf_out);
  FOO_IMPL(m, "erfc", erfc);
  FOO_IMPL(m, "erfinv", erfinv);
  FOO_IMPL(m, "erfinv_", erfinv_);
  FOO_IMPL(m, "erfinv.out", erfinv_out);
  FOO_IMPL(m, "erfc_", erfc_);
  FOO_IMPL(m, "erfc.out", erfc_out);
  FOO_IMPL(m, "neg", neg);
  FOO_IMPL(m, "neg_", neg_);
  FOO_IMPL(m, "neg.out", neg_out);
  FOO_IMPL(m, "abs", abs);
  FOO_IMPL(m, "abs_", abs_);
  FOO_IMPL(m, "abs.out", abs_out);
  FOO_IMPL(m, "sign", sign);
  FOO_IMPL(m, "sign_", sign_);
  FOO_IMPL(m, "sign.out", sign_out);
  FOO_IMPL(m, "sgn", sgn);
  FOO_IMPL(m, "sgn_", sgn_);
  FOO_IMPL(m, "sgn.out", sgn_out);
  FOO_IMPL(m, "floor", floor);
  FOO_IMPL(m, "floor_", floor_);
  FOO_IMPL(m, "floor.out", floor_out);
  FOO_IMPL(m, "ceil", ceil);
  FOO_IMPL(m, "ceil_", ceil_);
  FOO_IMPL(m, "ceil.out", ceil_out);
  FOO_IMPL(m, "trunc", trunc);
  FOO_IMPL(m, "trunc_", trunc_);
  FOO_IMPL(m, "trunc.out", trunc_out);
  FOO_IMPL(m, "frac", frac);
  FOO_IMPL(m, "frac_", frac_);
  FOO_IMPL(m, "frac.out", frac_out);
  FOO_IMPL(m, "round", round);
  FOO_IMPL(m, "round_", round_);
  FOO_IMPL(m, "round.out", round_out);
  FOO_IMPL(m, "bitwise_not", bitwise_not);
  FOO_IMPL(m, "bitwise_not_", bitwise_not_);
  FOO_IMPL(m, "bitwise_not.out", bitwise_not_out);
  FOO_IMPL(m, "silu", silu);
  FOO_IMPL(m, "silu_", silu_);
  FOO_IMPL(m, "silu.out", silu_out);
  FOO_IMPL(m, "mish", mish);
  FOO_IMPL(m, "mish_", mish_);
  FOO_IMPL(m, "mish.out", mish_out);
  FOO_IMPL(m, "hardsigmoid", hardsigmoid);
  FOO_IMPL(m, "hardsigmoid_", hardsigmoid_);
  FOO_IMPL(m, "hardsigmoid.out", hardsigmoid_out);
  FOO_IMPL(m, "hardswish", hardswish);
  FOO_IMPL(m, "hardswish_", hardswish_);
  FOO_IMPL(m, "hardswish.out", hardswish_out);
  FOO_IMPL(m, "logical_not", logical_not);
  FOO_IMPL(m, "logical_not_", logical_not_);
  FOO_IMPL(m, "logical_not.out", logical_not_out);
  FOO_IMPL(m, "round.decimals", round_decimals);
  FOO_IMPL(m, "round_.decimals", round_decimals_);
  FOO_IMPL(m, "round.decimals_out", round_decimals_out);
  FOO_IMPL(m, "signbit", signbit);
  FOO_IMPL(m, "signbit.out", signbit_out);
  FOO_IMPL(m, "isnan", isnan);
  FOO_IMPL(m, "isinf", isinf);
  FOO_IMPL(m, "isposinf", isposinf);
  FOO_IMPL(m, "isposinf.out", isposinf_out);
  FOO_IMPL(m, "isneginf", isneginf);
  FOO_IMPL(m, "isneginf.out", isneginf_out);
  FOO_IMPL(m, "relu", relu);
  FOO_IMPL(m, "relu_", relu_);
  FOO_IMPL(m, "gelu", gelu);
  FOO_IMPL(m, "gelu_", gelu_);
  FOO_IMPL(m, "gelu.out", gelu_out);
  FOO_IMPL(m, "leaky_relu", leaky_relu);
  FOO_IMPL(m, "leaky_relu_", leaky_relu_);
  FOO_IMPL(m, "leaky_relu.out", leaky_relu_out);
  FOO_IMPL(m, "elu", elu);
  FOO_IMPL(m, "elu_", elu_);
  FOO_IMPL(m, "elu.out", elu_out);
  FOO_IMPL(m, "hardtanh", hardtanh);
  FOO_IMPL(m, "hardtanh_", hardtanh_);
  FOO_IMPL(m, "hardtanh.out", hardtanh_out);
  FOO_IMPL(m, "clamp", clamp);
  FOO_IMPL(m, "clamp_", clamp_);
  FOO_IMPL(m, "clamp.out", clamp_out);
  FOO_IMPL(m, "clamp_min", clamp_min);
  FOO_IMPL(m, "clamp_min_", clamp_min_);
  FOO_IMPL(m, "clamp_min.out", clamp_min_out);
  FOO_IMPL(m, "clamp_max", clamp_max);
  FOO_IMPL(m, "clamp_max_", clamp_max_);
  FOO_IMPL(m, "clamp_max.out", clamp_max_out);
  FOO_IMPL(m, "threshold", threshold);
  FOO_IMPL(m, "threshold_", threshold_);
  FOO_IMPL(m, "threshold.out", threshold_out);
  FOO_IMPL(m, "nan_to_num", nan_to_num);
  FOO_IMPL(m, "nan_to_num_", nan_to_num_);
  FOO_IMPL(m, "nan_to_num.out", nan_to_num_out);
  FOO_IMPL(m, "softplus", softplus);
  FOO_IMPL(m, "softplus.out", softplus_out);
}

}  // namespace foo::ops
