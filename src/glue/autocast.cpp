// Autocast policy for foo (dispatch key AutocastPrivateUse1): the same op lists and cast policies
// CUDA registers in ATen's autocast_mode.cpp (torch 2.15's AT_FORALL_* lists in
// ATen/autocast_mode.h, written out one registration per line so a change is a one-line diff).
// Left out: cudnn_convolution, cudnn_convolution_transpose and _cudnn_rnn, CUDA's cuDNN-only ops.
// Ops not listed here fall through to the next dispatch key (the fallthrough in fallback.cpp).
// tests/test_amp.py checks that this set equals AutocastCUDA's registrations.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace foo {
namespace {

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

// NOLINTBEGIN(cppcoreguidelines-*)
TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  // lower_precision_fp: cast floating-point inputs to the autocast dtype (matmul/conv family).
  KERNEL_PRIVATEUSEONE(_convolution, deprecated, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(_convolution, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(conv1d, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(conv2d, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(conv3d, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(conv_tbc, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(conv_transpose1d, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(conv_transpose2d, input, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(conv_transpose3d, input, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(convolution, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(prelu, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(addmm, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(addmv, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(addr, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(matmul, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(einsum, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(mm, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(mv, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(linalg_vecdot, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(linear, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(addbmm, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(baddbmm, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(bmm, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(chain_matmul, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(linalg_multi_dot, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(_thnn_fused_lstm_cell, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(_thnn_fused_gru_cell, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(lstm_cell, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(gru_cell, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(rnn_tanh_cell, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(rnn_relu_cell, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(_scaled_dot_product_flash_attention, lower_precision_fp)
  KERNEL_PRIVATEUSEONE(scaled_dot_product_attention, lower_precision_fp)

  // fp32: cast floating-point inputs to float32 (numerically sensitive pointwise ops, norms, losses).
  KERNEL_PRIVATEUSEONE(acos, fp32)
  KERNEL_PRIVATEUSEONE(asin, fp32)
  KERNEL_PRIVATEUSEONE(cosh, fp32)
  KERNEL_PRIVATEUSEONE(erfinv, fp32)
  KERNEL_PRIVATEUSEONE(exp, fp32)
  KERNEL_PRIVATEUSEONE(expm1, fp32)
  KERNEL_PRIVATEUSEONE(log, fp32)
  KERNEL_PRIVATEUSEONE(log10, fp32)
  KERNEL_PRIVATEUSEONE(log2, fp32)
  KERNEL_PRIVATEUSEONE(log1p, fp32)
  KERNEL_PRIVATEUSEONE(reciprocal, fp32)
  KERNEL_PRIVATEUSEONE(rsqrt, fp32)
  KERNEL_PRIVATEUSEONE(sinh, fp32)
  KERNEL_PRIVATEUSEONE(tan, fp32)
  KERNEL_PRIVATEUSEONE(pow, Tensor_Scalar, fp32)
  KERNEL_PRIVATEUSEONE(pow, Tensor_Tensor, fp32)
  KERNEL_PRIVATEUSEONE(pow, Scalar, fp32)
  KERNEL_PRIVATEUSEONE(softplus, fp32)
  KERNEL_PRIVATEUSEONE(layer_norm, fp32)
  KERNEL_PRIVATEUSEONE(native_layer_norm, fp32)
  KERNEL_PRIVATEUSEONE(rms_norm, fp32)
  KERNEL_PRIVATEUSEONE(group_norm, fp32)
  KERNEL_PRIVATEUSEONE(frobenius_norm, dim, fp32)
  KERNEL_PRIVATEUSEONE(nuclear_norm, fp32)
  KERNEL_PRIVATEUSEONE(nuclear_norm, dim, fp32)
  KERNEL_PRIVATEUSEONE(cosine_similarity, fp32)
  KERNEL_PRIVATEUSEONE(poisson_nll_loss, fp32)
  KERNEL_PRIVATEUSEONE(cosine_embedding_loss, fp32)
  KERNEL_PRIVATEUSEONE(nll_loss, fp32)
  KERNEL_PRIVATEUSEONE(nll_loss2d, fp32)
  KERNEL_PRIVATEUSEONE(hinge_embedding_loss, fp32)
  KERNEL_PRIVATEUSEONE(kl_div, fp32)
  KERNEL_PRIVATEUSEONE(l1_loss, fp32)
  KERNEL_PRIVATEUSEONE(smooth_l1_loss, fp32)
  KERNEL_PRIVATEUSEONE(huber_loss, fp32)
  KERNEL_PRIVATEUSEONE(mse_loss, fp32)
  KERNEL_PRIVATEUSEONE(margin_ranking_loss, fp32)
  KERNEL_PRIVATEUSEONE(multilabel_margin_loss, fp32)
  KERNEL_PRIVATEUSEONE(soft_margin_loss, fp32)
  KERNEL_PRIVATEUSEONE(triplet_margin_loss, fp32)
  KERNEL_PRIVATEUSEONE(multi_margin_loss, fp32)
  KERNEL_PRIVATEUSEONE(binary_cross_entropy_with_logits, fp32)
  KERNEL_PRIVATEUSEONE(dist, fp32)
  KERNEL_PRIVATEUSEONE(pdist, fp32)
  KERNEL_PRIVATEUSEONE(cdist, fp32)
  KERNEL_PRIVATEUSEONE(renorm, fp32)
  KERNEL_PRIVATEUSEONE(logsumexp, fp32)
  KERNEL_PRIVATEUSEONE(upsample_nearest1d, fp32)
  KERNEL_PRIVATEUSEONE(_upsample_nearest_exact1d, fp32)
  KERNEL_PRIVATEUSEONE(upsample_nearest2d, fp32)
  KERNEL_PRIVATEUSEONE(_upsample_nearest_exact2d, fp32)
  KERNEL_PRIVATEUSEONE(upsample_nearest3d, fp32)
  KERNEL_PRIVATEUSEONE(_upsample_nearest_exact3d, fp32)
  KERNEL_PRIVATEUSEONE(upsample_linear1d, fp32)
  KERNEL_PRIVATEUSEONE(upsample_bilinear2d, fp32)
  KERNEL_PRIVATEUSEONE(_upsample_bilinear2d_aa, fp32)
  KERNEL_PRIVATEUSEONE(upsample_trilinear3d, fp32)
  KERNEL_PRIVATEUSEONE(upsample_bicubic2d, fp32)
  KERNEL_PRIVATEUSEONE(_upsample_bicubic2d_aa, fp32)
  // Not in AT_FORALL_FP32 but registered by CUDA's block in 2.15 (torch._C._dispatch_dump); fp32 as on CPU.
  KERNEL_PRIVATEUSEONE(linalg_matrix_sqrth, fp32)

  // fp32_set_opt_dtype: run in float32 through the op's own `dtype=` argument, unless one is given.
  KERNEL_PRIVATEUSEONE(prod, fp32_set_opt_dtype)
  KERNEL_PRIVATEUSEONE(prod, dim_int, fp32_set_opt_dtype)
  KERNEL_PRIVATEUSEONE(softmax, int, fp32_set_opt_dtype)
  KERNEL_PRIVATEUSEONE(log_softmax, int, fp32_set_opt_dtype)
  KERNEL_PRIVATEUSEONE(cumprod, fp32_set_opt_dtype)
  KERNEL_PRIVATEUSEONE(cumsum, fp32_set_opt_dtype)
  KERNEL_PRIVATEUSEONE(linalg_vector_norm, fp32_set_opt_dtype)
  KERNEL_PRIVATEUSEONE(linalg_matrix_norm, fp32_set_opt_dtype)
  KERNEL_PRIVATEUSEONE(linalg_matrix_norm, str_ord, fp32_set_opt_dtype)
  KERNEL_PRIVATEUSEONE(sum, fp32_set_opt_dtype)
  KERNEL_PRIVATEUSEONE(sum, dim_IntList, fp32_set_opt_dtype)

  // promote: cast every floating-point input to the widest floating type among them.
  KERNEL_PRIVATEUSEONE(addcdiv, promote)
  KERNEL_PRIVATEUSEONE(addcmul, promote)
  KERNEL_PRIVATEUSEONE(atan2, promote)
  KERNEL_PRIVATEUSEONE(bilinear, promote)
  KERNEL_PRIVATEUSEONE(cross, promote)
  KERNEL_PRIVATEUSEONE(dot, promote)
  KERNEL_PRIVATEUSEONE(vdot, promote)
  KERNEL_PRIVATEUSEONE(grid_sampler, promote)
  KERNEL_PRIVATEUSEONE(index_put, promote)
  KERNEL_PRIVATEUSEONE(tensordot, promote)
  KERNEL_PRIVATEUSEONE(scatter_add, promote)

  // fp32_append_dtype: norm has no dtype-less float32 path, so redispatch to the overload with a dtype.
  KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE(at::norm, "norm.Scalar", Tensor(const Tensor&, const at::Scalar&), Tensor(const Tensor&, const std::optional<at::Scalar>&, at::ScalarType), fp32_append_dtype)
  KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE(at::norm, "norm.ScalarOpt_dim", Tensor(const Tensor&, const std::optional<at::Scalar>&, at::IntArrayRef, bool), Tensor(const Tensor&, const std::optional<at::Scalar>&, at::IntArrayRef, bool, at::ScalarType), fp32_append_dtype)

  // banned
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN(binary_cross_entropy_banned));
}
// NOLINTEND(cppcoreguidelines-*)

}  // namespace
}  // namespace foo
