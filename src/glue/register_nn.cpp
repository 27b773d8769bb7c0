// Registrations of the nn family (ops_nn.cpp) and the optimizer foreach ops (ops_foreach.cpp).
#include <torch/library.h>

#include "common.h"
#include "ops_foreach.h"
#include "ops_nn.h"

namespace foo {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  FOO_IMPL(m, "_softmax", ops::nn::softmax);
  FOO_IMPL(m, "_softmax.out", ops::nn::softmax_out);
  FOO_IMPL(m, "_log_softmax", ops::nn::log_softmax);
  FOO_IMPL(m, "_log_softmax.out", ops::nn::log_softmax_out);
  FOO_IMPL(m, "_softmax_backward_data", ops::nn::softmax_backward);
  FOO_IMPL(m, "_softmax_backward_data.out", ops::nn::softmax_backward_out);
  FOO_IMPL(m, "_log_softmax_backward_data", ops::nn::log_softmax_backward);
  FOO_IMPL(m, "_log_softmax_backward_data.out", ops::nn::log_softmax_backward_out);
  FOO_IMPL(m, "nll_loss_forward", ops::nn::nll_loss_forward);
  FOO_IMPL(m, "nll_loss_forward.output", ops::nn::nll_loss_forward_out);
  FOO_IMPL(m, "nll_loss_backward", ops::nn::nll_loss_backward);
  FOO_IMPL(m, "nll_loss_backward.grad_input", ops::nn::nll_loss_backward_out);
  FOO_IMPL(m, "nll_loss2d_forward", ops::nn::nll_loss2d_forward);
  FOO_IMPL(m, "nll_loss2d_forward.output", ops::nn::nll_loss2d_forward_out);
  FOO_IMPL(m, "nll_loss2d_backward", ops::nn::nll_loss2d_backward);
  FOO_IMPL(m, "nll_loss2d_backward.grad_input", ops::nn::nll_loss2d_backward_out);
  FOO_IMPL(m, "mse_loss", ops::nn::mse_loss);
  FOO_IMPL(m, "mse_loss.out", ops::nn::mse_loss_out);
  FOO_IMPL(m, "mse_loss_backward", ops::nn::mse_loss_backward);
  FOO_IMPL(m, "mse_loss_backward.grad_input", ops::nn::mse_loss_backward_out);
  FOO_IMPL(m, "binary_cross_entropy", ops::nn::binary_cross_entropy);
  FOO_IMPL(m, "binary_cross_entropy.out", ops::nn::binary_cross_entropy_out);
  FOO_IMPL(m, "binary_cross_entropy_backward", ops::nn::binary_cross_entropy_backward);
  FOO_IMPL(m, "binary_cross_entropy_backward.grad_input", ops::nn::binary_cross_entropy_backward_out);
  FOO_IMPL(m, "native_layer_norm", ops::nn::native_layer_norm);
  FOO_IMPL(m, "native_layer_norm_backward", ops::nn::native_layer_norm_backward);
  FOO_IMPL(m, "native_group_norm", ops::nn::native_group_norm);
  FOO_IMPL(m, "native_group_norm_backward", ops::nn::native_group_norm_backward);
  FOO_IMPL(m, "native_batch_norm", ops::nn::native_batch_norm);
  FOO_IMPL(m, "_native_batch_norm_legit", ops::nn::native_batch_norm_legit);
  FOO_IMPL(m, "_native_batch_norm_legit.no_stats", ops::nn::native_batch_norm_legit_no_stats);
  FOO_IMPL(m, "_batch_norm_with_update", ops::nn::batch_norm_with_update);
  FOO_IMPL(m, "native_batch_norm_backward", ops::nn::native_batch_norm_backward);
  FOO_IMPL(m, "batch_norm_backward", ops::nn::batch_norm_backward);
  FOO_IMPL(m, "embedding_dense_backward", ops::nn::embedding_dense_backward);
  FOO_IMPL(m, "embedding_dense_backward.out", ops::nn::embedding_dense_backward_out);
  FOO_IMPL(m, "_foreach_add_.List", ops::fe::add_list_);
  FOO_IMPL(m, "_foreach_add.List", ops::fe::add_list);
  FOO_IMPL(m, "_foreach_add_.Scalar", ops::fe::add_scalar_);
  FOO_IMPL(m, "_foreach_add.Scalar", ops::fe::add_scalar);
  FOO_IMPL(m, "_foreach_mul_.List", ops::fe::mul_list_);
  FOO_IMPL(m, "_foreach_mul.List", ops::fe::mul_list);
  FOO_IMPL(m, "_foreach_mul_.Scalar", ops::fe::mul_scalar_);
  FOO_IMPL(m, "_foreach_mul.Scalar", ops::fe::mul_scalar);
  FOO_IMPL(m, "_foreach_mul_.ScalarList", ops::fe::mul_scalarlist_);
  FOO_IMPL(m, "_foreach_mul_.Tensor", ops::fe::mul_tensor_);
  FOO_IMPL(m, "_foreach_div_.List", ops::fe::div_list_);
  FOO_IMPL(m, "_foreach_div.List", ops::fe::div_list);
  FOO_IMPL(m, "_foreach_div_.Scalar", ops::fe::div_scalar_);
  FOO_IMPL(m, "_foreach_div.Scalar", ops::fe::div_scalar);
  FOO_IMPL(m, "_foreach_div_.ScalarList", ops::fe::div_scalarlist_);
  FOO_IMPL(m, "_foreach_div_.Tensor", ops::fe::div_tensor_);
  FOO_IMPL(m, "_foreach_maximum_.List", ops::fe::maximum_list_);
  FOO_IMPL(m, "_foreach_addcmul_.Scalar", ops::fe::addcmul_scalar_);
  FOO_IMPL(m, "_foreach_addcmul_.ScalarList", ops::fe::addcmul_scalarlist_);
  FOO_IMPL(m, "_foreach_addcdiv_.Scalar", ops::fe::addcdiv_scalar_);
  FOO_IMPL(m, "_foreach_addcdiv_.ScalarList", ops::fe::addcdiv_scalarlist_);
  FOO_IMPL(m, "_foreach_lerp_.Scalar", ops::fe::lerp_scalar_);
  FOO_IMPL(m, "_foreach_lerp_.List", ops::fe::lerp_list_);
  FOO_IMPL(m, "_foreach_sqrt", ops::fe::sqrt);
  FOO_IMPL(m, "_foreach_sqrt_", ops::fe::sqrt_);
  FOO_IMPL(m, "_foreach_neg", ops::fe::neg);
  FOO_IMPL(m, "_foreach_neg_", ops::fe::neg_);
  FOO_IMPL(m, "_foreach_zero_", ops::fe::zero_);
}

}  // namespace foo
