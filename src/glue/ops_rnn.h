// Fused LSTM/GRU cell ops (ops_rnn.cpp) and whole LSTM/GRU layers (ops_rnn_layer.cpp), registered
// in register_rnn.cpp.
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


// The cell kernels on tensors the caller has checked and allocated (any strides; the biases and
// the optional gradients may be undefined): the ops above, and the layers, which write each
// step's results into slices of their per-sequence buffers.
void lstm_cell_into(const Tensor& hy, const Tensor& cy, const Tensor& workspace, const Tensor& input_gates,
                    const Tensor& hidden_gates, const Tensor& cx, const Tensor& input_bias, const Tensor& hidden_bias);
void lstm_cell_backward_into(const Tensor& grad_gates, const Tensor& grad_cx, const Tensor& grad_bias,
                             const Tensor& grad_hy, const Tensor& grad_cy, const Tensor& cx, const Tensor& cy,
                             const Tensor& workspace);
void gru_cell_into(const Tensor& hy, const Tensor& workspace, const Tensor& input_gates, const Tensor& hidden_gates,
                   const Tensor& hx, const Tensor& input_bias, const Tensor& hidden_bias);
void gru_cell_backward_into(const Tensor& grad_input_gates, const Tensor& grad_hidden_gates, const Tensor& grad_hx,
                            const Tensor& grad_input_bias, const Tensor& grad_hidden_bias, const Tensor& grad_hy,
                            const Tensor& workspace);

// aten::lstm.input and aten::gru.input (nn.LSTM, nn.GRU): each layer and direction one fused
// autograd node; configurations the layers do not cover run ATen's composite loop.
std::tuple<Tensor, Tensor, Tensor> lstm(const Tensor& input, at::TensorList hx, at::TensorList params,
                                        bool has_biases, int64_t num_layers, double dropout, bool train,
                                        bool bidirectional, bool batch_first);
std::tuple<Tensor, Tensor> gru(const Tensor& input, const Tensor& hx, at::TensorList params, bool has_biases,
                               int64_t num_layers, double dropout, bool train, bool bidirectional, bool batch_first);

}  // namespace foo::ops::rnn
