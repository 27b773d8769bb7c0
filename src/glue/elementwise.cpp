#include "elementwise.h"

#include <algorithm>
#include <cmath>

#include <ATen/MemoryOverlap.h>
#include <c10/core/DeviceGuard.h>

#include "memory.h"

namespace foo::ew {

const at::Tensor& input_as(const at::Tensor& t, at::ScalarType dtype, c10::IntArrayRef shape,
                           const at::TensorOptions& options, at::Tensor& keep) {
  // The common case (a foo tensor of the right dtype and shape) is described as it is: no
  // refcount traffic on the per-op path.
  if (!t.device().is_cpu() && t.scalar_type() == dtype && t.sizes().equals(shape)) return t;
  at::Tensor x = t;
  if (x.device().is_cpu()) {
    TORCH_CHECK(x.dim() == 0, "foo kernels take CPU tensors only as 0-dim scalars, got shape ", x.sizes());
    x = at::empty({}, options.dtype(dtype));
    ops::fill_wrapping(x, t.item());
  } else if (x.scalar_type() != dtype) {
    x = x.to(dtype);
  }
  keep = x.sizes().equals(shape) ? x : x.expand(shape);
  return keep;
}

FooScalar absent() {
  FooScalar s{};
  s.tag = -1;
  return s;
}

std::vector<FooScalar> to_ffi(std::initializer_list<c10::Scalar> params) {
  std::vector<FooScalar> out;
  out.reserve(params.size());
  for (const auto& p : params) out.push_back(foo::to_ffi(p));
  return out;
}

namespace {

// Writes into `out` when it already has the kernel's result dtype, else into a temporary that
// is converted into `out` afterwards (e.g. `torch.add(a, b, out=int_tensor)` after a float add).
template <typename Kernel>
const at::Tensor& run(at::TensorIterator& iter, at::ScalarType result, const Kernel& kernel) {
  const at::Tensor& out = iter.output(0);
  // An empty result still reaches the kernel: its dtype dispatch refuses what the CPU refuses
  // (complex elu, float bitwise_not, ...), so empty inputs raise the same errors as full ones.
  const c10::DeviceGuard guard(out.device());
  if (out.scalar_type() == result) {
    kernel(out);
  } else {
    const at::Tensor target = at::empty_like(out, out.options().dtype(result));
    kernel(target);
    out.copy_(target);
  }
  return out;
}

}  // namespace

const at::Tensor& launch_unary(at::TensorIterator& iter, int32_t op, at::ScalarType result, at::ScalarType input,
                        std::initializer_list<c10::Scalar> params) {
  return launch_unary_raw(iter, op, result, input, to_ffi(params));
}

const at::Tensor& launch_unary_raw(at::TensorIterator& iter, int32_t op, at::ScalarType result, at::ScalarType input,
                            const std::vector<FooScalar>& p) {
  return run(iter, result, [&](const at::Tensor& target) {
    at::Tensor keep_a;
    const at::Tensor& a = input_as(iter.input(0), input, target.sizes(), target.options(), keep_a);
    const FooTensor o = describe(target), da = describe(a);
    check(foo_unary(op, &o, &da, p.data(), static_cast<int32_t>(p.size())), "foo unary op");
  });
}

namespace {

// A one-element second operand of another dtype (a Python number, a 0-dim tensor) that `dtype`,
// float16 or bfloat16, cannot hold exactly. The CPU's mul and div kernels (true, trunc, floor)
// take such an operand unrounded and compute in float32 ("opmath"): float16 1e-5 * 1e6 is 10, not
// inf * 0 = nan. Its other kernels (add, sub, pow, remainder, ...) and a scalar *first* operand
// round it to `dtype` first, as the foo kernels do.
bool opmath_scalar(int32_t op, const at::Tensor& second, at::ScalarType dtype) {
  if (op != FOO_BINARY_OP_MUL && op != FOO_BINARY_OP_DIV && op != FOO_BINARY_OP_DIV_TRUNC && op != FOO_BINARY_OP_DIV_FLOOR) {
    return false;
  }
  if ((dtype != at::kHalf && dtype != at::kBFloat16) || second.numel() != 1 || second.scalar_type() == dtype ||
      second.is_complex()) {
    return false;
  }
  const auto v = static_cast<float>(second.item<double>());
  const float r = dtype == at::kHalf ? static_cast<float>(c10::Half(v)) : static_cast<float>(c10::BFloat16(v));
  return r != v && !std::isnan(v);
}

}  // namespace

const at::Tensor& launch_binary(at::TensorIterator& iter, int32_t op, at::ScalarType result, at::ScalarType a, at::ScalarType b,
                         std::initializer_list<c10::Scalar> params) {
  auto p = to_ffi(params);
  if (a == result && b == result && opmath_scalar(op, iter.input(1), result)) {
    if (op == FOO_BINARY_OP_MUL || op == FOO_BINARY_OP_DIV) {
      // The number as p0, which the kernel takes in float32 unrounded: one pass in the tensor's
      // dtype (a float32 copy of the tensor and of the result had cost 3x the CPU's time).
      p = to_ffi({c10::Scalar(iter.input(1).item<double>())});
    } else {
      // float32 in, float32 out, rounded once into the float16/bfloat16 result: the CPU's bits.
      result = a = b = at::kFloat;
    }
  }
  return run(iter, result, [&](const at::Tensor& target) {
    at::Tensor keep_x;
    const at::Tensor& x = input_as(iter.input(0), a, target.sizes(), target.options(), keep_x);
    at::Tensor keep_y;
    const at::Tensor& y = input_as(iter.input(1), b, target.sizes(), target.options(), keep_y);
    const FooTensor o = describe(target), dx = describe(x), dy = describe(y);
    check(foo_binary(op, &o, &dx, &dy, p.data(), static_cast<int32_t>(p.size())), "foo binary op");
  });
}

const at::Tensor& launch_ternary(at::TensorIterator& iter, int32_t op, at::ScalarType result, at::ScalarType a,
                          at::ScalarType b, at::ScalarType c, std::initializer_list<c10::Scalar> params) {
  const auto p = to_ffi(params);
  return run(iter, result, [&](const at::Tensor& target) {
    at::Tensor keep_x;
    const at::Tensor& x = input_as(iter.input(0), a, target.sizes(), target.options(), keep_x);
    at::Tensor keep_y;
    const at::Tensor& y = input_as(iter.input(1), b, target.sizes(), target.options(), keep_y);
    at::Tensor keep_z;
    const at::Tensor& z = input_as(iter.input(2), c, target.sizes(), target.options(), keep_z);
    const FooTensor o = describe(target), dx = describe(x), dy = describe(y), dz = describe(z);
    check(foo_ternary(op, &o, &dx, &dy, &dz, p.data(), static_cast<int32_t>(p.size())), "foo ternary op");
  });
}

namespace {

// A Python number (a wrapped 0-dim CPU tensor) next to a float32 or float64 tensor: the iterator
// converts it to the tensor's dtype (float16 and bfloat16 multiply by it unrounded, see
// opmath_scalar, so they keep the iterator).
bool wrapped_float_operand(const at::Tensor& a, const at::Tensor& b) {
  const auto dt = a.scalar_type();
  return (dt == at::kFloat || dt == at::kDouble) && b.unsafeGetTensorImpl()->is_wrapped_number() &&
         b.device().is_cpu() && !b.is_complex();
}

// The Python number converted straight to T, as the iterator's scalar read converts it.
template <typename T>
T wrapped_as(const at::Tensor& b) {
  switch (b.scalar_type()) {
    case at::kDouble:
      return static_cast<T>(*b.const_data_ptr<double>());
    case at::kLong:
      return static_cast<T>(*b.const_data_ptr<int64_t>());
    case at::kBool:
      return static_cast<T>(*b.const_data_ptr<bool>());
    default:
      return b.item().to<T>();
  }
}

// Contiguous with the strides `empty` gives, size-1 dims included: the iterator orders its
// output's dims by its inputs' strides, and (3, 1, 4) with strides (4, 100, 1), contiguous too,
// gets (4, 12, 1).
bool row_major(const at::Tensor& t) {
  if (!t.is_contiguous()) return false;
  const auto sizes = t.sizes(), strides = t.strides();
  int64_t expected = 1;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    if (strides[d] != expected) return false;
    expected *= std::max<int64_t>(sizes[d], 1);
  }
  return true;
}

}  // namespace

bool dense_operands(bool float_op, const at::Tensor& out, const at::Tensor& a, const at::Tensor* b) {
  const auto plain = [&](const at::Tensor& t) {
    return t.device().is_privateuseone() && row_major(t) && !t.is_conj() && !t.is_neg();
  };
  if (!plain(a) || (float_op && !at::isFloatingType(a.scalar_type()))) return false;
  if (b != nullptr && !(plain(*b) && b->scalar_type() == a.scalar_type() && b->device() == a.device() &&
                        b->sizes().equals(a.sizes())) &&
      !wrapped_float_operand(a, *b)) {
    return false;
  }
  // In place: a partial overlap is the iterator's error to raise.
  return !out.defined() ||
         (out.is_same(a) && (b == nullptr || at::get_overlap_status(a, *b) != at::MemOverlapStatus::Partial));
}

namespace {

// The output of a dense op: `out` itself when in place, else a new contiguous tensor of `a`'s
// shape and dtype on `a`'s device (the guard's).
void dense_target(at::Tensor& out, const at::Tensor& a) {
  if (out.defined()) return;
  out = at::detail::empty_generic(a.sizes(), c10::GetAllocator(kFoo), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                  a.scalar_type(), std::nullopt);
}

}  // namespace

void dense_unary(at::Tensor& out, int32_t op, const at::Tensor& a, std::initializer_list<c10::Scalar> params) {
  const c10::DeviceGuard guard(a.device());
  dense_target(out, a);
  const auto p = to_ffi(params);
  const FooTensor o = describe(out), da = describe(a);
  check(foo_unary(op, &o, &da, p.data(), static_cast<int32_t>(p.size())), "foo unary op");
}

void dense_binary(at::Tensor& out, int32_t op, const at::Tensor& a, const at::Tensor& b,
                  std::initializer_list<c10::Scalar> params) {
  const c10::DeviceGuard guard(a.device());
  dense_target(out, a);
  const auto p = to_ffi(params);
  const FooTensor o = describe(out), da = describe(a);
  if (b.device().is_cpu()) {
    // The Python number in `a`'s dtype, broadcast over `a`'s shape by zero strides.
    const c10::SmallVector<int64_t, 8> zeros(a.dim(), 0);
    float narrow = 0;
    double wide = 0;
    FooTensor db = describe(a);
    if (a.scalar_type() == at::kFloat) {
      narrow = wrapped_as<float>(b);
      db.data = &narrow;
    } else {
      wide = wrapped_as<double>(b);
      db.data = &wide;
    }
    db.strides = zeros.data();
    db.device = -1;
    check(foo_binary(op, &o, &da, &db, p.data(), static_cast<int32_t>(p.size())), "foo binary op");
    return;
  }
  const FooTensor db = describe(b);
  check(foo_binary(op, &o, &da, &db, p.data(), static_cast<int32_t>(p.size())), "foo binary op");
}

namespace {

// A non-dense input of rank > 0 (one the CPU's conversion would restride).
bool restrided_by_conversion(const at::TensorBase& t) {
  return t.defined() && t.dim() > 0 && !t.is_non_overlapping_and_dense();
}

at::ScalarType input_dtype(int kind, const at::TensorBase& a, const at::TensorBase& b) {
  const auto common = at::result_type(at::Tensor(a), at::Tensor(b));
  if (kind == kBinaryFloatOp && at::isIntegralType(common, /*includeBool=*/true)) {
    return c10::typeMetaToScalarType(c10::get_default_dtype());
  }
  return common;
}

}  // namespace

bool promotes_layout(const at::TensorBase& a, const at::TensorBase& b) {
  return restrided_by_conversion(a) || restrided_by_conversion(b);
}

at::TensorIterator promoted_iterator(int kind, const at::TensorBase& out, const at::TensorBase& a,
                                     const at::TensorBase& b) {
  const auto dt = input_dtype(kind, a, b);
  const auto as_cpu = [&](const at::TensorBase& t) {
    at::Tensor x(t);
    // An in-place op's self stays itself (it is the output too).
    return restrided_by_conversion(t) && t.scalar_type() != dt && !t.is_same(out) ? x.to(dt) : x;
  };
  const at::Tensor x = as_cpu(a), y = as_cpu(b);
  at::TensorIterator it;
  if (kind == kBinaryFloatOp) {
    it.build_binary_float_op(out, x, y);
  } else if (kind == kComparisonOp) {
    it.build_comparison_op(out, x, y);
  } else {
    it.build_binary_op(out, x, y);
  }
  return it;
}

at::TensorIterator fixed_dtype_op(at::Tensor& out, std::initializer_list<const at::Tensor*> inputs, at::ScalarType dtype) {
  at::TensorIteratorConfig config;
  config.set_check_mem_overlap(true).check_all_same_dtype(false).allow_cpu_scalars(true).add_output(out);
  for (const auto* t : inputs) config.add_const_input(*t);
  if (!out.defined()) config.declare_static_dtype(dtype);
  return config.build();
}

}  // namespace foo::ew
