// Binary elementwise ops: TensorIterator builds the metadata (broadcasting, type promotion,
// output allocation) exactly as ATen's CPU kernels do; Rust computes (foo_binary).
#include <ATen/ExpandUtils.h>
#include <ATen/ScalarOps.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <optional>

#include "elementwise.h"

namespace foo::ops {
namespace {

using at::TensorIterator;

const at::Tensor& same(TensorIterator& it, int32_t op, std::initializer_list<c10::Scalar> params = {}) {
  const auto dt = it.common_dtype();
  return ew::launch_binary(it, op, dt, dt, dt, params);
}

// Comparisons and logical ops read both inputs in their common dtype and write bool.
const at::Tensor& compare(TensorIterator& it, int32_t op) {
  const auto dt = it.common_dtype();
  return ew::launch_binary(it, op, at::kBool, dt, dt);
}

void check_integral_or_bool(const at::Tensor& a, const at::Tensor& b, const char* name) {
  TORCH_CHECK_NOT_IMPLEMENTED(!at::isFloatingType(a.scalar_type()) && !at::isComplexType(a.scalar_type()) &&
                  !at::isFloatingType(b.scalar_type()) && !at::isComplexType(b.scalar_type()),
              "\"", name, "\" not implemented for '", at::isFloatingType(a.scalar_type()) || at::isComplexType(a.scalar_type()) ? a.scalar_type() : b.scalar_type(), "'");
}

// hypot has float kernels only, and (unlike atan2) does not promote integers to float.
void check_hypot(const at::Tensor& a, const at::Tensor& b) {
  (void)at::infer_size(a.sizes(), b.sizes());  // the CPU reports mismatched shapes first
  const auto dt = at::result_type(a, b);
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(dt), "\"hypot_cpu\" not implemented for '", dt, "'");
}

// The CPU's classes: a TypeError for maximum/minimum/fmax/fmin ...
void check_not_complex(const at::Tensor& a, const at::Tensor& b, const char* name) {
  TORCH_CHECK_TYPE(!a.is_complex() && !b.is_complex(), name, " not implemented for complex tensors.");
}

// ... and a NotImplementedError naming the CPU kernel for the real-only arithmetic (fmod, remainder).
void check_real_kernel(const at::Tensor& a, const at::Tensor& b, const char* cpu_kernel) {
  const at::Tensor& c = a.is_complex() ? a : b;
  TORCH_CHECK_NOT_IMPLEMENTED(!c.is_complex(), "\"", cpu_kernel, "\" not implemented for '", c.scalar_type(), "'");
}

// The CPU has a complex kernel; foo has none: the counted CPU fallback runs it.
void fallback_if_complex(const at::Tensor& a, const at::Tensor& b, const char* name) {
  if (a.is_complex() || b.is_complex()) needs_fallback(std::string(name) + ": no foo kernel for complex inputs");
}

// ---- add / sub ---------------------------------------------------------------------------------
// The checks of add's and sub's alpha against their dtype.
void check_alpha(at::ScalarType dtype, const c10::Scalar& alpha) {
  at::native::alpha_check(dtype, alpha);
  check_scalar_fits(alpha, dtype);
}

at::Tensor add(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  at::Tensor out;
  if (ew::dense_operands(false, out, self, &other)) {
    check_alpha(self.scalar_type(), alpha);
    ew::dense_binary(out, FOO_BINARY_OP_ADD, self, other, {alpha});
    return out;
  }
  auto it = ew::binary_op(out, self, other);
  check_alpha(it.common_dtype(), alpha);
  return same(it, FOO_BINARY_OP_ADD, {alpha});
}
at::Tensor& add_(at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  if (ew::dense_operands(false, self, self, &other)) {
    check_alpha(self.scalar_type(), alpha);
    ew::dense_binary(self, FOO_BINARY_OP_ADD, self, other, {alpha});
    return self;
  }
  auto it = ew::binary_op(self, self, other);
  check_alpha(it.common_dtype(), alpha);
  same(it, FOO_BINARY_OP_ADD, {alpha});
  return self;
}
at::Tensor& add_out(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha, at::Tensor& out) {
  auto it = ew::binary_op(out, self, other);
  check_alpha(it.common_dtype(), alpha);
  same(it, FOO_BINARY_OP_ADD, {alpha});
  return out;
}
at::Tensor sub(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  at::native::sub_check(self, other);
  at::Tensor out;
  if (ew::dense_operands(false, out, self, &other)) {
    check_alpha(self.scalar_type(), alpha);
    ew::dense_binary(out, FOO_BINARY_OP_SUB, self, other, {alpha});
    return out;
  }
  auto it = ew::binary_op(out, self, other);
  check_alpha(it.common_dtype(), alpha);
  return same(it, FOO_BINARY_OP_SUB, {alpha});
}
at::Tensor& sub_(at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  at::native::sub_check(self, other);
  if (ew::dense_operands(false, self, self, &other)) {
    check_alpha(self.scalar_type(), alpha);
    ew::dense_binary(self, FOO_BINARY_OP_SUB, self, other, {alpha});
    return self;
  }
  auto it = ew::binary_op(self, self, other);
  check_alpha(it.common_dtype(), alpha);
  same(it, FOO_BINARY_OP_SUB, {alpha});
  return self;
}
at::Tensor& sub_out(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha, at::Tensor& out) {
  at::native::sub_check(self, other);
  auto it = ew::binary_op(out, self, other);
  check_alpha(it.common_dtype(), alpha);
  same(it, FOO_BINARY_OP_SUB, {alpha});
  return out;
}

// rsub(self, other, alpha) = other - alpha * self (ATen's rsub is this call).
at::Tensor rsub(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  return ops::sub(other, self, alpha);
}

// ---- generic binary ops: functional and out variants (FOO_BINARY2), plus in-place (FOO_BINARY) ---
// `meta_checks` run first, as ATen's structured meta functions check (maximum's complex inputs);
// `kernel_checks` after the iterator's shape and dtype checks, as the CPU's kernels raise after
// their meta functions (a complex remainder of mismatched shapes is the shape's RuntimeError
// there, not NotImplementedError).
#define FOO_BINARY2_CHECKED(name, builder, code, meta_checks, kernel_checks)                   \
  at::Tensor name(const at::Tensor& self, const at::Tensor& other) {                         \
    meta_checks;                                                                             \
    at::Tensor out;                                                                          \
    if (ew::dense_operands(FOO_FLOAT_OP_##builder, out, self, &other)) {                     \
      kernel_checks;                                                                         \
      ew::dense_binary(out, code, self, other);                                              \
      return out;                                                                            \
    }                                                                                        \
    auto it = ew::builder(out, self, other);                                                 \
    kernel_checks;                                                                           \
    return same(it, code);                                                                   \
  }                                                                                          \
  at::Tensor& name##_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) { \
    meta_checks;                                                                             \
    auto it = ew::builder(out, self, other);                                                 \
    kernel_checks;                                                                           \
    same(it, code);                                                                          \
    return out;                                                                              \
  }
#define FOO_BINARY2(name, builder, code, kernel_checks) \
  FOO_BINARY2_CHECKED(name, builder, code, (void)0, kernel_checks)
#define FOO_BINARY2_META(name, builder, code, meta_checks) \
  FOO_BINARY2_CHECKED(name, builder, code, meta_checks, (void)0)

#define FOO_BINARY(name, builder, code, checks)                                              \
  FOO_BINARY2(name, builder, code, checks)                                                   \
  at::Tensor& name##_(at::Tensor& self, const at::Tensor& other) {                           \
    if (ew::dense_operands(FOO_FLOAT_OP_##builder, self, self, &other)) {                    \
      checks;                                                                                \
      ew::dense_binary(self, code, self, other);                                             \
      return self;                                                                           \
    }                                                                                        \
    auto it = ew::builder(self, self, other);                                                \
    checks;                                                                                  \
    same(it, code);                                                                          \
    return self;                                                                             \
  }

FOO_BINARY(mul, binary_op, FOO_BINARY_OP_MUL, (void)0)
FOO_BINARY(floor_divide, binary_op, FOO_BINARY_OP_DIV_FLOOR, (void)0)
FOO_BINARY(div, binary_float_op, FOO_BINARY_OP_DIV, (void)0)
FOO_BINARY(remainder, binary_op, FOO_BINARY_OP_REMAINDER, check_real_kernel(self, other, "remainder_cpu"))
FOO_BINARY(fmod, binary_op, FOO_BINARY_OP_FMOD, check_real_kernel(self, other, "fmod_cpu"))
// Tensor ** tensor has no bool kernel on the CPU (a Python bool exponent does: pow_scalar_exp).
FOO_BINARY(pow, binary_op, FOO_BINARY_OP_POW,
           TORCH_CHECK_NOT_IMPLEMENTED(at::result_type(self, other) != at::kBool,
                                       "\"pow\" not implemented for 'Bool'"))
FOO_BINARY(atan2, binary_float_op, FOO_BINARY_OP_ATAN2, (void)0)
FOO_BINARY(hypot, binary_float_op, FOO_BINARY_OP_HYPOT, check_hypot(self, other))
FOO_BINARY(copysign, binary_float_op, FOO_BINARY_OP_COPYSIGN, (void)0)
FOO_BINARY(xlogy, binary_float_op, FOO_BINARY_OP_XLOGY, (void)0)
FOO_BINARY(bitwise_and, binary_op, FOO_BINARY_OP_BIT_AND, check_integral_or_bool(self, other, "bitwise_and_cpu"))
FOO_BINARY(bitwise_or, binary_op, FOO_BINARY_OP_BIT_OR, check_integral_or_bool(self, other, "bitwise_or_cpu"))
FOO_BINARY(bitwise_xor, binary_op, FOO_BINARY_OP_BIT_XOR, check_integral_or_bool(self, other, "bitwise_xor_cpu"))
FOO_BINARY(bitwise_left_shift, binary_op, FOO_BINARY_OP_SHL, check_integral_or_bool(self, other, "lshift_cpu"))
FOO_BINARY(bitwise_right_shift, binary_op, FOO_BINARY_OP_SHR, check_integral_or_bool(self, other, "rshift_cpu"))
#undef FOO_BINARY

at::Tensor lshift(const at::Tensor& self, const at::Tensor& other) { return ops::bitwise_left_shift(self, other); }
at::Tensor& ilshift(at::Tensor& self, const at::Tensor& other) { return ops::bitwise_left_shift_(self, other); }
at::Tensor rshift(const at::Tensor& self, const at::Tensor& other) { return ops::bitwise_right_shift(self, other); }
at::Tensor& irshift(at::Tensor& self, const at::Tensor& other) { return ops::bitwise_right_shift_(self, other); }
// The Scalar overloads (`t >> 3`) shift by a wrapped scalar, as CPU's do.
at::Tensor lshift_scalar(const at::Tensor& self, const c10::Scalar& other) {
  return ops::bitwise_left_shift(self, at::native::wrapped_scalar_tensor(other));
}
at::Tensor& ilshift_scalar(at::Tensor& self, const c10::Scalar& other) {
  return ops::bitwise_left_shift_(self, at::native::wrapped_scalar_tensor(other));
}
at::Tensor rshift_scalar(const at::Tensor& self, const c10::Scalar& other) {
  return ops::bitwise_right_shift(self, at::native::wrapped_scalar_tensor(other));
}
at::Tensor& irshift_scalar(at::Tensor& self, const c10::Scalar& other) {
  return ops::bitwise_right_shift_(self, at::native::wrapped_scalar_tensor(other));
}

// ---- binary ops without an in-place variant -------------------------------------------------------
FOO_BINARY2_META(maximum, binary_op, FOO_BINARY_OP_MAXIMUM, check_not_complex(self, other, "maximum"))
FOO_BINARY2_META(minimum, binary_op, FOO_BINARY_OP_MINIMUM, check_not_complex(self, other, "minimum"))
FOO_BINARY2_META(fmax, binary_op, FOO_BINARY_OP_FMAX, check_not_complex(self, other, "fmax"))

// ---- clamp with tensor bounds -------------------------------------------------------------------
// As ATen: a lone bound is maximum/minimum (clamp_min/clamp_max.Tensor use those kernels); both
// bounds are minimum(maximum(x, min), max) in their common dtype, which is the CPU kernel's
// rule too (a NaN input or bound gives NaN).
void check_clamp(const at::Tensor& self) {
  TORCH_CHECK_NOT_IMPLEMENTED(!at::isComplexType(self.scalar_type()), "clamp is not supported for complex types");
}
at::Tensor& clamp_both(at::Tensor& out, const at::Tensor& self, const at::Tensor& min, const at::Tensor& max) {
  auto it = at::TensorIteratorConfig()
                .set_check_mem_overlap(true)
                .add_output(out)
                .add_const_input(self)
                .add_const_input(min)
                .add_const_input(max)
                .promote_inputs_to_common_dtype(true)
                .cast_common_dtype_to_outputs(true)
                .enforce_safe_casting_to_output(true)
                .build();
  const auto dt = it.common_dtype();
  TORCH_CHECK_NOT_IMPLEMENTED(dt != at::kBool, "\"clamp_cpu\" not implemented for 'Bool'");
  if (!out.defined()) out = it.output();
  const at::Tensor low = ops::maximum(self.to(dt), min.to(dt));
  ops::minimum_out(low, max.to(dt), out);
  return out;
}

at::Tensor& clamp_tensor_out(const at::Tensor& self, const std::optional<at::Tensor>& min,
                             const std::optional<at::Tensor>& max, at::Tensor& out) {
  TORCH_CHECK(min.has_value() || max.has_value(), "torch.clamp: At least one of 'min' or 'max' must not be None");
  check_clamp(self);
  if (min && max) return clamp_both(out, self, *min, *max);
  return min ? ops::maximum_out(self, *min, out) : ops::minimum_out(self, *max, out);
}
at::Tensor clamp_tensor(const at::Tensor& self, const std::optional<at::Tensor>& min,
                        const std::optional<at::Tensor>& max) {
  TORCH_CHECK(min.has_value() || max.has_value(), "torch.clamp: At least one of 'min' or 'max' must not be None");
  check_clamp(self);
  at::Tensor out;
  if (min && max) return clamp_both(out, self, *min, *max);
  return min ? ops::maximum(self, *min) : ops::minimum(self, *max);
}
at::Tensor& clamp_tensor_(at::Tensor& self, const std::optional<at::Tensor>& min, const std::optional<at::Tensor>& max) {
  return ops::clamp_tensor_out(self, min, max, self);
}
at::Tensor clamp_min_tensor(const at::Tensor& self, const at::Tensor& min) { return ops::clamp_tensor(self, min, std::nullopt); }
at::Tensor& clamp_min_tensor_(at::Tensor& self, const at::Tensor& min) { return ops::clamp_tensor_(self, min, std::nullopt); }
at::Tensor& clamp_min_tensor_out(const at::Tensor& self, const at::Tensor& min, at::Tensor& out) {
  return ops::clamp_tensor_out(self, min, std::nullopt, out);
}
at::Tensor clamp_max_tensor(const at::Tensor& self, const at::Tensor& max) { return ops::clamp_tensor(self, std::nullopt, max); }
at::Tensor& clamp_max_tensor_(at::Tensor& self, const at::Tensor& max) { return ops::clamp_tensor_(self, std::nullopt, max); }
at::Tensor& clamp_max_tensor_out(const at::Tensor& self, const at::Tensor& max, at::Tensor& out) {
  return ops::clamp_tensor_out(self, std::nullopt, max, out);
}
FOO_BINARY2_META(fmin, binary_op, FOO_BINARY_OP_FMIN, check_not_complex(self, other, "fmin"))
FOO_BINARY2(logaddexp, binary_op, FOO_BINARY_OP_LOG_ADD_EXP, fallback_if_complex(self, other, "logaddexp"))
#undef FOO_BINARY2
#undef FOO_BINARY2_META
#undef FOO_BINARY2_CHECKED

// ---- division with a rounding mode ---------------------------------------------------------------
at::Tensor div_mode_into(at::Tensor& out, const at::Tensor& self, const at::Tensor& other,
                         std::optional<c10::string_view> mode) {
  if (!mode.has_value()) {
    auto it = ew::binary_float_op(out, self, other);
    return same(it, FOO_BINARY_OP_DIV);
  }
  const bool trunc = *mode == "trunc";
  TORCH_CHECK(trunc || *mode == "floor",
              "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '", *mode, "'");
  auto it = ew::binary_op(out, self, other);
  TORCH_CHECK_NOT_IMPLEMENTED(it.common_dtype() != at::kBool, "\"div_", *mode, "_cpu\" not implemented for 'Bool'");
  return same(it, trunc ? FOO_BINARY_OP_DIV_TRUNC : FOO_BINARY_OP_DIV_FLOOR);
}

at::Tensor div_mode(const at::Tensor& self, const at::Tensor& other, std::optional<c10::string_view> rounding_mode) {
  at::Tensor out;
  return div_mode_into(out, self, other, rounding_mode);
}
at::Tensor& div_mode_(at::Tensor& self, const at::Tensor& other, std::optional<c10::string_view> rounding_mode) {
  div_mode_into(self, self, other, rounding_mode);
  return self;
}
at::Tensor& div_mode_out(const at::Tensor& self, const at::Tensor& other, std::optional<c10::string_view> rounding_mode,
                         at::Tensor& out) {
  div_mode_into(out, self, other, rounding_mode);
  return out;
}

// ---- pow with a scalar exponent or base -------------------------------------------------------------
void check_int_pow(const at::Tensor& self, const c10::Scalar& exponent) {
  if (at::isIntegralType(self.scalar_type(), /*includeBool=*/true) && exponent.isIntegral(/*includeBool=*/true)) {
    TORCH_CHECK(exponent.toLong() >= 0, "Integers to negative integer powers are not allowed.");
  }
}

// The CPU's pow with a float32, float64 or bfloat16 tensor and a scalar exponent computes these
// exponents another way than pow() (PowKernel.cpp), and so do we, for its bits: 0.5, -0.5 and -1
// as sqrt, rsqrt and reciprocal (rsqrt(-0.0) is -inf, pow's +inf); 2, 3 and -2 as products in the
// tensor's dtype, each product rounded (bfloat16 x**3 is (x*x)*x, not x cubed rounded once).
// float16 takes pow() for every exponent.
std::optional<at::Tensor> pow_special(const at::Tensor& self, const c10::Scalar& exponent) {
  const auto st = self.scalar_type();
  // float16's pow is std::pow per element on the CPU, which only the square matches bit for bit:
  // a float16 square is exact in float32 (relu's and square's 1.8x the CPU's time through pow).
  if (st == at::kHalf && !exponent.isComplex() && !exponent.isBoolean() && exponent.toDouble() == 2.0) {
    return at::mul(self, self);
  }
  if (st != at::kFloat && st != at::kDouble && st != at::kBFloat16) return std::nullopt;
  if (exponent.isComplex() || exponent.isBoolean()) return std::nullopt;
  const double e = exponent.toDouble();
  if (e == 0.5) return at::sqrt(self);
  if (e == -0.5) return at::rsqrt(self);
  if (e == -1.0) return at::reciprocal(self);
  if (e == 2.0) return at::mul(self, self);
  if (e == 3.0) {
    // One pass (two products had written and read back a temporary: 2.6x the CPU's time).
    at::Tensor out;
    if (ew::dense_operands(FOO_FLOAT_OP_unary_op, out, self)) {
      ew::dense_unary(out, FOO_UNARY_OP_CUBE, self);
      return out;
    }
    auto it = ew::unary_op(out, self);
    return ew::launch_unary(it, FOO_UNARY_OP_CUBE, it.common_dtype(), it.common_dtype());
  }
  if (e == -2.0) return at::reciprocal(at::mul(self, self));
  return std::nullopt;
}

// The CPU's pow takes a float32/complex64 tensor's scalar exponent as a double (x ** 1e300 is 0 or
// inf), while half, bfloat16 and integer tensors refuse an exponent their dtype cannot hold.
void check_pow_exponent(const c10::Scalar& exponent, at::ScalarType common) {
  if (common != at::kFloat && common != at::kComplexFloat) check_scalar_fits(exponent, common);
}

// ATen's pow with a scalar exponent fills ones for an exponent of 0 and copies the base for 1
// (Pow.cpp, before any kernel): the same bits for every dtype (nan ** 0 is 1), and no pow() per
// element, which autograd's backward of x ** 2 (x ** 1) would otherwise run.
const at::Tensor& pow_tensor_scalar(TensorIterator& it, const at::Tensor& self, const c10::Scalar& exponent) {
  const at::Tensor& out = it.output();
  if (exponent.equal(0.0) || exponent.equal(false)) {
    out.fill_(1);
    return out;
  }
  if (exponent.equal(1.0) || exponent.equal(true)) {
    out.copy_(self);
    return out;
  }
  return same(it, FOO_BINARY_OP_POW);
}

at::Tensor pow_scalar_exp(const at::Tensor& self, const c10::Scalar& exponent) {
  check_int_pow(self, exponent);
  if (auto r = pow_special(self, exponent)) return *r;
  at::Tensor out;
  if (at::result_type(self, exponent) == self.scalar_type()) {
    // ATen's meta function lays the result out as a unary op over the base, which differs from
    // a binary op with a wrapped scalar in the strides of size-1 dims.
    out = ew::unary_op(out, self).output();
  }
  const auto e = at::native::wrapped_scalar_tensor(exponent);
  auto it = ew::binary_op(out, self, e);
  check_pow_exponent(exponent, it.common_dtype());
  return pow_tensor_scalar(it, self, exponent);
}
at::Tensor& pow_scalar_exp_(at::Tensor& self, const c10::Scalar& exponent) {
  check_int_pow(self, exponent);
  if (auto r = pow_special(self, exponent)) return self.copy_(*r);
  const auto e = at::native::wrapped_scalar_tensor(exponent);
  auto it = ew::binary_op(self, self, e);
  check_pow_exponent(exponent, it.common_dtype());
  pow_tensor_scalar(it, self, exponent);
  return self;
}
at::Tensor& pow_scalar_exp_out(const at::Tensor& self, const c10::Scalar& exponent, at::Tensor& out) {
  check_int_pow(self, exponent);
  if (out.scalar_type() == self.scalar_type() && out.device() == self.device()) {
    if (auto r = pow_special(self, exponent)) {
      at::native::resize_output(out, r->sizes());
      return out.copy_(*r);
    }
  }
  const auto e = at::native::wrapped_scalar_tensor(exponent);
  auto it = ew::binary_op(out, self, e);
  check_pow_exponent(exponent, it.common_dtype());
  pow_tensor_scalar(it, self, exponent);
  return out;
}
at::Tensor pow_scalar_base(const c10::Scalar& self, const at::Tensor& exponent) {
  // The CPU's result is contiguous whatever the exponent's layout (its meta function gives no strides).
  const auto dtype = at::result_type(self, exponent);
  TORCH_CHECK_NOT_IMPLEMENTED(dtype != at::kBool, "\"pow\" not implemented for 'Bool'");
  at::Tensor out = at::empty(exponent.sizes(), exponent.options().dtype(dtype));
  const auto b = at::native::wrapped_scalar_tensor(self);
  auto it = ew::binary_op(out, b, exponent);
  return same(it, FOO_BINARY_OP_POW);
}
at::Tensor& pow_scalar_base_out(const c10::Scalar& self, const at::Tensor& exponent, at::Tensor& out) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::result_type(self, exponent) != at::kBool, "\"pow\" not implemented for 'Bool'");
  const auto b = at::native::wrapped_scalar_tensor(self);
  auto it = ew::binary_op(out, b, exponent);
  same(it, FOO_BINARY_OP_POW);
  return out;
}

// ---- comparisons and logical ops (bool results) ------------------------------------------------------
// Functional, in-place and out variants of an op with a bool result (comparisons, logical ops).
#define FOO_BOOL_BINARY(name, code)                                                                  \
  at::Tensor name(const at::Tensor& self, const at::Tensor& other) {                                 \
    at::Tensor out;                                                                                  \
    auto it = ew::comparison_op(out, self, other);                                                   \
    return compare(it, code);                                                                        \
  }                                                                                                  \
  at::Tensor& name##_(at::Tensor& self, const at::Tensor& other) {                                   \
    auto it = ew::comparison_op(self, self, other);                                                  \
    compare(it, code);                                                                               \
    return self;                                                                                     \
  }                                                                                                  \
  at::Tensor& name##_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {         \
    auto it = ew::comparison_op(out, self, other);                                                   \
    compare(it, code);                                                                               \
    return out;                                                                                      \
  }

// Comparisons also take a Scalar `other`.
#define FOO_COMPARE(name, code)                                                                      \
  FOO_BOOL_BINARY(name, code)                                                                        \
  at::Tensor name##_scalar(const at::Tensor& self, const c10::Scalar& other) {                       \
    return ops::name(self, at::native::wrapped_scalar_tensor(other));                                \
  }                                                                                                  \
  at::Tensor& name##_scalar_(at::Tensor& self, const c10::Scalar& other) {                           \
    return ops::name##_(self, at::native::wrapped_scalar_tensor(other));                             \
  }                                                                                                  \
  at::Tensor& name##_scalar_out(const at::Tensor& self, const c10::Scalar& other, at::Tensor& out) { \
    return ops::name##_out(self, at::native::wrapped_scalar_tensor(other), out);                     \
  }

FOO_COMPARE(eq, FOO_BINARY_OP_EQ)
FOO_COMPARE(ne, FOO_BINARY_OP_NE)
FOO_COMPARE(lt, FOO_BINARY_OP_LT)
FOO_COMPARE(le, FOO_BINARY_OP_LE)
FOO_COMPARE(gt, FOO_BINARY_OP_GT)
FOO_COMPARE(ge, FOO_BINARY_OP_GE)
#undef FOO_COMPARE

FOO_BOOL_BINARY(logical_and, FOO_BINARY_OP_LOGICAL_AND)
FOO_BOOL_BINARY(logical_or, FOO_BINARY_OP_LOGICAL_OR)
FOO_BOOL_BINARY(logical_xor, FOO_BINARY_OP_LOGICAL_XOR)
#undef FOO_BOOL_BINARY

// ---- activation backward ---------------------------------------------------------------------------
#define FOO_BACKWARD(name, code, params, ...)                                                        \
  at::Tensor name(const at::Tensor& grad, const at::Tensor& saved __VA_OPT__(, ) __VA_ARGS__) {      \
    at::Tensor out;                                                                                  \
    auto it = ew::binary_op(out, grad, saved);                                                       \
    return same(it, code, params);                                                                   \
  }                                                                                                  \
  at::Tensor& name##_out(const at::Tensor& grad, const at::Tensor& saved __VA_OPT__(, ) __VA_ARGS__, \
                         at::Tensor& grad_input) {                                                   \
    auto it = ew::binary_op(grad_input, grad, saved);                                                \
    same(it, code, params);                                                                          \
    return grad_input;                                                                               \
  }

#define FOO_NO_PARAMS {}
#define FOO_PARAMS(...) {__VA_ARGS__}
FOO_BACKWARD(threshold_backward, FOO_BINARY_OP_THRESHOLD_BACKWARD, {threshold}, const c10::Scalar& threshold)
FOO_BACKWARD(sigmoid_backward, FOO_BINARY_OP_SIGMOID_BACKWARD, FOO_NO_PARAMS)
FOO_BACKWARD(tanh_backward, FOO_BINARY_OP_TANH_BACKWARD, FOO_NO_PARAMS)
FOO_BACKWARD(silu_backward, FOO_BINARY_OP_SILU_BACKWARD, FOO_NO_PARAMS)
FOO_BACKWARD(softplus_backward, FOO_BINARY_OP_SOFTPLUS_BACKWARD, FOO_PARAMS(beta, threshold), const c10::Scalar& beta,
             const c10::Scalar& threshold)
FOO_BACKWARD(hardtanh_backward, FOO_BINARY_OP_HARDTANH_BACKWARD, FOO_PARAMS(min_val, max_val), const c10::Scalar& min_val,
             const c10::Scalar& max_val)
FOO_BACKWARD(hardsigmoid_backward, FOO_BINARY_OP_HARDSIGMOID_BACKWARD, FOO_NO_PARAMS)
#undef FOO_NO_PARAMS
#undef FOO_PARAMS
#undef FOO_BACKWARD

at::Tensor gelu_backward(const at::Tensor& grad, const at::Tensor& self, c10::string_view approximate) {
  TORCH_CHECK(approximate == "none" || approximate == "tanh", "approximate argument must be either none or tanh.");
  at::Tensor out;
  auto it = ew::binary_op(out, grad, self);
  return same(it, FOO_BINARY_OP_GELU_BACKWARD, {approximate == "tanh" ? 1 : 0});
}
at::Tensor& gelu_backward_out(const at::Tensor& grad, const at::Tensor& self, c10::string_view approximate,
                              at::Tensor& grad_input) {
  TORCH_CHECK(approximate == "none" || approximate == "tanh", "approximate argument must be either none or tanh.");
  auto it = ew::binary_op(grad_input, grad, self);
  same(it, FOO_BINARY_OP_GELU_BACKWARD, {approximate == "tanh" ? 1 : 0});
  return grad_input;
}
at::Tensor leaky_relu_backward(const at::Tensor& grad, const at::Tensor& self, const c10::Scalar& negative_slope,
                               bool self_is_result) {
  TORCH_CHECK(!self_is_result || negative_slope.to<double>() >= 0.0,
              "In-place leakyReLu backward calculation is triggered with a negative slope which is not supported. "
              "This is caused by calling in-place forward function with a negative slope, please call out-of-place "
              "version instead. File an issue at https://github.com/pytorch/pytorch if you do require supporting "
              "in-place leakRelu backward calculation with negative slope");
  at::Tensor out;
  auto it = ew::binary_op(out, grad, self);
  return same(it, FOO_BINARY_OP_LEAKY_RELU_BACKWARD, {negative_slope});
}
at::Tensor& leaky_relu_backward_out(const at::Tensor& grad, const at::Tensor& self, const c10::Scalar& negative_slope,
                                    bool self_is_result, at::Tensor& grad_input) {
  auto it = ew::binary_op(grad_input, grad, self);
  same(it, FOO_BINARY_OP_LEAKY_RELU_BACKWARD, {negative_slope});
  return grad_input;
}
at::Tensor hardswish_backward(const at::Tensor& grad, const at::Tensor& self) {
  at::Tensor out;
  auto it = ew::binary_op(out, grad, self);
  return same(it, FOO_BINARY_OP_HARDSWISH_BACKWARD);
}
at::Tensor mish_backward(const at::Tensor& grad, const at::Tensor& self) {
  at::Tensor out;
  auto it = ew::binary_op(out, grad, self);
  return same(it, FOO_BINARY_OP_MISH_BACKWARD);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  FOO_IMPL(m, "clamp.Tensor", clamp_tensor);
  FOO_IMPL(m, "clamp_.Tensor", clamp_tensor_);
  FOO_IMPL(m, "clamp.Tensor_out", clamp_tensor_out);
  FOO_IMPL(m, "clamp_min.Tensor", clamp_min_tensor);
  FOO_IMPL(m, "clamp_min_.Tensor", clamp_min_tensor_);
  FOO_IMPL(m, "clamp_min.Tensor_out", clamp_min_tensor_out);
  FOO_IMPL(m, "clamp_max.Tensor", clamp_max_tensor);
  FOO_IMPL(m, "clamp_max_.Tensor", clamp_max_tensor_);
  FOO_IMPL(m, "clamp_max.Tensor_out", clamp_max_tensor_out);
  FOO_IMPL(m, "add.Tensor", add);
  FOO_IMPL(m, "add_.Tensor", add_);
  FOO_IMPL(m, "add.out", add_out);
  FOO_IMPL(m, "sub.Tensor", sub);
  FOO_IMPL(m, "sub_.Tensor", sub_);
  FOO_IMPL(m, "sub.out", sub_out);
  FOO_IMPL(m, "rsub.Tensor", rsub);
  FOO_IMPL(m, "mul.Tensor", mul);
  FOO_IMPL(m, "mul_.Tensor", mul_);
  FOO_IMPL(m, "mul.out", mul_out);
  FOO_IMPL(m, "floor_divide", floor_divide);
  FOO_IMPL(m, "floor_divide_.Tensor", floor_divide_);
  FOO_IMPL(m, "floor_divide.out", floor_divide_out);
  FOO_IMPL(m, "div.Tensor", div);
  FOO_IMPL(m, "div_.Tensor", div_);
  FOO_IMPL(m, "div.out", div_out);
  FOO_IMPL(m, "div.Tensor_mode", div_mode);
  FOO_IMPL(m, "div_.Tensor_mode", div_mode_);
  FOO_IMPL(m, "div.out_mode", div_mode_out);
  FOO_IMPL(m, "remainder.Tensor", remainder);
  FOO_IMPL(m, "remainder_.Tensor", remainder_);
  FOO_IMPL(m, "remainder.Tensor_out", remainder_out);
  FOO_IMPL(m, "fmod.Tensor", fmod);
  FOO_IMPL(m, "fmod_.Tensor", fmod_);
  FOO_IMPL(m, "fmod.Tensor_out", fmod_out);
  FOO_IMPL(m, "pow.Tensor_Tensor", pow);
  FOO_IMPL(m, "pow_.Tensor", pow_);
  FOO_IMPL(m, "pow.Tensor_Tensor_out", pow_out);
  FOO_IMPL(m, "pow.Tensor_Scalar", pow_scalar_exp);
  FOO_IMPL(m, "pow_.Scalar", pow_scalar_exp_);
  FOO_IMPL(m, "pow.Tensor_Scalar_out", pow_scalar_exp_out);
  FOO_IMPL(m, "pow.Scalar", pow_scalar_base);
  FOO_IMPL(m, "pow.Scalar_out", pow_scalar_base_out);
  FOO_IMPL(m, "maximum", maximum);
  FOO_IMPL(m, "maximum.out", maximum_out);
  FOO_IMPL(m, "minimum", minimum);
  FOO_IMPL(m, "minimum.out", minimum_out);
  FOO_IMPL(m, "fmax", fmax);
  FOO_IMPL(m, "fmax.out", fmax_out);
  FOO_IMPL(m, "fmin", fmin);
  FOO_IMPL(m, "fmin.out", fmin_out);
  FOO_IMPL(m, "logaddexp", logaddexp);
  FOO_IMPL(m, "logaddexp.out", logaddexp_out);
  FOO_IMPL(m, "atan2", atan2);
  FOO_IMPL(m, "atan2_", atan2_);
  FOO_IMPL(m, "atan2.out", atan2_out);
  FOO_IMPL(m, "hypot", hypot);
  FOO_IMPL(m, "hypot_", hypot_);
  FOO_IMPL(m, "hypot.out", hypot_out);
  FOO_IMPL(m, "copysign.Tensor", copysign);
  FOO_IMPL(m, "copysign_.Tensor", copysign_);
  FOO_IMPL(m, "copysign.out", copysign_out);
  FOO_IMPL(m, "xlogy.Tensor", xlogy);
  FOO_IMPL(m, "xlogy_.Tensor", xlogy_);
  FOO_IMPL(m, "xlogy.OutTensor", xlogy_out);
  FOO_IMPL(m, "eq.Tensor", eq);
  FOO_IMPL(m, "eq_.Tensor", eq_);
  FOO_IMPL(m, "eq.Tensor_out", eq_out);
  FOO_IMPL(m, "eq.Scalar", eq_scalar);
  FOO_IMPL(m, "eq_.Scalar", eq_scalar_);
  FOO_IMPL(m, "eq.Scalar_out", eq_scalar_out);
  FOO_IMPL(m, "ne.Tensor", ne);
  FOO_IMPL(m, "ne_.Tensor", ne_);
  FOO_IMPL(m, "ne.Tensor_out", ne_out);
  FOO_IMPL(m, "ne.Scalar", ne_scalar);
  FOO_IMPL(m, "ne_.Scalar", ne_scalar_);
  FOO_IMPL(m, "ne.Scalar_out", ne_scalar_out);
  FOO_IMPL(m, "lt.Tensor", lt);
  FOO_IMPL(m, "lt_.Tensor", lt_);
  FOO_IMPL(m, "lt.Tensor_out", lt_out);
  FOO_IMPL(m, "lt.Scalar", lt_scalar);
  FOO_IMPL(m, "lt_.Scalar", lt_scalar_);
  FOO_IMPL(m, "lt.Scalar_out", lt_scalar_out);
  FOO_IMPL(m, "le.Tensor", le);
  FOO_IMPL(m, "le_.Tensor", le_);
  FOO_IMPL(m, "le.Tensor_out", le_out);
  FOO_IMPL(m, "le.Scalar", le_scalar);
  FOO_IMPL(m, "le_.Scalar", le_scalar_);
  FOO_IMPL(m, "le.Scalar_out", le_scalar_out);
  FOO_IMPL(m, "gt.Tensor", gt);
  FOO_IMPL(m, "gt_.Tensor", gt_);
  FOO_IMPL(m, "gt.Tensor_out", gt_out);
  FOO_IMPL(m, "gt.Scalar", gt_scalar);
  FOO_IMPL(m, "gt_.Scalar", gt_scalar_);
  FOO_IMPL(m, "gt.Scalar_out", gt_scalar_out);
  FOO_IMPL(m, "ge.Tensor", ge);
  FOO_IMPL(m, "ge_.Tensor", ge_);
  FOO_IMPL(m, "ge.Tensor_out", ge_out);
  FOO_IMPL(m, "ge.Scalar", ge_scalar);
  FOO_IMPL(m, "ge_.Scalar", ge_scalar_);
  FOO_IMPL(m, "ge.Scalar_out", ge_scalar_out);
  FOO_IMPL(m, "logical_and", logical_and);
  FOO_IMPL(m, "logical_and_", logical_and_);
  FOO_IMPL(m, "logical_and.out", logical_and_out);
  FOO_IMPL(m, "logical_or", logical_or);
  FOO_IMPL(m, "logical_or_", logical_or_);
  FOO_IMPL(m, "logical_or.out", logical_or_out);
  FOO_IMPL(m, "logical_xor", logical_xor);
  FOO_IMPL(m, "logical_xor_", logical_xor_);
  FOO_IMPL(m, "logical_xor.out", logical_xor_out);
  FOO_IMPL(m, "bitwise_and.Tensor", bitwise_and);
  FOO_IMPL(m, "bitwise_and_.Tensor", bitwise_and_);
  FOO_IMPL(m, "bitwise_and.Tensor_out", bitwise_and_out);
  FOO_IMPL(m, "bitwise_or.Tensor", bitwise_or);
  FOO_IMPL(m, "bitwise_or_.Tensor", bitwise_or_);
  FOO_IMPL(m, "bitwise_or.Tensor_out", bitwise_or_out);
  FOO_IMPL(m, "bitwise_xor.Tensor", bitwise_xor);
  FOO_IMPL(m, "bitwise_xor_.Tensor", bitwise_xor_);
  FOO_IMPL(m, "bitwise_xor.Tensor_out", bitwise_xor_out);
  FOO_IMPL(m, "bitwise_left_shift.Tensor", bitwise_left_shift);
  FOO_IMPL(m, "bitwise_left_shift_.Tensor", bitwise_left_shift_);
  FOO_IMPL(m, "bitwise_left_shift.Tensor_out", bitwise_left_shift_out);
  FOO_IMPL(m, "bitwise_right_shift.Tensor", bitwise_right_shift);
  FOO_IMPL(m, "bitwise_right_shift_.Tensor", bitwise_right_shift_);
  FOO_IMPL(m, "bitwise_right_shift.Tensor_out", bitwise_right_shift_out);
  FOO_IMPL(m, "__lshift__.Tensor", lshift);
  FOO_IMPL(m, "__ilshift__.Tensor", ilshift);
  FOO_IMPL(m, "__rshift__.Tensor", rshift);
  FOO_IMPL(m, "__irshift__.Tensor", irshift);
  FOO_IMPL(m, "__lshift__.Scalar", lshift_scalar);
  FOO_IMPL(m, "__ilshift__.Scalar", ilshift_scalar);
  FOO_IMPL(m, "__rshift__.Scalar", rshift_scalar);
  FOO_IMPL(m, "__irshift__.Scalar", irshift_scalar);
  FOO_IMPL(m, "threshold_backward", threshold_backward);
  FOO_IMPL(m, "threshold_backward.grad_input", threshold_backward_out);
  FOO_IMPL(m, "sigmoid_backward", sigmoid_backward);
  FOO_IMPL(m, "sigmoid_backward.grad_input", sigmoid_backward_out);
  FOO_IMPL(m, "tanh_backward", tanh_backward);
  FOO_IMPL(m, "tanh_backward.grad_input", tanh_backward_out);
  FOO_IMPL(m, "silu_backward", silu_backward);
  FOO_IMPL(m, "silu_backward.grad_input", silu_backward_out);
  FOO_IMPL(m, "gelu_backward", gelu_backward);
  FOO_IMPL(m, "gelu_backward.grad_input", gelu_backward_out);
  FOO_IMPL(m, "softplus_backward", softplus_backward);
  FOO_IMPL(m, "softplus_backward.grad_input", softplus_backward_out);
  FOO_IMPL(m, "leaky_relu_backward", leaky_relu_backward);
  FOO_IMPL(m, "leaky_relu_backward.grad_input", leaky_relu_backward_out);
  FOO_IMPL(m, "hardtanh_backward", hardtanh_backward);
  FOO_IMPL(m, "hardtanh_backward.grad_input", hardtanh_backward_out);
  FOO_IMPL(m, "hardsigmoid_backward", hardsigmoid_backward);
  FOO_IMPL(m, "hardsigmoid_backward.grad_input", hardsigmoid_backward_out);
  FOO_IMPL(m, "hardswish_backward", hardswish_backward);
  FOO_IMPL(m, "mish_backward", mish_backward);
}

}  // namespace foo::ops
