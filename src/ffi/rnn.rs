//! C ABI of the fused RNN cells (see kernels::rnn). Optional tensors are null pointers.

use super::args::{OptTensorIn, OptTensorOut, TensorIn, TensorOut};
use super::guard;
use crate::kernels::rnn;

/// LSTM cell forward; `input_bias`/`hidden_bias` may be null (both or neither). Like it, every
/// RNN cell takes `[B, k*H]` matrices with any strides, contiguous biases, null for an optional
/// tensor.
///
/// # Safety
/// Descriptors must describe live memory for the call (`hy`, `cy`, `workspace` writable).
#[no_mangle]
pub unsafe extern "C" fn foo_lstm_cell(
    hy: TensorOut,
    cy: TensorOut,
    workspace: TensorOut,
    input_gates: TensorIn,
    hidden_gates: TensorIn,
    cx: TensorIn,
    input_bias: OptTensorIn,
    hidden_bias: OptTensorIn,
) -> i32 {
    guard(|| {
        rnn::lstm_cell(
            &hy.get()?,
            &cy.get()?,
            &workspace.get()?,
            &input_gates.get()?,
            &hidden_gates.get()?,
            &cx.get()?,
            input_bias.get()?.as_ref(),
            hidden_bias.get()?.as_ref(),
        )
    })
}

/// Whether `foo_lstm_layer` takes the input and its weight instead of the input gates for
/// this dtype (float32 or not) and hidden size: `kernels::rnn::projects_input`.
#[no_mangle]
pub extern "C" fn foo_lstm_layer_projects(float32: bool, hidden: i64) -> bool {
    float32 && hidden > 0 && rnn::projects_input(crate::dtype::DType::F32, hidden as usize)
}

/// A whole LSTM layer's recurrence (float32/float64, contiguous tensors): see
/// `kernels::rnn::lstm_layer`; `cs` and `workspace` may be null (inference), and the biases
/// (both or neither). With `w_ih` (where `foo_lstm_layer_projects`), `input_gates` is the
/// input `x` itself, which the layer projects.
///
/// # Safety
/// Descriptors must describe live memory for the call (`out`, `c_last`, `cs`, `workspace`
/// writable).
#[no_mangle]
pub unsafe extern "C" fn foo_lstm_layer(
    out: TensorOut,
    c_last: TensorOut,
    cs: OptTensorOut,
    workspace: OptTensorOut,
    input_gates: TensorIn,
    w_ih: OptTensorIn,
    w_hh: TensorIn,
    h0: TensorIn,
    c0: TensorIn,
    input_bias: OptTensorIn,
    hidden_bias: OptTensorIn,
    reverse: bool,
) -> i32 {
    guard(|| {
        rnn::lstm_layer(
            &out.get()?,
            &c_last.get()?,
            cs.get()?.as_ref(),
            workspace.get()?.as_ref(),
            &input_gates.get()?,
            w_ih.get()?.as_ref(),
            &w_hh.get()?,
            &h0.get()?,
            &c0.get()?,
            input_bias.get()?.as_ref(),
            hidden_bias.get()?.as_ref(),
            reverse,
        )
    })
}

/// Its backward (`kernels::rnn::lstm_layer_backward`).
///
/// # Safety
/// As `foo_lstm_layer` (`grad_gates`, `grad_h0`, `grad_c0` writable).
#[no_mangle]
pub unsafe extern "C" fn foo_lstm_layer_backward(
    grad_gates: TensorOut,
    grad_h0: TensorOut,
    grad_c0: TensorOut,
    grad_out: TensorIn,
    grad_h: TensorIn,
    grad_c: TensorIn,
    cs: TensorIn,
    workspace: TensorIn,
    c0: TensorIn,
    w_hh: TensorIn,
    reverse: bool,
) -> i32 {
    guard(|| {
        rnn::lstm_layer_backward(
            &grad_gates.get()?,
            &grad_h0.get()?,
            &grad_c0.get()?,
            &grad_out.get()?,
            &grad_h.get()?,
            &grad_c.get()?,
            &cs.get()?,
            &workspace.get()?,
            &c0.get()?,
            &w_hh.get()?,
            reverse,
        )
    })
}

/// LSTM cell backward; `grad_bias`, `grad_hy` and `grad_cy` may be null.
///
/// # Safety
/// As `foo_lstm_cell` (`grad_gates`, `grad_cx`, `grad_bias` writable).
#[no_mangle]
pub unsafe extern "C" fn foo_lstm_cell_backward(
    grad_gates: TensorOut,
    grad_cx: TensorOut,
    grad_bias: OptTensorOut,
    grad_hy: OptTensorIn,
    grad_cy: OptTensorIn,
    cx: TensorIn,
    cy: TensorIn,
    workspace: TensorIn,
) -> i32 {
    guard(|| {
        rnn::lstm_cell_backward(
            &grad_gates.get()?,
            &grad_cx.get()?,
            grad_bias.get()?.as_ref(),
            grad_hy.get()?.as_ref(),
            grad_cy.get()?.as_ref(),
            &cx.get()?,
            &cy.get()?,
            &workspace.get()?,
        )
    })
}

/// GRU cell forward; `input_bias`/`hidden_bias` may be null (both or neither).
///
/// # Safety
/// As `foo_lstm_cell` (`hy`, `workspace` writable).
#[no_mangle]
pub unsafe extern "C" fn foo_gru_cell(
    hy: TensorOut,
    workspace: TensorOut,
    input_gates: TensorIn,
    hidden_gates: TensorIn,
    hx: TensorIn,
    input_bias: OptTensorIn,
    hidden_bias: OptTensorIn,
) -> i32 {
    guard(|| {
        rnn::gru_cell(
            &hy.get()?,
            &workspace.get()?,
            &input_gates.get()?,
            &hidden_gates.get()?,
            &hx.get()?,
            input_bias.get()?.as_ref(),
            hidden_bias.get()?.as_ref(),
        )
    })
}

/// GRU cell backward; the two bias gradients may be null.
///
/// # Safety
/// As `foo_lstm_cell` (the five gradients writable).
#[no_mangle]
pub unsafe extern "C" fn foo_gru_cell_backward(
    grad_input_gates: TensorOut,
    grad_hidden_gates: TensorOut,
    grad_hx: TensorOut,
    grad_input_bias: OptTensorOut,
    grad_hidden_bias: OptTensorOut,
    grad_hy: TensorIn,
    workspace: TensorIn,
) -> i32 {
    guard(|| {
        rnn::gru_cell_backward(
            &grad_input_gates.get()?,
            &grad_hidden_gates.get()?,
            &grad_hx.get()?,
            grad_input_bias.get()?.as_ref(),
            grad_hidden_bias.get()?.as_ref(),
            &grad_hy.get()?,
            &workspace.get()?,
        )
    })
}
