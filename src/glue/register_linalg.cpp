// Registrations of the matrix-product kernels (ops_linalg.cpp).
#include <ATen/ops/addr_native.h>
#include <torch/library.h>

#include "common.h"
#include "ops_linalg.h"

namespace foo {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  FOO_IMPL(m, "mm", ops::mm);
  FOO_IMPL(m, "mm.out", ops::mm_out);
  FOO_IMPL(m, "bmm", ops::bmm);
  FOO_IMPL(m, "bmm.out", ops::bmm_out);
  FOO_IMPL(m, "addmm", ops::addmm);
  FOO_IMPL(m, "addmm_", ops::addmm_);
  FOO_IMPL(m, "addmm.out", ops::addmm_out);
  FOO_IMPL(m, "baddbmm", ops::baddbmm);
  FOO_IMPL(m, "baddbmm_", ops::baddbmm_);
  FOO_IMPL(m, "baddbmm.out", ops::baddbmm_out);
  FOO_IMPL(m, "addmv", ops::addmv);
  FOO_IMPL(m, "addmv_", ops::addmv_);
  FOO_IMPL(m, "addmv.out", ops::addmv_out);
  FOO_IMPL(m, "mv", ops::mv);
  FOO_IMPL(m, "mv.out", ops::mv_out);
  FOO_IMPL(m, "dot", ops::dot);
  FOO_IMPL(m, "dot.out", ops::dot_out);
  FOO_IMPL(m, "addbmm", ops::addbmm);
  FOO_IMPL(m, "addbmm_", ops::addbmm_);
  FOO_IMPL(m, "addbmm.out", ops::addbmm_out);
  FOO_IMPL(m, "vdot", ops::vdot);
  FOO_IMPL(m, "vdot.out", ops::vdot_out);
  // ATen's composite addr.out (outer product, scale, add: foo ops), registered here so that the
  // out= tensor's device is checked as for every foo op (the composite copies into any device).
  FOO_IMPL(m, "addr.out", at::native::math_addr_out);
}

}  // namespace foo
