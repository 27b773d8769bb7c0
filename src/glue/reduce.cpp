// Reductions and scans: argument checks, output shape/dtype inference and allocation as ATen
// does them (ReduceOpsUtils.h); Rust computes (foo_reduce, foo_scan). Outputs are restrided to
// the input's rank (size 1, stride 0 at reduced dims) so one kernel handles keepdim either way.
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/ReduceOpsUtils.h>
#include <ATen/native/Resize.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include "common.h"
#include "foo_ffi.h"

namespace foo::ops {
namespace {

using at::Tensor;
using OptDtype = std::optional<at::ScalarType>;
using OptScalar = std::optional<c10::Scalar>;
using at::native::DimMask;

void check_real(const Tensor& self, const char* name) {
  check_supported_dtype(self.scalar_type(), name);
  if (self.is_complex()) needs_fallback(std::string(name) + ": no foo kernel for complex inputs");
}

DimMask mask_of(const Tensor& self, at::OptionalIntArrayRef dim, bool allow_empty = false) {
  return at::native::make_dim_mask(dim, self.dim(), allow_empty);
}

DimMask mask_one(const Tensor& self, int64_t dim) {
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  return at::native::make_dim_mask(at::IntArrayRef(d), self.dim());
}

at::DimVector shape_of(const Tensor& self, DimMask mask, bool keepdim) {
  return at::native::shape_from_dim_mask(self, mask, keepdim);
}

// Allocated as `empty` allocates on foo (the kernels write every element): through the
// dispatcher it was a sixth of a 16-element sum's time.
Tensor new_result(const Tensor& self, DimMask mask, bool keepdim, at::ScalarType dtype) {
  const c10::DeviceGuard guard(self.device());
  return at::detail::empty_generic(shape_of(self, mask, keepdim), c10::GetAllocator(kFoo),
                                   c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), dtype, std::nullopt);
}

void resize_out(Tensor& out, const Tensor& self, DimMask mask, bool keepdim) {
  // TensorIterator's device rule (these ops are `device_check: NoCheck`): an out= tensor on the
  // CPU for a foo reduction is an error, as for CUDA.
  check_same_device(self, {out}, /*cpu_scalars=*/false);
  at::native::resize_output(out, shape_of(self, mask, keepdim));
}

// The kernel writes `kernel_dtype`; a result of another dtype gets a temporary copied into it.
// `bool_as` lets a uint8 result stand for a bool one (all/any write 0/1 bytes).
struct Target {
  Tensor result, buf;
  Target(const Tensor& r, at::ScalarType kernel_dtype, bool byte_ok = false) : result(r) {
    const bool direct = r.scalar_type() == kernel_dtype || (byte_ok && r.scalar_type() == at::kByte);
    buf = direct ? r : at::empty(r.sizes(), r.options().dtype(kernel_dtype));
  }
  void commit() {
    if (!buf.is_same(result)) result.copy_(buf);
  }
};

// A result's descriptor at the input's rank: at::native::review_reduce_result's view (size 1,
// stride 0 at reduced dims) without making it (a view op through the dispatcher).
struct Reviewed {
  at::DimVector sizes, strides;
  FooTensor d;
  Reviewed(const Tensor& result, int64_t nd, DimMask mask, bool keepdim) : sizes(nd), strides(nd) {
    for (int64_t i = 0, j = 0; i < nd; ++i) {
      const bool kept = !mask[i];
      sizes[i] = kept ? result.size(j) : 1;
      strides[i] = kept ? result.stride(j) : 0;
      if (kept || keepdim) ++j;
    }
    d = describe(result);
    d.sizes = sizes.data();
    d.strides = strides.data();
    d.ndim = static_cast<int32_t>(nd);
  }
};

// Reduces `input` over `mask` into `out` (and `out2`), which have the reduction shape.
void launch(int32_t op, const Tensor& input, DimMask mask, bool keepdim, Target& out, Target* out2 = nullptr,
            std::vector<FooScalar> params = {}, bool as_bool = false) {
  if (out.result.numel() == 0) return;
  const c10::DeviceGuard guard(input.device());
  const int nd = static_cast<int>(input.dim());
  Reviewed v1(out.buf, nd, mask, keepdim);
  std::optional<Reviewed> v2;
  FooTensor& d1 = v1.d;
  FooTensor din = describe(input), d2{};
  if (as_bool) d1.dtype = static_cast<int32_t>(at::kBool);
  if (out2 != nullptr) {
    v2.emplace(out2->buf, nd, mask, keepdim);
    d2 = v2->d;
  }
  check(foo_reduce(op, &d1, out2 != nullptr ? &d2 : nullptr, &din, params.data(), static_cast<int32_t>(params.size())),
        "foo reduction");
  out.commit();
  if (out2 != nullptr) out2->commit();
}

FooScalar param(double v) { return foo::to_ffi(c10::Scalar(v)); }

// ---- sum / mean / prod / nansum ------------------------------------------------------------
// Computes into `result` (shape and dtype already set): the input is converted to a float
// result dtype first (as ATen casts it), integer results accumulate in int64.
void sum_like(int32_t op, const Tensor& self, DimMask mask, bool keepdim, const Tensor& result, const char* name) {
  check_real(self, name);
  if (result.is_complex()) needs_fallback(std::string(name) + ": no foo kernel for complex results");
  const auto rt = result.scalar_type();
  const bool fl = at::isFloatingType(rt);
  Tensor in = self;
  if (fl ? self.scalar_type() != rt : at::isFloatingType(self.scalar_type())) in = self.to(rt);
  if (!fl && op == FOO_REDUCE_OP_NAN_SUM) op = FOO_REDUCE_OP_SUM;
  Target t(result, fl ? rt : at::kLong);
  launch(op, in, mask, keepdim, t);
}

at::ScalarType sum_dtype(const Tensor& self, std::optional<at::ScalarType> dtype) {
  return at::native::get_dtype_from_self(self, dtype, true);
}

at::ScalarType out_dtype(const Tensor& out, std::optional<at::ScalarType> dtype, const char* name) {
  if (dtype.has_value()) {
    TORCH_CHECK(out.scalar_type() == *dtype, name, ": Expected out tensor to have dtype ", *dtype, ", but got ",
                out.scalar_type(), " instead");
  }
  return out.scalar_type();
}

at::ScalarType mean_dtype(const Tensor& self, std::optional<at::ScalarType> dtype) {
  const auto in_dtype = at::native::get_dtype_from_self(self, dtype, true);
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(in_dtype) || at::isComplexType(in_dtype),
                              "mean(): could not infer output dtype. ", (dtype.has_value() ? "Optional" : "Input"),
                              " dtype must be either a floating point or complex dtype. ",
                              "Got: ", dtype.value_or(self.scalar_type()));
  return dtype.value_or(self.scalar_type());
}

// ---- max / min / arg -------------------------------------------------------------------------
void check_values_out(const Tensor& values, const Tensor& indices, const Tensor& self, const char* name) {
  TORCH_CHECK(values.scalar_type() == self.scalar_type(), name, ": Expected out tensor to have dtype ",
              self.scalar_type(), ", but got ", values.scalar_type(), " instead");
  TORCH_CHECK(indices.scalar_type() == at::kLong, name, ": Expected out tensor to have dtype Long, but got ",
              indices.scalar_type(), " instead");
}

void minmax_dim_into(bool max, const Tensor& self, int64_t dim, bool keepdim, Tensor& values, Tensor& indices) {
  const char* name = max ? "max()" : "min()";
  TORCH_CHECK_TYPE(!self.is_complex(), name, ": does not support complex input");
  check_real(self, name);
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  at::native::zero_numel_check_dims(self, d, name);
  const DimMask mask = mask_one(self, d);
  resize_out(values, self, mask, keepdim);
  resize_out(indices, self, mask, keepdim);
  check_values_out(values, indices, self, name);
  Target v(values, self.scalar_type()), i(indices, at::kLong);
  launch(max ? FOO_REDUCE_OP_ARG_MAX : FOO_REDUCE_OP_ARG_MIN, self, mask, keepdim, v, &i);
}

void full_minmax_into(bool max, const Tensor& self, Tensor& out) {
  const char* name = max ? "max()" : "min()";
  check_real(self, name);
  TORCH_CHECK(self.numel() > 0, name, ": Expected reduction dim to be specified for input.numel() == 0. ",
              "Specify the reduction dim with the 'dim' argument.");
  const DimMask mask = mask_of(self, std::nullopt);
  resize_out(out, self, mask, false);
  Target t(out, self.scalar_type());
  launch(max ? FOO_REDUCE_OP_MAX : FOO_REDUCE_OP_MIN, self, mask, false, t);
}

void amax_into(bool max, const Tensor& self, at::IntArrayRef dim, bool keepdim, Tensor& out) {
  const char* name = max ? "amax()" : "amin()";
  check_real(self, name);
  if (self.numel() == 0) at::native::zero_numel_check_dims(self, dim, name);
  const DimMask mask = mask_of(self, dim);
  resize_out(out, self, mask, keepdim);
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "Expected the dtype for input and out to match, but got ",
              self.scalar_type(), " for input's dtype and ", out.scalar_type(), " for out's dtype.");
  Target t(out, self.scalar_type());
  launch(max ? FOO_REDUCE_OP_MAX : FOO_REDUCE_OP_MIN, self, mask, keepdim, t);
}

void argmax_into(bool max, const Tensor& self, std::optional<int64_t> dim, bool keepdim, Tensor& out) {
  const char* name = max ? "argmax()" : "argmin()";
  TORCH_CHECK_TYPE(!self.is_complex(), name, ": does not support complex input");
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool, name, ": does not support bool input");
  check_real(self, name);
  const int32_t op = max ? FOO_REDUCE_OP_ARG_MAX : FOO_REDUCE_OP_ARG_MIN;
  if (dim.has_value()) {
    const int64_t d = at::maybe_wrap_dim(*dim, self.dim());
    if (self.numel() == 0) at::native::zero_numel_check_dims(self, d, name);
    const DimMask mask = mask_one(self, d);
    resize_out(out, self, mask, keepdim);
    Target t(out, at::kLong);
    launch(op, self, mask, keepdim, t);
    return;
  }
  TORCH_CHECK_INDEX(self.numel() != 0, name, ": Expected reduction dim to be specified for input.numel() == 0.");
  // Over the flattened input; keepdim keeps every dim as size 1.
  at::DimVector shape(keepdim ? self.dim() : 0, 1);
  at::native::resize_output(out, shape);
  const Tensor flat = self.reshape({-1});
  Tensor tmp = at::empty({}, self.options().dtype(at::kLong));
  Target t(tmp, at::kLong);
  launch(op, flat, mask_one(flat, 0), false, t);
  out.copy_(tmp);
}

// ---- var / std -------------------------------------------------------------------------------
void var_into(bool is_std, const Tensor& self, at::OptionalIntArrayRef dim, const std::optional<c10::Scalar>& correction,
              bool keepdim, Tensor& out, Tensor* mean) {
  check_supported_dtype(self.scalar_type(), "var/std");
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()),
                              "std and var only support floating point and complex dtypes");
  const auto real = c10::toRealValueType(self.scalar_type());
  TORCH_CHECK(at::canCast(real, out.scalar_type()), "result type ", real, " can't be cast to the desired output type ",
              out.scalar_type());
  if (self.is_complex()) needs_fallback("var/std: no foo kernel for complex inputs");
  const DimMask mask = mask_of(self, dim);
  resize_out(out, self, mask, keepdim);
  const double c = correction.has_value() ? correction->toDouble() : 1.0;
  Target t(out, self.scalar_type());
  std::optional<Target> m;
  if (mean != nullptr) {
    resize_out(*mean, self, mask, keepdim);
    m.emplace(*mean, self.scalar_type());
  }
  launch(is_std ? FOO_REDUCE_OP_STD : FOO_REDUCE_OP_VAR, self, mask, keepdim, t, m ? &*m : nullptr, {param(c)});
}

// ---- norms -----------------------------------------------------------------------------------
void vector_norm_into(const Tensor& self, const c10::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                      std::optional<at::ScalarType> dtype, Tensor& out) {
  check_supported_dtype(self.scalar_type(), "linalg.vector_norm");
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()),
                              "linalg.vector_norm: Expected a floating point or complex tensor as input. Got ",
                              self.scalar_type());
  if (self.is_complex()) needs_fallback("linalg.vector_norm: no foo kernel for complex inputs");
  const double p = ord.toDouble();
  if (self.numel() == 0 && (p < 0.0 || p == std::numeric_limits<double>::infinity())) {
    TORCH_CHECK(dim.has_value() && !dim->empty(), "linalg.vector_norm cannot compute the ", ord,
                " norm on an empty tensor because the operation does not have an identity");
    for (int64_t d : *dim) {
      const int64_t w = at::maybe_wrap_dim(d, self.dim());
      TORCH_CHECK(self.dim() == 0 || self.size(w) != 0, "linalg.vector_norm cannot compute the ", ord,
                  " norm on the dimension ", d, "because this dimension is empty and the operation does not have an identity");
    }
  }
  const auto rt = dtype.value_or(self.scalar_type());
  TORCH_CHECK(at::isFloatingType(rt), "linalg.vector_norm: dtype should be floating point, but got ", rt);
  TORCH_CHECK(out.scalar_type() == rt, "Expected out tensor to have dtype ", c10::scalarTypeToTypeMeta(rt), ", but got ",
              out.dtype(), " instead");
  const DimMask mask = mask_of(self, dim);
  resize_out(out, self, mask, keepdim);
  const Tensor in = self.scalar_type() == rt ? self : self.to(rt);
  const bool zero_dim_over_dim = self.dim() == 0 && dim.has_value() && !dim->empty();
  if (p != 0.0 && self.numel() > 0 && self.numel() == out.numel() && !zero_dim_over_dim) {
    // Each norm is of one element: the CPU gives |x| (a float32 1.5e30 stays finite, where x * x
    // would overflow); the reduced dims all have size 1, so the order of elements is out's. (Not
    // for a 0-dim tensor reduced over dim 0: the CPU's reduction loop squares it, inf.)
    out.copy_(at::abs(in).reshape(out.sizes()));
    return;
  }
  Target t(out, rt);
  launch(FOO_REDUCE_OP_NORM, in, mask, keepdim, t, nullptr, {param(p)});
}

// ---- all / any -------------------------------------------------------------------------------
at::ScalarType bool_dtype(const Tensor& self) { return self.scalar_type() == at::kByte ? at::kByte : at::kBool; }

void all_any_into(bool all, const Tensor& self, DimMask mask, bool keepdim, Tensor& out) {
  check_real(self, all ? "all" : "any");
  resize_out(out, self, mask, keepdim);
  Target t(out, at::kBool, /*byte_ok=*/true);
  launch(all ? FOO_REDUCE_OP_ALL : FOO_REDUCE_OP_ANY, self, mask, keepdim, t, nullptr, {}, /*as_bool=*/true);
}

DimMask dims_mask(const Tensor& self, at::OptionalIntArrayRef dim) { return mask_of(self, dim, /*allow_empty=*/true); }

// ---- logsumexp -------------------------------------------------------------------------------
void logsumexp_into(const Tensor& self, at::IntArrayRef dim, bool keepdim, Tensor& out) {
  check_real(self, "logsumexp");
  Tensor in = self;
  if (at::isIntegralType(self.scalar_type(), /*includeBool=*/true)) {
    in = self.to(c10::typeMetaToScalarType(c10::get_default_dtype()));
  }
  TORCH_CHECK(at::isFloatingType(out.scalar_type()), "logsumexp(): Expected floating point type for result tensor, but got: ",
              out.scalar_type());
  const DimMask mask = mask_of(in, dim);
  resize_out(out, in, mask, keepdim);
  if (at::isReducedFloatingType(in.scalar_type()) && out.scalar_type() == in.scalar_type() && in.numel() != 0) {
    // float16/bfloat16: the CPU's composite (amax, x - max, exp, sum, log, + max), each step rounded to
    // the half type by foo's kernels as by the CPU's; the fused kernel rounds once, which is closer to
    // the exact value but 1 ulp away from the CPU's ([-0.5, -2.5, 2.0]: 2.0898 against 2.0879).
    const Tensor maxes = at::amax(in, dim, true);
    const Tensor shift = maxes.masked_fill(maxes.abs() == INFINITY, 0);
    at::sum_out(out, (in - shift).exp_(), dim, keepdim);
    out.log_().add_(shift.reshape(out.sizes()));
    return;
  }
  Target t(out, in.scalar_type());
  launch(FOO_REDUCE_OP_LOG_SUM_EXP, in, mask, keepdim, t);
}

// ---- cumsum / cumprod ------------------------------------------------------------------------
void scan_into(int32_t op, const Tensor& self, int64_t dim, const Tensor& result, const char* name) {
  check_real(self, name);
  if (result.is_complex()) needs_fallback(std::string(name) + ": no foo kernel for complex results");
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  if (result.numel() == 0) return;
  const auto rt = result.scalar_type();
  const bool fl = at::isFloatingType(rt);
  Tensor in = self;
  if (fl ? self.scalar_type() != rt : at::isFloatingType(self.scalar_type())) in = self.to(rt);
  const auto kt = fl ? rt : at::kLong;
  // Rust writes a buffer that never overlaps the input; in-place calls copy back.
  Tensor buf = rt == kt && !result.is_same(self) && at::has_internal_overlap(result) == at::MemOverlap::No ? result
                                                                                      : at::empty(self.sizes(), self.options().dtype(kt));
  const c10::DeviceGuard guard(self.device());
  const FooTensor o = describe(buf), i = describe(in);
  check(foo_scan(op, &o, &i, static_cast<int32_t>(d)), name);
  if (!buf.is_same(result)) result.copy_(buf);
}

at::ScalarType scan_dtype(const Tensor& self, std::optional<at::ScalarType> dtype) {
  return dtype.value_or(at::isIntegralType(self.scalar_type(), /*includeBool=*/true) ? at::kLong : self.scalar_type());
}

// ---- sum / mean / prod / nansum ------------------------------------------------------------------
Tensor sum_dim(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<at::ScalarType> dtype) {
  const DimMask mask = mask_of(self, dim);
  Tensor r = new_result(self, mask, keepdim, sum_dtype(self, dtype));
  sum_like(FOO_REDUCE_OP_SUM, self, mask, keepdim, r, "sum");
  return r;
}
Tensor sum(const Tensor& self, std::optional<at::ScalarType> dtype) {
  return ops::sum_dim(self, std::nullopt, false, dtype);
}
Tensor& sum_out(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<at::ScalarType> dtype,
                Tensor& out) {
  out_dtype(out, dtype, "sum");
  const DimMask mask = mask_of(self, dim);
  resize_out(out, self, mask, keepdim);
  sum_like(FOO_REDUCE_OP_SUM, self, mask, keepdim, out, "sum");
  return out;
}
// The CPU's nansum into an integer dtype tests each float element for nan before converting it
// (nan counts 0; a plain conversion would give INT64_MIN).
Tensor nan_as_zero_for(const Tensor& self, at::ScalarType result) {
  if (!at::isIntegralType(result, true) || !at::isFloatingType(self.scalar_type())) return self;
  return at::where(at::isnan(self), at::zeros({}, self.options()), self);
}

Tensor nansum(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<at::ScalarType> dtype) {
  const DimMask mask = mask_of(self, dim);
  Tensor r = new_result(self, mask, keepdim, sum_dtype(self, dtype));
  sum_like(FOO_REDUCE_OP_NAN_SUM, nan_as_zero_for(self, r.scalar_type()), mask, keepdim, r, "nansum");
  return r;
}
Tensor& nansum_out(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<at::ScalarType> dtype,
                   Tensor& out) {
  out_dtype(out, dtype, "nansum");
  // As the CPU: the kernel is chosen by the out dtype, and there is no integer nansum kernel for
  // floating inputs (an integer input is summed by sum's kernel).
  TORCH_CHECK_NOT_IMPLEMENTED(dtype.has_value() || !at::isIntegralType(out.scalar_type(), true) ||
                                  at::isIntegralType(self.scalar_type(), true),
                              "\"nansum_cpu\" not implemented for '", out.scalar_type(), "'");
  const DimMask mask = mask_of(self, dim);
  resize_out(out, self, mask, keepdim);
  sum_like(FOO_REDUCE_OP_NAN_SUM, nan_as_zero_for(self, out.scalar_type()), mask, keepdim, out, "nansum");
  return out;
}
Tensor mean_dim(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<at::ScalarType> dtype) {
  const auto rt = mean_dtype(self, dtype);  // the dtype before the dims, as the CPU reports
  const DimMask mask = mask_of(self, dim);
  Tensor r = new_result(self, mask, keepdim, rt);
  sum_like(FOO_REDUCE_OP_MEAN, self, mask, keepdim, r, "mean");
  return r;
}
Tensor mean(const Tensor& self, std::optional<at::ScalarType> dtype) {
  return ops::mean_dim(self, std::nullopt, false, dtype);
}
Tensor& mean_out(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<at::ScalarType> dtype,
                 Tensor& out) {
  const auto rt = mean_dtype(self, dtype);
  out_dtype(out, dtype, "mean");
  TORCH_CHECK(at::canCast(rt, out.scalar_type()), "result type ", rt, " can't be cast to the desired output type ",
              out.scalar_type());
  const DimMask mask = mask_of(self, dim);
  resize_out(out, self, mask, keepdim);
  sum_like(FOO_REDUCE_OP_MEAN, self, mask, keepdim, out, "mean");
  return out;
}
Tensor prod(const Tensor& self, std::optional<at::ScalarType> dtype) {
  const DimMask mask = mask_of(self, std::nullopt);
  Tensor r = new_result(self, mask, false, sum_dtype(self, dtype));
  sum_like(FOO_REDUCE_OP_PROD, self, mask, false, r, "prod");
  return r;
}
Tensor prod_dim(const Tensor& self, int64_t dim, bool keepdim, std::optional<at::ScalarType> dtype) {
  const DimMask mask = mask_one(self, dim);
  Tensor r = new_result(self, mask, keepdim, sum_dtype(self, dtype));
  sum_like(FOO_REDUCE_OP_PROD, self, mask, keepdim, r, "prod");
  return r;
}
Tensor& prod_out(const Tensor& self, int64_t dim, bool keepdim, std::optional<at::ScalarType> dtype, Tensor& out) {
  out_dtype(out, dtype, "prod");
  const DimMask mask = mask_one(self, dim);
  resize_out(out, self, mask, keepdim);
  sum_like(FOO_REDUCE_OP_PROD, self, mask, keepdim, out, "prod");
  return out;
}

// ---- max / min -----------------------------------------------------------------------------------
#define FOO_MINMAX(name, is_max)                                                                              \
  Tensor name(const Tensor& self) {                                                                           \
    Tensor out = at::empty({}, self.options());                                                               \
    full_minmax_into(is_max, self, out);                                                                      \
    return out;                                                                                               \
  }                                                                                                           \
  Tensor& name##_unary_out(const Tensor& self, Tensor& out) {                                                 \
    TORCH_CHECK(at::canCast(self.scalar_type(), out.scalar_type()), #name "(): the result type ",            \
                self.scalar_type(), " can't be cast to the desired output type ", out.scalar_type());        \
    full_minmax_into(is_max, self, out);                                                                      \
    return out;                                                                                               \
  }                                                                                                           \
  std::tuple<Tensor, Tensor> name##_dim(const Tensor& self, int64_t dim, bool keepdim) {                      \
    Tensor v = at::empty({0}, self.options()), i = at::empty({0}, self.options().dtype(at::kLong));           \
    minmax_dim_into(is_max, self, dim, keepdim, v, i);                                                        \
    return {v, i};                                                                                            \
  }                                                                                                           \
  std::tuple<Tensor&, Tensor&> name##_dim_out(const Tensor& self, int64_t dim, bool keepdim, Tensor& values,  \
                                              Tensor& indices) {                                              \
    minmax_dim_into(is_max, self, dim, keepdim, values, indices);                                             \
    return {values, indices};                                                                                 \
  }                                                                                                           \
  Tensor a##name(const Tensor& self, at::IntArrayRef dim, bool keepdim) {                                     \
    Tensor out = at::empty({0}, self.options());                                                              \
    amax_into(is_max, self, dim, keepdim, out);                                                               \
    return out;                                                                                               \
  }                                                                                                           \
  Tensor& a##name##_out(const Tensor& self, at::IntArrayRef dim, bool keepdim, Tensor& out) {                 \
    amax_into(is_max, self, dim, keepdim, out);                                                               \
    return out;                                                                                               \
  }                                                                                                           \
  Tensor arg##name(const Tensor& self, std::optional<int64_t> dim, bool keepdim) {                            \
    Tensor out = at::empty({0}, self.options().dtype(at::kLong));                                             \
    argmax_into(is_max, self, dim, keepdim, out);                                                             \
    return out;                                                                                               \
  }                                                                                                           \
  Tensor& arg##name##_out(const Tensor& self, std::optional<int64_t> dim, bool keepdim, Tensor& out) {        \
    argmax_into(is_max, self, dim, keepdim, out);                                                             \
    return out;                                                                                               \
  }

FOO_MINMAX(max, true)
FOO_MINMAX(min, false)
#undef FOO_MINMAX

std::tuple<Tensor&, Tensor&> aminmax_out(const Tensor& self, std::optional<int64_t> dim, bool keepdim, Tensor& min,
                                         Tensor& max) {
  TORCH_CHECK_TYPE(!self.is_complex(), "aminmax not implemented for ", self.scalar_type());
  check_real(self, "aminmax");
  DimMask mask;
  if (dim.has_value()) {
    const int64_t d = at::maybe_wrap_dim(*dim, self.dim());
    at::native::zero_numel_check_dims(self, d, "aminmax");  // an IndexError, as on the CPU
    mask = mask_one(self, d);
  } else {
    TORCH_CHECK(self.numel() > 0,
                "aminmax(): cannot compute aminmax over an empty dimension as the operation has no identity.");
    mask = mask_of(self, std::nullopt);
  }
  // Only a known overlap is refused: strided outs are "too hard" to tell and are accepted, as on the CPU.
  const auto overlap = at::get_overlap_status(min, max);
  TORCH_CHECK_VALUE(overlap != at::MemOverlapStatus::Full && overlap != at::MemOverlapStatus::Partial,
                    "aminmax(): the `min` and `max` out= tensors must not overlap.");
  for (const Tensor* t : {&min, &max}) {
    TORCH_CHECK(t->scalar_type() == self.scalar_type(), "Expected out tensor to have dtype ", self.dtype(), ", but got ",
                t->dtype(), " instead");
  }
  resize_out(min, self, mask, keepdim);
  resize_out(max, self, mask, keepdim);
  Target lo(min, self.scalar_type()), hi(max, self.scalar_type());
  launch(FOO_REDUCE_OP_MIN, self, mask, keepdim, lo);
  launch(FOO_REDUCE_OP_MAX, self, mask, keepdim, hi);
  return {min, max};
}
std::tuple<Tensor, Tensor> aminmax(const Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  Tensor lo = at::empty({0}, self.options()), hi = at::empty({0}, self.options());
  ops::aminmax_out(self, dim, keepdim, lo, hi);
  return {lo, hi};
}

// ---- var / std -----------------------------------------------------------------------------------
Tensor var_correction(const Tensor& self, at::OptionalIntArrayRef dim, const std::optional<c10::Scalar>& correction, bool keepdim) {
  Tensor out = at::empty({0}, self.options());
  var_into(false, self, dim, correction, keepdim, out, nullptr);
  return out;
}
Tensor& var_correction_out(const Tensor& self, at::OptionalIntArrayRef dim, const std::optional<c10::Scalar>& correction,
                bool keepdim, Tensor& out) {
  var_into(false, self, dim, correction, keepdim, out, nullptr);
  return out;
}
Tensor std_correction(const Tensor& self, at::OptionalIntArrayRef dim, const std::optional<c10::Scalar>& correction, bool keepdim) {
  Tensor out = at::empty({0}, self.options());
  var_into(true, self, dim, correction, keepdim, out, nullptr);
  return out;
}
Tensor& std_correction_out(const Tensor& self, at::OptionalIntArrayRef dim, const std::optional<c10::Scalar>& correction,
                bool keepdim, Tensor& out) {
  var_into(true, self, dim, correction, keepdim, out, nullptr);
  return out;
}
std::tuple<Tensor, Tensor> var_mean(const Tensor& self, at::OptionalIntArrayRef dim,
                                    const std::optional<c10::Scalar>& correction, bool keepdim) {
  Tensor v = at::empty({0}, self.options()), m = at::empty({0}, self.options());
  var_into(false, self, dim, correction, keepdim, v, &m);
  return {v, m};
}
std::tuple<Tensor, Tensor> std_mean(const Tensor& self, at::OptionalIntArrayRef dim,
                                    const std::optional<c10::Scalar>& correction, bool keepdim) {
  Tensor v = at::empty({0}, self.options()), m = at::empty({0}, self.options());
  var_into(true, self, dim, correction, keepdim, v, &m);
  return {v, m};
}

// ---- norms ---------------------------------------------------------------------------------------
Tensor linalg_vector_norm(const Tensor& self, const c10::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                          std::optional<at::ScalarType> dtype) {
  Tensor out = at::empty({0}, self.options().dtype(dtype.value_or(self.scalar_type())));
  vector_norm_into(self, ord, dim, keepdim, dtype, out);
  return out;
}
Tensor& linalg_vector_norm_out(const Tensor& self, const c10::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                               std::optional<at::ScalarType> dtype, Tensor& out) {
  vector_norm_into(self, ord, dim, keepdim, dtype, out);
  return out;
}
Tensor norm_dim(const Tensor& self, const std::optional<c10::Scalar>& p, at::IntArrayRef dim, bool keepdim) {
  return ops::linalg_vector_norm(self, p.value_or(2.0), dim, keepdim, std::nullopt);
}
Tensor norm_dim_dtype(const Tensor& self, const std::optional<c10::Scalar>& p, at::IntArrayRef dim, bool keepdim,
                      at::ScalarType dtype) {
  return ops::linalg_vector_norm(self, p.value_or(2.0), dim, keepdim, dtype);
}
Tensor& norm_out(const Tensor& self, const std::optional<c10::Scalar>& p, at::IntArrayRef dim, bool keepdim, Tensor& out) {
  vector_norm_into(self, p.value_or(2.0), dim, keepdim, std::nullopt, out);
  return out;
}
Tensor& norm_dtype_out(const Tensor& self, const std::optional<c10::Scalar>& p, at::IntArrayRef dim, bool keepdim,
                       at::ScalarType dtype, Tensor& out) {
  vector_norm_into(self, p.value_or(2.0), dim, keepdim, dtype, out);
  return out;
}

// ---- all / any -----------------------------------------------------------------------------------
#define FOO_ALLANY(name, is_all)                                                                              \
  Tensor name(const Tensor& self) {                                                                           \
    Tensor out = at::empty({0}, self.options().dtype(bool_dtype(self)));                                      \
    all_any_into(is_all, self, mask_of(self, std::nullopt), false, out);                                      \
    return out;                                                                                               \
  }                                                                                                           \
  Tensor& name##_all_out(const Tensor& self, Tensor& out) {                                                   \
    all_any_into(is_all, self, mask_of(self, std::nullopt), false, out);                                      \
    return out;                                                                                               \
  }                                                                                                           \
  Tensor name##_dim(const Tensor& self, int64_t dim, bool keepdim) {                                          \
    Tensor out = at::empty({0}, self.options().dtype(bool_dtype(self)));                                      \
    all_any_into(is_all, self, mask_one(self, dim), keepdim, out);                                            \
    return out;                                                                                               \
  }                                                                                                           \
  Tensor& name##_dim_out(const Tensor& self, int64_t dim, bool keepdim, Tensor& out) {                        \
    all_any_into(is_all, self, mask_one(self, dim), keepdim, out);                                            \
    return out;                                                                                               \
  }                                                                                                           \
  Tensor name##_dims(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim) {                         \
    Tensor out = at::empty({0}, self.options().dtype(bool_dtype(self)));                                      \
    all_any_into(is_all, self, dims_mask(self, dim), keepdim, out);                                           \
    return out;                                                                                               \
  }                                                                                                           \
  Tensor& name##_dims_out(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, Tensor& out) {       \
    all_any_into(is_all, self, dims_mask(self, dim), keepdim, out);                                           \
    return out;                                                                                               \
  }

FOO_ALLANY(all, true)
FOO_ALLANY(any, false)
#undef FOO_ALLANY

// ---- logsumexp -----------------------------------------------------------------------------------
Tensor logsumexp(const Tensor& self, at::IntArrayRef dim, bool keepdim) {
  const auto dt = at::isIntegralType(self.scalar_type(), true) ? c10::typeMetaToScalarType(c10::get_default_dtype())
                                                                : self.scalar_type();
  Tensor out = at::empty({0}, self.options().dtype(dt));
  logsumexp_into(self, dim, keepdim, out);
  return out;
}
Tensor& logsumexp_out(const Tensor& self, at::IntArrayRef dim, bool keepdim, Tensor& out) {
  logsumexp_into(self, dim, keepdim, out);
  return out;
}

// ---- cumsum / cumprod ----------------------------------------------------------------------------
#define FOO_SCAN(name, code)                                                                                  \
  Tensor name(const Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {                         \
    Tensor out = at::empty(self.sizes(), self.options().dtype(scan_dtype(self, dtype)));                      \
    scan_into(code, self, dim, out, #name);                                                                   \
    return out;                                                                                               \
  }                                                                                                           \
  Tensor& name##_(Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype) {                           \
    TORCH_CHECK(!dtype.has_value() || *dtype == self.scalar_type(), #name "_(): dtype ", *dtype,              \
                " does not match the tensor's dtype ", self.scalar_type());                                   \
    scan_into(code, self, dim, self, #name);                                                                  \
    return self;                                                                                              \
  }                                                                                                           \
  Tensor& name##_out(const Tensor& self, int64_t dim, std::optional<at::ScalarType> dtype, Tensor& out) {     \
    out_dtype(out, dtype, #name);                                                                             \
    at::native::resize_output(out, self.sizes());                                                             \
    scan_into(code, self, dim, out, #name);                                                                   \
    return out;                                                                                               \
  }

FOO_SCAN(cumsum, FOO_SCAN_OP_CUM_SUM)
FOO_SCAN(cumprod, FOO_SCAN_OP_CUM_PROD)
#undef FOO_SCAN

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  FOO_IMPL(m, "sum", sum);
  FOO_IMPL(m, "sum.dim_IntList", sum_dim);
  FOO_IMPL(m, "sum.IntList_out", sum_out);
  FOO_IMPL(m, "nansum", nansum);
  FOO_IMPL(m, "nansum.out", nansum_out);
  FOO_IMPL(m, "mean", mean);
  FOO_IMPL(m, "mean.dim", mean_dim);
  FOO_IMPL(m, "mean.out", mean_out);
  FOO_IMPL(m, "prod", prod);
  FOO_IMPL(m, "prod.dim_int", prod_dim);
  FOO_IMPL(m, "prod.int_out", prod_out);
  FOO_IMPL(m, "max", max);
  FOO_IMPL(m, "max.unary_out", max_unary_out);
  FOO_IMPL(m, "max.dim", max_dim);
  FOO_IMPL(m, "max.dim_max", max_dim_out);
  FOO_IMPL(m, "min", min);
  FOO_IMPL(m, "min.unary_out", min_unary_out);
  FOO_IMPL(m, "min.dim", min_dim);
  FOO_IMPL(m, "min.dim_min", min_dim_out);
  FOO_IMPL(m, "amax", amax);
  FOO_IMPL(m, "amax.out", amax_out);
  FOO_IMPL(m, "amin", amin);
  FOO_IMPL(m, "amin.out", amin_out);
  FOO_IMPL(m, "argmax", argmax);
  FOO_IMPL(m, "argmax.out", argmax_out);
  FOO_IMPL(m, "argmin", argmin);
  FOO_IMPL(m, "argmin.out", argmin_out);
  FOO_IMPL(m, "aminmax", aminmax);
  FOO_IMPL(m, "aminmax.out", aminmax_out);
  FOO_IMPL(m, "var.correction", var_correction);
  FOO_IMPL(m, "var.correction_out", var_correction_out);
  FOO_IMPL(m, "std.correction", std_correction);
  FOO_IMPL(m, "std.correction_out", std_correction_out);
  FOO_IMPL(m, "var_mean.correction", var_mean);
  FOO_IMPL(m, "std_mean.correction", std_mean);
  FOO_IMPL(m, "linalg_vector_norm", linalg_vector_norm);
  FOO_IMPL(m, "linalg_vector_norm.out", linalg_vector_norm_out);
  FOO_IMPL(m, "norm.ScalarOpt_dim", norm_dim);
  FOO_IMPL(m, "norm.ScalarOpt_dim_dtype", norm_dim_dtype);
  FOO_IMPL(m, "norm.out", norm_out);
  FOO_IMPL(m, "norm.dtype_out", norm_dtype_out);
  FOO_IMPL(m, "all", all);
  FOO_IMPL(m, "all.all_out", all_all_out);
  FOO_IMPL(m, "all.dim", all_dim);
  FOO_IMPL(m, "all.out", all_dim_out);
  FOO_IMPL(m, "all.dims", all_dims);
  FOO_IMPL(m, "all.dims_out", all_dims_out);
  FOO_IMPL(m, "any", any);
  FOO_IMPL(m, "any.all_out", any_all_out);
  FOO_IMPL(m, "any.dim", any_dim);
  FOO_IMPL(m, "any.out", any_dim_out);
  FOO_IMPL(m, "any.dims", any_dims);
  FOO_IMPL(m, "any.dims_out", any_dims_out);
  FOO_IMPL(m, "logsumexp", logsumexp);
  FOO_IMPL(m, "logsumexp.out", logsumexp_out);
  FOO_IMPL(m, "cumsum", cumsum);
  FOO_IMPL(m, "cumsum_", cumsum_);
  FOO_IMPL(m, "cumsum.out", cumsum_out);
  FOO_IMPL(m, "cumprod", cumprod);
  FOO_IMPL(m, "cumprod_", cumprod_);
  FOO_IMPL(m, "cumprod.out", cumprod_out);
}

}  // namespace foo::ops
