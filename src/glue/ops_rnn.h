// Fused LSTM/GRU cell ops (ops_rnn.cpp), registered in register_rnn.cpp.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <tuple>

namespace foo::ops::rnn {

using at::Tensor;
using OptT = std::optional<at::Tensor>;

std::tuple<Tensor, Tensor, Tensor> fused_lstm_cell(const Tensor& input_gates, const Tensor& hidden_gates,
                                                   const Tensor& cx, const OptT& input_bias,
                                                   const OptT& hidden_bias);
std::tuple<Tensor, Tensor, Tensor> fused_lstm_cell_backward_impl(const OptT& grad_hy, const OptT& grad_cy,
                                                                 const Tensor& cx, const Tensor& cy,
                                                                 const Tensor& workspace, bool has_bias);
std::tuple<Tensor, Tensor> fused_gru_cell(const Tensor& input_gates, const Tensor& hidden_gates, const Tensor& hx,
                                          const OptT& input_bias, const OptT& hidden_bias);
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> fused_gru_cell_backward(const Tensor& grad_hy,
                                                                           const Tensor& workspace, bool has_bias);

}  // namespace foo::ops::rnn
