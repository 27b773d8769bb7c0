// GradScaler's ops (torch.amp.GradScaler("foo")): argument checks as in ATen's CPU kernels
// (AmpGradScalerKernels.cpp), the arithmetic in Rust (kernels/amp.rs). The autocast policy is in
// autocast.cpp.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <torch/library.h>

#include "common.h"
#include "foo_ffi.h"

namespace foo::ops {
namespace {

void check_on_foo(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.defined() && t.device().type() == kFoo, what, " must be a foo tensor.");
}

void check_one(const at::Tensor& t, const char* what, at::ScalarType st, const char* kind) {
  check_on_foo(t, what);
  TORCH_CHECK(t.numel() == 1, what, " must be a 1-element tensor.");
  TORCH_CHECK(t.scalar_type() == st, what, " must be ", kind, " tensor.");
}

void amp_foreach_non_finite_check_and_unscale_(at::TensorList grads, at::Tensor& found_inf,
                                               const at::Tensor& inv_scale) {
  if (grads.empty()) return;
  check_one(inv_scale, "inv_scale", at::kFloat, "a float");
  check_one(found_inf, "found_inf", at::kFloat, "a float");
  std::vector<FooTensor> ds;
  ds.reserve(grads.size());
  for (const at::Tensor& t : grads) {
    TORCH_CHECK(t.defined() && t.device() == found_inf.device(),
                "one of scaled_grads was not a foo tensor on found_inf's device (", found_inf.device(), ").");
    TORCH_CHECK(t.layout() == at::kStrided, "one of scaled_grads was not a strided tensor.");
    TORCH_CHECK(at::isFloatingType(t.scalar_type()), "one of scaled_grads has dtype ", t.scalar_type(),
                "; GradScaler unscales floating-point gradients only.");
    at::assert_no_internal_overlap(t);
    ds.push_back(describe(t));
  }
  const FooTensor fi = describe(found_inf), inv = describe(inv_scale);
  check(foo_amp_unscale(ds.data(), static_cast<int64_t>(ds.size()), &fi, &inv),
        "_amp_foreach_non_finite_check_and_unscale_");
}

at::Tensor& amp_update_scale_(at::Tensor& scale, at::Tensor& growth_tracker, const at::Tensor& found_inf,
                              double growth_factor, double backoff_factor, int64_t growth_interval) {
  check_one(growth_tracker, "growth_tracker", at::kInt, "an int");
  check_one(scale, "current_scale", at::kFloat, "a float");
  check_one(found_inf, "found_inf", at::kFloat, "a float");
  const FooTensor s = describe(scale), t = describe(growth_tracker), f = describe(found_inf);
  check(foo_amp_update_scale(&s, &t, &f, growth_factor, backoff_factor, growth_interval), "_amp_update_scale_");
  return scale;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  FOO_IMPL(m, "_amp_foreach_non_finite_check_and_unscale_", amp_foreach_non_finite_check_and_unscale_);
  FOO_IMPL(m, "_amp_update_scale_", amp_update_scale_);
}

}  // namespace foo::ops
