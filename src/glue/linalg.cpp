// Matrix products: argument checks, output shapes and 3-D views here; the arithmetic in Rust
// (foo_matmul, gemm crate; float16/bfloat16 are multiplied in float32 there).
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/addr_native.h>
#include <torch/library.h>

#include <cstring>

#include "common.h"
#include "foo_ffi.h"

namespace foo::ops {
namespace {

// A 3-D descriptor over a tensor's memory with explicit sizes and strides (no ATen view op).
struct View3 {
  int64_t sizes[3];
  int64_t strides[3];
  FooTensor d;
  View3(const at::Tensor& t, std::array<int64_t, 3> sz, std::array<int64_t, 3> st) {
    for (int i = 0; i < 3; ++i) {
      sizes[i] = sz[i];
      strides[i] = st[i];
    }
    d = describe(t);
    d.sizes = sizes;
    d.strides = strides;
    d.ndim = 3;
  }
};

// The role of an operand as a 3-D [B, R, C] matrix stack.
View3 as3(const at::Tensor& t) {
  switch (t.dim()) {
    case 3:
      return View3(t, {t.size(0), t.size(1), t.size(2)}, {t.stride(0), t.stride(1), t.stride(2)});
    case 2:
      return View3(t, {1, t.size(0), t.size(1)}, {0, t.stride(0), t.stride(1)});
    case 1:  // a column vector [K, 1]
      return View3(t, {1, t.size(0), 1}, {0, t.stride(0), 1});
    default:  // a 0-dim result [1, 1]
      return View3(t, {1, 1, 1}, {0, 1, 1});
  }
}

// A 1-D tensor as a row vector [1, K].
View3 as_row(const at::Tensor& t) { return View3(t, {1, 1, t.size(0)}, {0, 1, t.stride(0)}); }

void call(const at::Tensor& out, const View3& o, const View3& a, const View3& b, const View3* c,
          const c10::Scalar& beta, const c10::Scalar& alpha, const char* name) {
  const FooScalar fb = to_ffi(beta), fa = to_ffi(alpha);
  (void)out;
  check(foo_matmul(&o.d, &a.d, &b.d, c ? &c->d : nullptr, &fb, &fa), name);
}

// out (already sized) = beta * c + alpha * (a @ b), where the operands are given with the
// view builders above. `c` is undefined when absent. Handles outputs aliasing inputs.
template <typename MakeA, typename MakeB, typename MakeO>
void launch(const at::Tensor& out, const at::Tensor& a_view, const at::Tensor& b_view, const at::Tensor& c_view,
            const c10::Scalar& beta, const c10::Scalar& alpha, MakeA make_a, MakeB make_b, MakeO make_o,
            const char* name) {
  // The Conjugate and Negative keys fall through to these ops (as to the CPU's, whose BLAS calls
  // take the conjugate bit as a transpose flag): the kernel reads physical values, so a
  // conjugate or negative view is materialized first (x.conj() @ y was x @ y).
  const at::Tensor a = a_view.resolve_conj().resolve_neg();
  const at::Tensor b = b_view.resolve_conj().resolve_neg();
  const at::Tensor c = c_view.defined() ? c_view.resolve_conj().resolve_neg() : c_view;
  check_supported_dtype(out.scalar_type(), name);
  check_scalar_fits_opmath(beta, out.scalar_type());
  check_scalar_fits_opmath(alpha, out.scalar_type());
  if (out.numel() == 0) return;
  at::assert_no_internal_overlap(out);
  const bool beta_zero = beta.isComplex()         ? beta.toComplexDouble() == c10::complex<double>(0.0)
                         : beta.isFloatingPoint() ? beta.toDouble() == 0.0
                                                  : beta.toLong() == 0;
  const bool use_c = c.defined() && !beta_zero;
  const bool alpha_zero = alpha.isComplex()         ? alpha.toComplexDouble() == c10::complex<double>(0.0)
                          : alpha.isFloatingPoint() ? alpha.toDouble() == 0.0
                                                    : alpha.toLong() == 0;
  // As the CPU's BLAS path for addmm and addmv (not baddbmm, whose CPU kernel multiplies): alpha
  // = 0 skips the product, so nan or inf in the matrices does not reach the result
  // (addmm(c, a, nan, alpha=0) is c, not nan). float16/bfloat16 take the CPU's own GEMM, which
  // multiplies.
  const auto st = out.scalar_type();
  const bool blas_type = st == at::kFloat || st == at::kDouble || st == at::kComplexFloat || st == at::kComplexDouble;
  if (alpha_zero && blas_type && (std::strcmp(name, "addmm") == 0 || std::strcmp(name, "addmv") == 0)) {
    if (!use_c) {
      out.zero_();
    } else if (!c.is_same(out) || !(beta.isIntegral(false) && beta.toLong() == 1)) {
      out.copy_(at::mul(c.expand(out.sizes()), beta));
    }
    return;
  }
  const bool out_is_c = use_c && c.is_same(out);
  const bool alias = out.is_conj() || out.is_neg() || (use_c && !c.is_same(c_view) && c_view.is_same(out)) ||
                     at::get_overlap_status(out, a) != at::MemOverlapStatus::No ||
                     at::get_overlap_status(out, b) != at::MemOverlapStatus::No ||
                     (use_c && !out_is_c && at::get_overlap_status(out, c) != at::MemOverlapStatus::No);
  if (alias) {
    // The output overlaps an input: compute into a fresh buffer, then copy into out.
    at::Tensor tmp = at::empty(out.sizes(), out.options());
    at::Tensor c2;
    if (use_c) c2 = c.expand(out.sizes());
    const View3 o = make_o(tmp), va = make_a(a), vb = make_b(b);
    if (use_c) {
      const View3 vc = make_o(c2);
      call(tmp, o, va, vb, &vc, beta, alpha, name);
    } else {
      call(tmp, o, va, vb, nullptr, beta, alpha, name);
    }
    out.copy_(tmp);
    return;
  }
  const View3 o = make_o(out), va = make_a(a), vb = make_b(b);
  if (use_c) {
    const at::Tensor c2 = out_is_c ? out : c.expand(out.sizes());
    const View3 vc = make_o(c2);
    call(out, o, va, vb, &vc, beta, alpha, name);
  } else {
    call(out, o, va, vb, nullptr, beta, alpha, name);
  }
}

void launch3(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor& c,
             const c10::Scalar& beta, const c10::Scalar& alpha, const char* name) {
  launch(out, a, b, c, beta, alpha, as3, as3, as3, name);
}

void check_out_dtype(const at::Tensor& out, at::ScalarType t) {
  TORCH_CHECK(out.scalar_type() == t, "Expected out tensor to have dtype ", t, ", but got ", out.scalar_type(),
              " instead");
}

void check_mm(const at::Tensor& self, const at::Tensor& mat2) {
  TORCH_CHECK(self.dim() == 2, "self must be a matrix");
  TORCH_CHECK(mat2.dim() == 2, "mat2 must be a matrix");
  TORCH_CHECK(self.size(1) == mat2.size(0), "mat1 and mat2 shapes cannot be multiplied (", self.size(0), "x",
              self.size(1), " and ", mat2.size(0), "x", mat2.size(1), ")");
  TORCH_CHECK(self.scalar_type() == mat2.scalar_type(), "expected m1 and m2 to have the same dtype, but got: ",
              self.dtype(), " != ", mat2.dtype());
}

void check_addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2) {
  TORCH_CHECK(mat1.dim() == 2, "mat1 must be a matrix, got ", mat1.dim(), "-D tensor");
  TORCH_CHECK(mat2.dim() == 2, "mat2 must be a matrix, got ", mat2.dim(), "-D tensor");
  TORCH_CHECK(mat1.size(1) == mat2.size(0), "mat1 and mat2 shapes cannot be multiplied (", mat1.size(0), "x",
              mat1.size(1), " and ", mat2.size(0), "x", mat2.size(1), ")");
  TORCH_CHECK(mat1.scalar_type() == mat2.scalar_type() && self.scalar_type() == mat2.scalar_type(),
              "self and mat2 must have the same dtype, but got ", self.scalar_type(), " and ", mat2.scalar_type());
}

void check_bmm(const at::Tensor& b1, const at::Tensor& b2) {
  TORCH_CHECK(b1.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(b2.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(b2.size(0) == b1.size(0) && b2.size(1) == b1.size(2),
              "Expected size for first two dimensions of batch2 tensor to be: [", b1.size(0), ", ", b1.size(2),
              "] but got: [", b2.size(0), ", ", b2.size(1), "].");
  TORCH_CHECK(b1.scalar_type() == b2.scalar_type(), "expected scalar type ", b1.scalar_type(),
              " but found ", b2.scalar_type());
}

void check_mv(const at::Tensor& mat, const at::Tensor& vec) {
  TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1, "vector + matrix @ vector expected, got ", 1, ", ", mat.dim(),
              ", ", vec.dim());
  TORCH_CHECK(mat.size(1) == vec.size(0), "size mismatch, got input (", mat.size(0), "), mat (", mat.size(0),
              "x", mat.size(1), "), vec (", vec.size(0), ")");
  TORCH_CHECK(mat.scalar_type() == vec.scalar_type(), "expected scalar type ", mat.scalar_type(),
              " but found ", vec.scalar_type());
}

void check_dot(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.dim() == 1 && b.dim() == 1, "1D tensors expected, but got ", a.dim(), "D and ", b.dim(),
              "D tensors");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "dot : expected both vectors to have same dtype, but found ",
              a.scalar_type(), " and ", b.scalar_type());
  TORCH_CHECK(a.numel() == b.numel(), "inconsistent tensor size, expected tensor [", a.numel(), "] and src [",
              b.numel(), "] to have the same number of elements, but got ", a.numel(), " and ", b.numel(),
              " elements respectively");
}

void mv_into(const at::Tensor& out, const at::Tensor& mat, const at::Tensor& vec, const at::Tensor& c,
             const c10::Scalar& beta, const c10::Scalar& alpha, const char* name) {
  // As the CPU's addmv_out_cpu: an empty matrix gives zeros (beta 0) or self * beta before any
  // dtype dispatch, so bool works there and nowhere else.
  if (mat.numel() == 0) {
    if (beta.toComplexDouble() == 0.0) {
      out.zero_();
    } else {
      at::Tensor o = out;
      at::mul_out(o, c.expand({mat.size(0)}), at::scalar_tensor(beta, c.options().device(at::kCPU)));
    }
    return;
  }
  TORCH_CHECK_NOT_IMPLEMENTED(mat.scalar_type() != at::kBool, "\"addmv_impl_cpu\" not implemented for 'Bool'");
  launch(out, mat, vec, c, beta, alpha, as3, as3, as3, name);
}

// ---- mm / bmm ----------------------------------------------------------------------------------
at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  check_mm(self, mat2);
  check_out_dtype(out, self.scalar_type());
  at::native::resize_output(out, {self.size(0), mat2.size(1)});
  // As the CPU: an empty contraction is zeros before any dtype dispatch (bool included).
  if (self.size(1) == 0) return out.zero_();
  launch3(out, self, mat2, at::Tensor(), 0, 1, "mm");
  return out;
}
at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2) {
  at::Tensor out = at::empty({0}, self.options());
  return mm_out(self, mat2, out);
}
at::Tensor& bmm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  check_bmm(self, mat2);
  check_out_dtype(out, self.scalar_type());
  at::native::resize_output(out, {self.size(0), self.size(1), mat2.size(2)});
  // As the CPU: an empty contraction is zeros before any dtype dispatch (bool included).
  if (self.size(2) == 0) return out.zero_();
  launch3(out, self, mat2, at::Tensor(), 0, 1, "bmm");
  return out;
}
at::Tensor bmm(const at::Tensor& self, const at::Tensor& mat2) {
  at::Tensor out = at::empty({0}, self.options());
  return bmm_out(self, mat2, out);
}

// ---- addmm / baddbmm -----------------------------------------------------------------------------
// As the CPU's addmm_impl_cpu_: with an empty contraction the result is zeros when beta is 0,
// else self copied and then scaled in place by beta, before any dtype dispatch (so a bool self
// with beta 1 raises the CPU's cast error, and complex nan+0j times 1 is nan+nanj).
bool addmm_without_products(const at::Tensor& self, const at::Tensor& mat1, const c10::Scalar& beta, at::Tensor& out) {
  if (mat1.numel() != 0) return false;
  if (out.numel() == 0) return true;
  if (beta.toComplexDouble() == 0.0) {
    out.zero_();
    return true;
  }
  if (!self.is_same(out)) out.copy_(self.expand(out.sizes()));
  out.mul_(beta);
  return true;
}

at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const c10::Scalar& beta,
                      const c10::Scalar& alpha, at::Tensor& out) {
  check_addmm(self, mat1, mat2);
  check_out_dtype(out, self.scalar_type());
  std::vector<int64_t> shape{mat1.size(0), mat2.size(1)};
  TORCH_CHECK(at::is_expandable_to(self.sizes(), shape), "The expanded size of the tensor (", shape[1],
              ") must match the existing size (", self.sizes().back(), ")");
  at::Tensor c = self;
  if (!self.is_same(out)) {
    at::native::resize_output(out, shape);
  } else {
    TORCH_CHECK(self.sizes().equals(shape), "The input tensor must be a matrix with size ", shape[0], "x", shape[1],
                ", but got a ", self.dim(), "-D tensor with size ", self.size(0), "x", self.size(-1));
  }
  if (addmm_without_products(self, mat1, beta, out)) return out;
  launch3(out, mat1, mat2, c, beta, alpha, "addmm");
  return out;
}
at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const c10::Scalar& beta,
                 const c10::Scalar& alpha) {
  check_addmm(self, mat1, mat2);
  at::Tensor out = at::empty({mat1.size(0), mat2.size(1)}, mat1.options());
  TORCH_CHECK(at::is_expandable_to(self.sizes(), out.sizes()), "The expanded size of the tensor (", out.size(1),
              ") must match the existing size (", self.sizes().back(), ")");
  if (addmm_without_products(self, mat1, beta, out)) return out;
  launch3(out, mat1, mat2, self, beta, alpha, "addmm");
  return out;
}
at::Tensor& addmm_(at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const c10::Scalar& beta,
                   const c10::Scalar& alpha) {
  return addmm_out(self, mat1, mat2, beta, alpha, self);
}

at::Tensor& baddbmm_out(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                        const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out) {
  check_bmm(batch1, batch2);
  TORCH_CHECK(self.scalar_type() == batch1.scalar_type(), "Input dtypes must be the same, got: input ",
              self.scalar_type(), ", batch1: ", batch1.scalar_type(), ", batch2: ", batch2.scalar_type());
  check_out_dtype(out, self.scalar_type());
  std::vector<int64_t> shape{batch1.size(0), batch1.size(1), batch2.size(2)};
  TORCH_CHECK(at::is_expandable_to(self.sizes(), shape), "The expanded size of the tensor must match the existing size");
  if (!self.is_same(out)) {
    at::native::resize_output(out, shape);
  } else {
    TORCH_CHECK(self.sizes().equals(shape), "Expected an input tensor shape with shape ", c10::IntArrayRef(shape),
                " but got shape: ", self.sizes());
  }
  launch3(out, batch1, batch2, self, beta, alpha, "baddbmm");
  return out;
}
at::Tensor baddbmm(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2, const c10::Scalar& beta,
                   const c10::Scalar& alpha) {
  check_bmm(batch1, batch2);
  TORCH_CHECK(self.scalar_type() == batch1.scalar_type(), "Input dtypes must be the same, got: input ",
              self.scalar_type(), ", batch1: ", batch1.scalar_type(), ", batch2: ", batch2.scalar_type());
  at::Tensor out = at::empty({batch1.size(0), batch1.size(1), batch2.size(2)}, batch1.options());
  TORCH_CHECK(at::is_expandable_to(self.sizes(), out.sizes()), "The expanded size of the tensor must match the existing size");
  launch3(out, batch1, batch2, self, beta, alpha, "baddbmm");
  return out;
}
at::Tensor& baddbmm_(at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2, const c10::Scalar& beta,
                     const c10::Scalar& alpha) {
  return baddbmm_out(self, batch1, batch2, beta, alpha, self);
}

// ---- addmv / mv / dot ------------------------------------------------------------------------------
at::Tensor& addmv_out(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const c10::Scalar& beta,
                      const c10::Scalar& alpha, at::Tensor& out) {
  check_mv(mat, vec);
  TORCH_CHECK(self.scalar_type() == mat.scalar_type(), "expected scalar type ", mat.scalar_type(),
              " but found ", self.scalar_type());
  check_out_dtype(out, mat.scalar_type());
  TORCH_CHECK(at::is_expandable_to(self.sizes(), {mat.size(0)}), "size mismatch, got input (", self.size(0),
              "), mat (", mat.size(0), "x", mat.size(1), "), vec (", vec.size(0), ")");
  if (!self.is_same(out)) at::native::resize_output(out, {mat.size(0)});
  mv_into(out, mat, vec, self, beta, alpha, "addmv");
  return out;
}
at::Tensor addmv(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const c10::Scalar& beta,
                 const c10::Scalar& alpha) {
  check_mv(mat, vec);
  TORCH_CHECK(self.scalar_type() == mat.scalar_type(), "expected scalar type ", mat.scalar_type(),
              " but found ", self.scalar_type());
  TORCH_CHECK(self.dim() <= 1 && at::is_expandable_to(self.sizes(), {mat.size(0)}), "size mismatch, got input (",
              self.dim() ? self.size(0) : 1, "), mat (", mat.size(0), "x", mat.size(1), "), vec (", vec.size(0), ")");
  at::Tensor out = at::empty({mat.size(0)}, mat.options());
  mv_into(out, mat, vec, self, beta, alpha, "addmv");
  return out;
}
at::Tensor& addmv_(at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const c10::Scalar& beta,
                   const c10::Scalar& alpha) {
  TORCH_CHECK(self.dim() == 1 && self.size(0) == mat.size(0), "size mismatch, got input (", self.numel(),
              "), mat (", mat.size(0), "x", mat.size(1), "), vec (", vec.size(0), ")");
  return addmv_out(self, mat, vec, beta, alpha, self);
}
at::Tensor& mv_out(const at::Tensor& self, const at::Tensor& vec, at::Tensor& out) {
  check_mv(self, vec);
  check_out_dtype(out, self.scalar_type());
  at::native::resize_output(out, {self.size(0)});
  mv_into(out, self, vec, at::Tensor(), 0, 1, "mv");
  return out;
}
at::Tensor mv(const at::Tensor& self, const at::Tensor& vec) {
  check_mv(self, vec);
  at::Tensor out = at::empty({self.size(0)}, self.options());
  mv_into(out, self, vec, at::Tensor(), 0, 1, "mv");
  return out;
}
at::Tensor& dot_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  check_dot(self, other);
  check_out_dtype(out, self.scalar_type());
  at::native::resize_output(out, {});
  launch(out, self, other, at::Tensor(), 0, 1, as_row, as3, as3, "dot");
  return out;
}
at::Tensor dot(const at::Tensor& self, const at::Tensor& other) {
  check_dot(self, other);
  at::Tensor out = at::empty({}, self.options());
  launch(out, self, other, at::Tensor(), 0, 1, as_row, as3, as3, "dot");
  return out;
}

// ---- addbmm / vdot: metadata-only rewrites onto the kernels above --------------------------------
// addbmm = beta * self + alpha * sum_b batch1[b] @ batch2[b], one [M, B*K] x [B*K, N] product.
std::pair<at::Tensor, at::Tensor> addbmm_operands(const at::Tensor& batch1, const at::Tensor& batch2) {
  check_bmm(batch1, batch2);
  const int64_t b = batch1.size(0), m = batch1.size(1), k = batch1.size(2), n = batch2.size(2);
  return {batch1.permute({1, 0, 2}).reshape({m, b * k}), batch2.reshape({b * k, n})};
}
at::Tensor& addbmm_out(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                       const c10::Scalar& beta, const c10::Scalar& alpha, at::Tensor& out) {
  const auto [a, b] = addbmm_operands(batch1, batch2);
  return ops::addmm_out(self, a, b, beta, alpha, out);
}
at::Tensor addbmm(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2, const c10::Scalar& beta,
                  const c10::Scalar& alpha) {
  const auto [a, b] = addbmm_operands(batch1, batch2);
  return ops::addmm(self, a, b, beta, alpha);
}
at::Tensor& addbmm_(at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2, const c10::Scalar& beta,
                    const c10::Scalar& alpha) {
  return ops::addbmm_out(self, batch1, batch2, beta, alpha, self);
}
// vdot conjugates its first argument (a no-op for real dtypes).
at::Tensor vdot(const at::Tensor& self, const at::Tensor& other) {
  return ops::dot(self.is_complex() ? self.conj().resolve_conj() : self, other);
}
at::Tensor& vdot_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return ops::dot_out(self.is_complex() ? self.conj().resolve_conj() : self, other, out);
}

// _addmm_activation (nn.TransformerEncoderLayer's inference fast path: linear + relu/gelu): foo's
// addmm, then its relu or exact (erf) gelu in place, as the CPU's kernel computes it.
at::Tensor& addmm_activation_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                                 const at::Scalar& beta, const at::Scalar& alpha, bool use_gelu, at::Tensor& out) {
  at::addmm_out(out, self, mat1, mat2, beta, alpha);
  return use_gelu ? at::gelu_(out) : at::relu_(out);
}

at::Tensor addmm_activation(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2,
                            const at::Scalar& beta, const at::Scalar& alpha, bool use_gelu) {
  at::Tensor out = at::addmm(self, mat1, mat2, beta, alpha);
  return use_gelu ? at::gelu_(out) : at::relu_(out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  FOO_IMPL(m, "mm", mm);
  FOO_IMPL(m, "mm.out", mm_out);
  FOO_IMPL(m, "bmm", bmm);
  FOO_IMPL(m, "bmm.out", bmm_out);
  FOO_IMPL(m, "addmm", addmm);
  FOO_IMPL(m, "addmm_", addmm_);
  FOO_IMPL(m, "addmm.out", addmm_out);
  FOO_IMPL(m, "baddbmm", baddbmm);
  FOO_IMPL(m, "baddbmm_", baddbmm_);
  FOO_IMPL(m, "baddbmm.out", baddbmm_out);
  FOO_IMPL(m, "addmv", addmv);
  FOO_IMPL(m, "addmv_", addmv_);
  FOO_IMPL(m, "addmv.out", addmv_out);
  FOO_IMPL(m, "mv", mv);
  FOO_IMPL(m, "mv.out", mv_out);
  FOO_IMPL(m, "dot", dot);
  FOO_IMPL(m, "dot.out", dot_out);
  FOO_IMPL(m, "addbmm", addbmm);
  FOO_IMPL(m, "addbmm_", addbmm_);
  FOO_IMPL(m, "addbmm.out", addbmm_out);
  FOO_IMPL(m, "vdot", vdot);
  FOO_IMPL(m, "vdot.out", vdot_out);
  // ATen's composite addr.out (outer product, scale, add: foo ops), registered here so that the
  // out= tensor's device is checked as for every foo op (the composite copies into any device).
  FOO_IMPL(m, "addr.out", at::native::math_addr_out);
  FOO_IMPL_META(m, "_addmm_activation", addmm_activation);
  FOO_IMPL_META(m, "_addmm_activation.out", addmm_activation_out);
}

}  // namespace foo::ops
