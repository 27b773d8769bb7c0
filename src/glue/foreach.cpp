// Optimizer foreach ops (torch.optim's foreach SGD/Adam/AdamW, zero_grad, grad clipping's
// scaling). Fast path: every tensor on foo, one float32/float64 dtype, matching shapes: each
// tensor goes straight to the Rust elementwise kernels (foo_unary/foo_binary/foo_ternary),
// skipping the per-tensor dispatcher and TensorIterator set-up. Scalars become one foo tensor
// per call, read with zero strides. Anything else (mixed dtypes, reduced floats, CPU
// operands) runs the regular per-tensor ATen op, exactly what ATen's slow path does.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <vector>

#include "common.h"
#include "foo_ffi.h"
#include "memory.h"

namespace foo::ops::fe {
namespace {

using at::Tensor;
using at::TensorList;
using ScalarList = at::ArrayRef<c10::Scalar>;

const std::vector<int64_t>& zeros() {
  static const std::vector<int64_t> z(64, 0);
  return z;
}

// `s` (one element) seen with `like`'s shape and zero strides.
FooTensor bcast(const Tensor& s, const Tensor& like) {
  FooTensor d = describe(s);
  d.sizes = like.sizes().data();
  d.strides = zeros().data();
  d.ndim = static_cast<int32_t>(like.dim());
  return d;
}

bool fast_dtype(at::ScalarType t) { return t == at::kFloat || t == at::kDouble; }

bool fast_tensor(const Tensor& t, at::ScalarType dt) {
  return t.defined() && t.device().is_privateuseone() && t.scalar_type() == dt && t.dim() <= 25 &&
         t.is_non_overlapping_and_dense();
}

// All lists foo tensors of one float dtype, with matching shapes.
bool fast(std::initializer_list<TensorList> lists) {
  const TensorList first = *lists.begin();
  if (first.empty() || !first[0].defined()) return false;
  const auto dt = first[0].scalar_type();
  if (!fast_dtype(dt)) return false;
  for (const auto& l : lists) {
    if (l.size() != first.size()) return false;
    for (size_t i = 0; i < l.size(); ++i) {
      if (!fast_tensor(l[i], dt) || !l[i].sizes().equals(first[i].sizes())) return false;
    }
  }
  return true;
}

void check_sizes(std::initializer_list<TensorList> lists) {
  const auto n = lists.begin()->size();
  for (const auto& l : lists) {
    TORCH_CHECK(l.size() == n, "Tensor lists must have the same number of tensors, got ", n, " and ", l.size());
  }
}

// Converted without a range check, as the CPU's per-tensor ops convert a wrapped scalar.
Tensor scalar_tensor(const c10::Scalar& s, const Tensor& like) {
  Tensor t = at::empty({}, like.options());
  ops::fill_wrapping(t, s);
  return t;
}

Tensor scalar_list_tensor(at::ArrayRef<c10::Scalar> s, const Tensor& like) {
  Tensor cpu = at::empty({static_cast<int64_t>(s.size())}, at::TensorOptions().dtype(at::kDouble));
  auto* p = cpu.data_ptr<double>();
  for (size_t i = 0; i < s.size(); ++i) p[i] = s[i].toDouble();
  return cpu.to(like.scalar_type()).to(like.device());
}

void unary(int32_t op, const Tensor& out, const Tensor& a) {
  const FooTensor o = describe(out), x = describe(a);
  check(foo_unary(op, &o, &x, nullptr, 0), "foo foreach op");
}

void binary(int32_t op, const Tensor& out, const Tensor& a, const FooTensor& b, std::vector<FooScalar> p = {}) {
  const FooTensor o = describe(out), x = describe(a);
  check(foo_binary(op, &o, &x, &b, p.data(), static_cast<int32_t>(p.size())), "foo foreach op");
}

void ternary(int32_t op, const Tensor& out, const Tensor& a, const FooTensor& b, const FooTensor& c,
             std::vector<FooScalar> p = {}) {
  const FooTensor o = describe(out), x = describe(a);
  check(foo_ternary(op, &o, &x, &b, &c, p.data(), static_cast<int32_t>(p.size())), "foo foreach op");
}

std::vector<Tensor> empty_like_all(TensorList self) {
  std::vector<Tensor> out;
  out.reserve(self.size());
  for (const auto& t : self) out.push_back(at::empty_like(t));
  return out;
}

// ---- add -------------------------------------------------------------------------------------
void add_list_(TensorList self, TensorList other, const c10::Scalar& alpha) {
  check_sizes({self, other});
  if (!fast({self, other})) {
    for (size_t i = 0; i < self.size(); ++i) self[i].add_(other[i], alpha);
    return;
  }
  for (size_t i = 0; i < self.size(); ++i) binary(FOO_BINARY_OP_ADD, self[i], self[i], describe(other[i]), {to_ffi(alpha)});
}
std::vector<Tensor> add_list(TensorList self, TensorList other, const c10::Scalar& alpha) {
  check_sizes({self, other});
  if (!fast({self, other})) {
    std::vector<Tensor> out;
    for (size_t i = 0; i < self.size(); ++i) out.push_back(at::add(self[i], other[i], alpha));
    return out;
  }
  auto out = empty_like_all(self);
  for (size_t i = 0; i < self.size(); ++i) binary(FOO_BINARY_OP_ADD, out[i], self[i], describe(other[i]), {to_ffi(alpha)});
  return out;
}
void add_scalar_(TensorList self, const c10::Scalar& s) {
  if (!fast({self}) || s.isComplex()) {
    for (const auto& t : self) t.add_(s);
    return;
  }
  const Tensor st = scalar_tensor(s, self[0]);
  for (const auto& t : self) binary(FOO_BINARY_OP_ADD, t, t, bcast(st, t), {to_ffi(c10::Scalar(1))});
}
std::vector<Tensor> add_scalar(TensorList self, const c10::Scalar& s) {
  if (!fast({self}) || s.isComplex()) {
    std::vector<Tensor> out;
    for (const auto& t : self) out.push_back(at::add(t, s));
    return out;
  }
  const Tensor st = scalar_tensor(s, self[0]);
  auto out = empty_like_all(self);
  for (size_t i = 0; i < self.size(); ++i)
    binary(FOO_BINARY_OP_ADD, out[i], self[i], bcast(st, self[i]), {to_ffi(c10::Scalar(1))});
  return out;
}

// ---- mul / div -------------------------------------------------------------------------------
#define FOO_FOREACH_BINARY(name, code, method)                                                   \
  void name##_list_(TensorList self, TensorList other) {                                         \
    check_sizes({self, other});                                                                  \
    if (!fast({self, other})) {                                                                  \
      for (size_t i = 0; i < self.size(); ++i) self[i].method##_(other[i]);                      \
      return;                                                                                    \
    }                                                                                            \
    for (size_t i = 0; i < self.size(); ++i) binary(code, self[i], self[i], describe(other[i])); \
  }                                                                                              \
  std::vector<Tensor> name##_list(TensorList self, TensorList other) {                           \
    check_sizes({self, other});                                                                  \
    if (!fast({self, other})) {                                                                  \
      std::vector<Tensor> out;                                                                   \
      for (size_t i = 0; i < self.size(); ++i) out.push_back(at::method(self[i], other[i]));     \
      return out;                                                                                \
    }                                                                                            \
    auto out = empty_like_all(self);                                                             \
    for (size_t i = 0; i < self.size(); ++i) binary(code, out[i], self[i], describe(other[i]));  \
    return out;                                                                                  \
  }                                                                                              \
  void name##_scalar_(TensorList self, const c10::Scalar& s) {                                   \
    if (!fast({self}) || s.isComplex()) {                                                        \
      for (const auto& t : self) t.method##_(s);                                                 \
      return;                                                                                    \
    }                                                                                            \
    const Tensor st = scalar_tensor(s, self[0]);                                                 \
    for (const auto& t : self) binary(code, t, t, bcast(st, t));                                 \
  }                                                                                              \
  std::vector<Tensor> name##_scalar(TensorList self, const c10::Scalar& s) {                     \
    if (!fast({self}) || s.isComplex()) {                                                        \
      std::vector<Tensor> out;                                                                   \
      for (const auto& t : self) out.push_back(at::method(t, s));                                \
      return out;                                                                                \
    }                                                                                            \
    const Tensor st = scalar_tensor(s, self[0]);                                                 \
    auto out = empty_like_all(self);                                                             \
    for (size_t i = 0; i < self.size(); ++i) binary(code, out[i], self[i], bcast(st, self[i]));  \
    return out;                                                                                  \
  }                                                                                              \
  void name##_scalarlist_(TensorList self, at::ArrayRef<c10::Scalar> s) {                        \
    TORCH_CHECK(s.size() == self.size(), "Tensor list must have same number of elements as scalar list."); \
    bool complex = false;                                                                        \
    for (const auto& v : s) complex = complex || v.isComplex();                                  \
    if (!fast({self}) || complex) {                                                              \
      for (size_t i = 0; i < self.size(); ++i) self[i].method##_(s[i]);                          \
      return;                                                                                    \
    }                                                                                            \
    const Tensor st = scalar_list_tensor(s, self[0]);                                            \
    for (size_t i = 0; i < self.size(); ++i) {                                                   \
      const Tensor si = st[static_cast<int64_t>(i)];                                             \
      binary(code, self[i], self[i], bcast(si, self[i]));                                        \
    }                                                                                            \
  }                                                                                              \
  void name##_tensor_(TensorList self, const Tensor& other) {                                    \
    const bool ok = fast({self}) && other.defined() && other.numel() == 1 &&                     \
                    other.device().is_privateuseone() && other.scalar_type() == self[0].scalar_type(); \
    if (!ok) {                                                                                   \
      for (const auto& t : self) t.method##_(other);                                             \
      return;                                                                                    \
    }                                                                                            \
    for (const auto& t : self) binary(code, t, t, bcast(other, t));                              \
  }

FOO_FOREACH_BINARY(mul, FOO_BINARY_OP_MUL, mul)
FOO_FOREACH_BINARY(div, FOO_BINARY_OP_DIV, div)
#undef FOO_FOREACH_BINARY

void maximum_list_(TensorList self, TensorList other) {
  check_sizes({self, other});
  if (!fast({self, other})) {
    for (size_t i = 0; i < self.size(); ++i) self[i].copy_(at::maximum(self[i], other[i]));
    return;
  }
  for (size_t i = 0; i < self.size(); ++i) binary(FOO_BINARY_OP_MAXIMUM, self[i], self[i], describe(other[i]));
}

// ---- addcmul / addcdiv -----------------------------------------------------------------------
#define FOO_FOREACH_POINTWISE(name, code)                                                             \
  void name##_scalar_(TensorList self, TensorList t1, TensorList t2, const c10::Scalar& value) {      \
    check_sizes({self, t1, t2});                                                                      \
    if (!fast({self, t1, t2})) {                                                                      \
      for (size_t i = 0; i < self.size(); ++i) self[i].name##_(t1[i], t2[i], value);                  \
      return;                                                                                         \
    }                                                                                                 \
    for (size_t i = 0; i < self.size(); ++i)                                                          \
      ternary(code, self[i], self[i], describe(t1[i]), describe(t2[i]), {to_ffi(value)});             \
  }                                                                                                   \
  void name##_scalarlist_(TensorList self, TensorList t1, TensorList t2, at::ArrayRef<c10::Scalar> s) { \
    check_sizes({self, t1, t2});                                                                      \
    TORCH_CHECK(s.size() == self.size(), "Tensor list must have same number of elements as scalar list."); \
    if (!fast({self, t1, t2})) {                                                                      \
      for (size_t i = 0; i < self.size(); ++i) self[i].name##_(t1[i], t2[i], s[i]);                   \
      return;                                                                                         \
    }                                                                                                 \
    for (size_t i = 0; i < self.size(); ++i)                                                          \
      ternary(code, self[i], self[i], describe(t1[i]), describe(t2[i]), {to_ffi(s[i])});              \
  }

FOO_FOREACH_POINTWISE(addcmul, FOO_TERNARY_OP_ADDCMUL)
FOO_FOREACH_POINTWISE(addcdiv, FOO_TERNARY_OP_ADDCDIV)
#undef FOO_FOREACH_POINTWISE

// ---- lerp ------------------------------------------------------------------------------------
void lerp_scalar_(TensorList self, TensorList end, const c10::Scalar& weight) {
  check_sizes({self, end});
  if (!fast({self, end}) || weight.isComplex()) {
    for (size_t i = 0; i < self.size(); ++i) self[i].lerp_(end[i], weight);
    return;
  }
  const Tensor w = scalar_tensor(weight, self[0]);
  for (size_t i = 0; i < self.size(); ++i) ternary(FOO_TERNARY_OP_LERP, self[i], self[i], describe(end[i]), bcast(w, self[i]));
}
void lerp_list_(TensorList self, TensorList end, TensorList weight) {
  check_sizes({self, end, weight});
  if (!fast({self, end, weight})) {
    for (size_t i = 0; i < self.size(); ++i) self[i].lerp_(end[i], weight[i]);
    return;
  }
  for (size_t i = 0; i < self.size(); ++i)
    ternary(FOO_TERNARY_OP_LERP, self[i], self[i], describe(end[i]), describe(weight[i]));
}

// ---- unary -----------------------------------------------------------------------------------
#define FOO_FOREACH_UNARY(name, code)                                          \
  std::vector<Tensor> name(TensorList self) {                                  \
    if (!fast({self})) {                                                       \
      std::vector<Tensor> out;                                                 \
      for (const auto& t : self) out.push_back(at::name(t));                   \
      return out;                                                              \
    }                                                                          \
    auto out = empty_like_all(self);                                           \
    for (size_t i = 0; i < self.size(); ++i) unary(code, out[i], self[i]);     \
    return out;                                                                \
  }                                                                            \
  void name##_(TensorList self) {                                              \
    if (!fast({self})) {                                                       \
      for (const auto& t : self) t.name##_();                                  \
      return;                                                                  \
    }                                                                          \
    for (const auto& t : self) unary(code, t, t);                              \
  }

FOO_FOREACH_UNARY(sqrt, FOO_UNARY_OP_SQRT)
FOO_FOREACH_UNARY(neg, FOO_UNARY_OP_NEG)
#undef FOO_FOREACH_UNARY

void zero_(TensorList self) {
  const FooScalar z = to_ffi(c10::Scalar(0));
  for (const auto& t : self) {
    if (t.device().is_privateuseone() && is_supported_dtype(t.scalar_type()) && t.dim() <= 25 &&
        t.is_non_overlapping_and_dense()) {
      if (t.numel() == 0) continue;
      const FooTensor d = describe(t);
      check(foo_fill(&d, &z), "_foreach_zero_");
    } else {
      t.zero_();
    }
  }
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  FOO_IMPL(m, "_foreach_add_.List", add_list_);
  FOO_IMPL(m, "_foreach_add.List", add_list);
  FOO_IMPL(m, "_foreach_add_.Scalar", add_scalar_);
  FOO_IMPL(m, "_foreach_add.Scalar", add_scalar);
  FOO_IMPL(m, "_foreach_mul_.List", mul_list_);
  FOO_IMPL(m, "_foreach_mul.List", mul_list);
  FOO_IMPL(m, "_foreach_mul_.Scalar", mul_scalar_);
  FOO_IMPL(m, "_foreach_mul.Scalar", mul_scalar);
  FOO_IMPL(m, "_foreach_mul_.ScalarList", mul_scalarlist_);
  FOO_IMPL(m, "_foreach_mul_.Tensor", mul_tensor_);
  FOO_IMPL(m, "_foreach_div_.List", div_list_);
  FOO_IMPL(m, "_foreach_div.List", div_list);
  FOO_IMPL(m, "_foreach_div_.Scalar", div_scalar_);
  FOO_IMPL(m, "_foreach_div.Scalar", div_scalar);
  FOO_IMPL(m, "_foreach_div_.ScalarList", div_scalarlist_);
  FOO_IMPL(m, "_foreach_div_.Tensor", div_tensor_);
  FOO_IMPL(m, "_foreach_maximum_.List", maximum_list_);
  FOO_IMPL(m, "_foreach_addcmul_.Scalar", addcmul_scalar_);
  FOO_IMPL(m, "_foreach_addcmul_.ScalarList", addcmul_scalarlist_);
  FOO_IMPL(m, "_foreach_addcdiv_.Scalar", addcdiv_scalar_);
  FOO_IMPL(m, "_foreach_addcdiv_.ScalarList", addcdiv_scalarlist_);
  FOO_IMPL(m, "_foreach_lerp_.Scalar", lerp_scalar_);
  FOO_IMPL(m, "_foreach_lerp_.List", lerp_list_);
  FOO_IMPL(m, "_foreach_sqrt", sqrt);
  FOO_IMPL(m, "_foreach_sqrt_", sqrt_);
  FOO_IMPL(m, "_foreach_neg", neg);
  FOO_IMPL(m, "_foreach_neg_", neg_);
  FOO_IMPL(m, "_foreach_zero_", zero_);
}

}  // namespace foo::ops::fe
