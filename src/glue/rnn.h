// What rnn_layer.cpp (whole LSTM/GRU layers) shares of rnn.cpp (the fused cells).
#pragma once

#include <ATen/ATen.h>

namespace foo::ops::rnn {

using at::Tensor;

// The cell kernels on tensors the caller has checked and allocated (any strides; the biases and
// the optional gradients may be undefined): the cell ops of rnn.cpp, and the layers, which write
// each step's results into slices of their per-sequence buffers.
void lstm_cell_into(const Tensor& hy, const Tensor& cy, const Tensor& workspace, const Tensor& input_gates,
                    const Tensor& hidden_gates, const Tensor& cx, const Tensor& input_bias, const Tensor& hidden_bias);
// A whole LSTM layer's steps in one kernel (float32/float64; every tensor contiguous): the
// outputs [T, B, H] and the last cell state [B, H] from the input projections [T, B, 4H], and,
// when defined (for a backward), the cell states and workspaces [T, B, *].
void lstm_layer_into(const Tensor& out, const Tensor& c_last, const Tensor& cs, const Tensor& workspace,
                     const Tensor& input_gates, const Tensor& w_ih, const Tensor& w_hh, const Tensor& h0,
                     const Tensor& c0, const Tensor& input_bias, const Tensor& hidden_bias, bool reverse);
// Whether the whole-layer LSTM projects x itself (takes x and w_ih for input_gates, w_ih):
// float32 on AVX-512 (kernels/rnn/layer.rs, projects_input).
bool lstm_layer_projects(const Tensor& x, int64_t hidden);
// Its backward: the gate gradients [T, B, 4H] and the first states' gradients.
void lstm_layer_backward_into(const Tensor& grad_gates, const Tensor& grad_h0, const Tensor& grad_c0,
                              const Tensor& grad_out, const Tensor& grad_h, const Tensor& grad_c, const Tensor& cs,
                              const Tensor& workspace, const Tensor& c0, const Tensor& w_hh, bool reverse);
void lstm_cell_backward_into(const Tensor& grad_gates, const Tensor& grad_cx, const Tensor& grad_bias,
                             const Tensor& grad_hy, const Tensor& grad_cy, const Tensor& cx, const Tensor& cy,
                             const Tensor& workspace);
void gru_cell_into(const Tensor& hy, const Tensor& workspace, const Tensor& input_gates, const Tensor& hidden_gates,
                   const Tensor& hx, const Tensor& input_bias, const Tensor& hidden_bias);
void gru_cell_backward_into(const Tensor& grad_input_gates, const Tensor& grad_hidden_gates, const Tensor& grad_hx,
                            const Tensor& grad_input_bias, const Tensor& grad_hidden_bias, const Tensor& grad_hy,
                            const Tensor& workspace);

}  // namespace foo::ops::rnn
