// Autocast policy for foo (dispatch key AutocastPrivateUse1): the op lists and cast policies CUDA
// registers in ATen's autocast_mode.cpp, taken from the same AT_FORALL_* lists in
// ATen/autocast_mode.h, so foo follows torch's lists when torch changes them.
// Left out: cudnn_convolution, cudnn_convolution_transpose and _cudnn_rnn, CUDA's cuDNN-only ops.
// Ops not listed here fall through to the next dispatch key (the fallthrough in fallback.cpp).
// tests/test_amp.py checks that this set equals AutocastCUDA's registrations.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace foo {
namespace {

using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

// As on CUDA: binary_cross_entropy is unsafe in reduced precision and refused under autocast.
Tensor binary_cross_entropy_banned(const Tensor&, const Tensor&, const std::optional<Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
              "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
              "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
              "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
              "safe to autocast.");
}

// One registration per (op[, overload]) of a list, with the list's policy.
#define FOO_AUTOCAST_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define FOO_AUTOCAST_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define FOO_AUTOCAST_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define FOO_AUTOCAST_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)

// NOLINTBEGIN(cppcoreguidelines-*)
TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  // lower_precision_fp: cast floating-point inputs to the autocast dtype (matmul/conv family).
  AT_FORALL_LOWER_PRECISION_FP(FOO_AUTOCAST_LOWER_PRECISION_FP)
  // fp32: cast floating-point inputs to float32 (numerically sensitive pointwise ops, norms, losses).
  AT_FORALL_FP32(FOO_AUTOCAST_FP32)
  // Not in AT_FORALL_FP32 but registered by CUDA's block in 2.15 (torch._C._dispatch_dump); fp32 as on CPU.
  KERNEL_PRIVATEUSEONE(linalg_matrix_sqrth, fp32)
  // fp32_set_opt_dtype: run in float32 through the op's own `dtype=` argument, unless one is given.
  AT_FORALL_FP32_SET_OPT_DTYPE(FOO_AUTOCAST_FP32_SET_OPT_DTYPE)
  // fp32_append_dtype: norm has no dtype-less float32 path, so redispatch to the overload with a dtype.
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
  // promote: cast every floating-point input to the widest floating type among them.
  AT_FORALL_PROMOTE(FOO_AUTOCAST_PROMOTE)
  // banned
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN(binary_cross_entropy_banned));
}
// NOLINTEND(cppcoreguidelines-*)

}  // namespace
}  // namespace foo
