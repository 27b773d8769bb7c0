// Registrations of the fused RNN cells (ops_rnn.cpp) and layers (ops_rnn_layer.cpp).
// `_thnn_fused_lstm_cell_backward` is CompositeImplicitAutograd over
// `_thnn_fused_lstm_cell_backward_impl`; the `.out` variants are ATen's CompositeExplicitAutograd
// wrappers of the functional ops.
#include <torch/library.h>

#include "common.h"
#include "ops_rnn.h"

namespace foo {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  FOO_IMPL(m, "_thnn_fused_lstm_cell", ops::rnn::fused_lstm_cell);
  FOO_IMPL(m, "_thnn_fused_lstm_cell_backward_impl", ops::rnn::fused_lstm_cell_backward_impl);
  FOO_IMPL(m, "_thnn_fused_gru_cell", ops::rnn::fused_gru_cell);
  FOO_IMPL(m, "_thnn_fused_gru_cell_backward", ops::rnn::fused_gru_cell_backward);
}

// The whole layers (ops_rnn_layer.cpp) replace ATen's CompositeImplicitAutograd loop. Registered
// for the autograd key, where autograd would otherwise run the composite, and for the backend key,
// reached below autograd (inference mode). Not FOO_IMPL: they orchestrate kernels and count
// themselves (aten::lstm.input, aten::gru.input) only when they ran the layers, not the composite.
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("lstm.input", TORCH_FN(ops::rnn::lstm));
  m.impl("gru.input", TORCH_FN(ops::rnn::gru));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("lstm.input", TORCH_FN(ops::rnn::lstm));
  m.impl("gru.input", TORCH_FN(ops::rnn::gru));
}

}  // namespace foo
