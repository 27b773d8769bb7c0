// Registrations of the fused RNN cells (ops_rnn.cpp). `_thnn_fused_lstm_cell_backward` is
// CompositeImplicitAutograd over `_thnn_fused_lstm_cell_backward_impl`; the `.out` variants are
// ATen's CompositeExplicitAutograd wrappers of the functional ops.
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

}  // namespace foo
