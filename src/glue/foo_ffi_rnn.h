// The fused RNN cells' C ABI (src/ffi/rnn.rs). Operands are [B, k*H] matrices with any strides;
// biases are contiguous; optional tensors are null.
#pragma once

#include "foo_ffi.h"

#ifdef __cplusplus
extern "C" {
#endif

int32_t foo_lstm_cell(const FooTensor* hy, const FooTensor* cy, const FooTensor* workspace,
                      const FooTensor* input_gates, const FooTensor* hidden_gates, const FooTensor* cx,
                      const FooTensor* input_bias, const FooTensor* hidden_bias);
int32_t foo_lstm_cell_backward(const FooTensor* grad_gates, const FooTensor* grad_cx, const FooTensor* grad_bias,
                               const FooTensor* grad_hy, const FooTensor* grad_cy, const FooTensor* cx,
                               const FooTensor* cy, const FooTensor* workspace);
int32_t foo_gru_cell(const FooTensor* hy, const FooTensor* workspace, const FooTensor* input_gates,
                     const FooTensor* hidden_gates, const FooTensor* hx, const FooTensor* input_bias,
                     const FooTensor* hidden_bias);
int32_t foo_gru_cell_backward(const FooTensor* grad_input_gates, const FooTensor* grad_hidden_gates,
                              const FooTensor* grad_hx, const FooTensor* grad_input_bias,
                              const FooTensor* grad_hidden_bias, const FooTensor* grad_hy,
                              const FooTensor* workspace);

#ifdef __cplusplus
}
#endif
