// NN op wrappers (ops_nn.cpp) and optimizer foreach ops (ops_foreach.cpp), registered in
// register_nn.cpp.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <tuple>

namespace foo::ops::nn {

using at::Tensor;
using OptT = std::optional<at::Tensor>;

// ---- softmax ---------------------------------------------------------------------------------
Tensor softmax(const Tensor& self, int64_t dim, bool half_to_float);
Tensor& softmax_out(const Tensor& self, int64_t dim, bool half_to_float, Tensor& out);
Tensor log_softmax(const Tensor& self, int64_t dim, bool half_to_float);
Tensor& log_softmax_out(const Tensor& self, int64_t dim, bool half_to_float, Tensor& out);
Tensor softmax_backward(const Tensor& grad, const Tensor& output, int64_t dim, at::ScalarType input_dtype);
Tensor& softmax_backward_out(const Tensor& grad, const Tensor& output, int64_t dim, at::ScalarType input_dtype,
                             Tensor& grad_input);
Tensor log_softmax_backward(const Tensor& grad, const Tensor& output, int64_t dim, at::ScalarType input_dtype);
Tensor& log_softmax_backward_out(const Tensor& grad, const Tensor& output, int64_t dim, at::ScalarType input_dtype,
                                 Tensor& out);

// ---- losses ----------------------------------------------------------------------------------
std::tuple<Tensor, Tensor> nll_loss_forward(const Tensor& self, const Tensor& target, const OptT& weight,
                                            int64_t reduction, int64_t ignore_index);
std::tuple<Tensor&, Tensor&> nll_loss_forward_out(const Tensor& self, const Tensor& target, const OptT& weight,
                                                  int64_t reduction, int64_t ignore_index, Tensor& output,
                                                  Tensor& total_weight);
Tensor nll_loss_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target, const OptT& weight,
                         int64_t reduction, int64_t ignore_index, const Tensor& total_weight);
Tensor& nll_loss_backward_out(const Tensor& grad_output, const Tensor& self, const Tensor& target, const OptT& weight,
                              int64_t reduction, int64_t ignore_index, const Tensor& total_weight,
                              Tensor& grad_input);
std::tuple<Tensor, Tensor> nll_loss2d_forward(const Tensor& self, const Tensor& target, const OptT& weight,
                                              int64_t reduction, int64_t ignore_index);
std::tuple<Tensor&, Tensor&> nll_loss2d_forward_out(const Tensor& self, const Tensor& target, const OptT& weight,
                                                    int64_t reduction, int64_t ignore_index, Tensor& output,
                                                    Tensor& total_weight);
Tensor nll_loss2d_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target, const OptT& weight,
                           int64_t reduction, int64_t ignore_index, const Tensor& total_weight);
Tensor& nll_loss2d_backward_out(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                                const OptT& weight, int64_t reduction, int64_t ignore_index,
                                const Tensor& total_weight, Tensor& grad_input);
Tensor mse_loss(const Tensor& self, const Tensor& target, int64_t reduction);
Tensor& mse_loss_out(const Tensor& self, const Tensor& target, int64_t reduction, Tensor& out);
Tensor mse_loss_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target, int64_t reduction);
Tensor& mse_loss_backward_out(const Tensor& grad_output, const Tensor& self, const Tensor& target, int64_t reduction,
                              Tensor& grad_input);
Tensor binary_cross_entropy(const Tensor& self, const Tensor& target, const OptT& weight, int64_t reduction);
Tensor& binary_cross_entropy_out(const Tensor& self, const Tensor& target, const OptT& weight, int64_t reduction,
                                 Tensor& out);
Tensor binary_cross_entropy_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                                     const OptT& weight, int64_t reduction);
Tensor& binary_cross_entropy_backward_out(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                                          const OptT& weight, int64_t reduction, Tensor& grad_input);

// ---- normalization ---------------------------------------------------------------------------
std::tuple<Tensor, Tensor, Tensor> native_layer_norm(const Tensor& input, c10::IntArrayRef normalized_shape,
                                                     const OptT& weight, const OptT& bias, double eps);
std::tuple<Tensor, Tensor, Tensor> native_layer_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                              c10::IntArrayRef normalized_shape, const Tensor& mean,
                                                              const Tensor& rstd, const OptT& weight,
                                                              const OptT& bias, std::array<bool, 3> output_mask);
std::tuple<Tensor, Tensor, Tensor> native_group_norm(const Tensor& input, const OptT& weight, const OptT& bias,
                                                     int64_t n, int64_t c, int64_t hw, int64_t groups, double eps);
std::tuple<Tensor, Tensor, Tensor> native_group_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                              const Tensor& mean, const Tensor& rstd,
                                                              const OptT& weight, int64_t n, int64_t c, int64_t hw,
                                                              int64_t groups, std::array<bool, 3> output_mask);
std::tuple<Tensor, Tensor, Tensor> native_batch_norm(const Tensor& input, const OptT& weight, const OptT& bias,
                                                     const OptT& running_mean, const OptT& running_var, bool training,
                                                     double momentum, double eps);
std::tuple<Tensor, Tensor, Tensor> native_batch_norm_legit(const Tensor& input, const OptT& weight, const OptT& bias,
                                                           Tensor& running_mean, Tensor& running_var, bool training,
                                                           double momentum, double eps);
std::tuple<Tensor, Tensor, Tensor> native_batch_norm_legit_no_stats(const Tensor& input, const OptT& weight,
                                                                    const OptT& bias, bool training, double momentum,
                                                                    double eps);
std::tuple<Tensor, Tensor, Tensor, Tensor> batch_norm_with_update(const Tensor& input, const OptT& weight,
                                                                  const OptT& bias, Tensor& running_mean,
                                                                  Tensor& running_var, double momentum, double eps);
std::tuple<Tensor, Tensor, Tensor> native_batch_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                              const OptT& weight, const OptT& running_mean,
                                                              const OptT& running_var, const OptT& save_mean,
                                                              const OptT& save_invstd, bool train, double eps,
                                                              std::array<bool, 3> output_mask);
std::tuple<Tensor, Tensor, Tensor> batch_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                       const Tensor& weight, const OptT& running_mean,
                                                       const OptT& running_var, const OptT& save_mean,
                                                       const OptT& save_var, bool update, double eps,
                                                       std::array<bool, 3> output_mask, const Tensor& reserve);

// ---- embedding -------------------------------------------------------------------------------
Tensor embedding_dense_backward(const Tensor& grad_output, const Tensor& indices, int64_t num_weights,
                                int64_t padding_idx, bool scale_grad_by_freq);
Tensor& embedding_dense_backward_out(const Tensor& grad_output, const Tensor& indices, int64_t num_weights,
                                     int64_t padding_idx, bool scale_grad_by_freq, Tensor& out);

}  // namespace foo::ops::nn
