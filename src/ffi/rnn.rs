//! C ABI of the fused RNN cells (see kernels::rnn). Optional tensors are null pointers.

use super::{guard, opt_mut, opt_ref, tensor_mut, tensor_ref};
use crate::kernels::rnn;
use crate::tensor::FooTensor;

/// LSTM cell forward; `input_bias`/`hidden_bias` may be null (both or neither). Like it, every
/// RNN cell takes `[B, k*H]` matrices with any strides, contiguous biases, null for an optional
/// tensor.
///
/// # Safety
/// Descriptors must describe live memory for the call (`hy`, `cy`, `workspace` writable).
#[no_mangle]
pub unsafe extern "C" fn foo_lstm_cell(
    hy: *const FooTensor,
    cy: *const FooTensor,
    workspace: *const FooTensor,
    input_gates: *const FooTensor,
    hidden_gates: *const FooTensor,
    cx: *const FooTensor,
    input_bias: *const FooTensor,
    hidden_bias: *const FooTensor,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (hy, cy, ws, ig, hg, cx, b1, b2) = unsafe {
            (
                tensor_mut(hy)?,
                tensor_mut(cy)?,
                tensor_mut(workspace)?,
                tensor_ref(input_gates)?,
                tensor_ref(hidden_gates)?,
                tensor_ref(cx)?,
                opt_ref(input_bias)?,
                opt_ref(hidden_bias)?,
            )
        };
        rnn::lstm_cell(&hy, &cy, &ws, &ig, &hg, &cx, b1.as_ref(), b2.as_ref())
    })
}

/// LSTM cell backward; `grad_bias`, `grad_hy` and `grad_cy` may be null.
///
/// # Safety
/// As `foo_lstm_cell` (`grad_gates`, `grad_cx`, `grad_bias` writable).
#[no_mangle]
pub unsafe extern "C" fn foo_lstm_cell_backward(
    grad_gates: *const FooTensor,
    grad_cx: *const FooTensor,
    grad_bias: *const FooTensor,
    grad_hy: *const FooTensor,
    grad_cy: *const FooTensor,
    cx: *const FooTensor,
    cy: *const FooTensor,
    workspace: *const FooTensor,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (gg, gcx, gb, ghy, gcy, cx, cy, ws) = unsafe {
            (
                tensor_mut(grad_gates)?,
                tensor_mut(grad_cx)?,
                opt_mut(grad_bias)?,
                opt_ref(grad_hy)?,
                opt_ref(grad_cy)?,
                tensor_ref(cx)?,
                tensor_ref(cy)?,
                tensor_ref(workspace)?,
            )
        };
        rnn::lstm_cell_backward(
            &gg,
            &gcx,
            gb.as_ref(),
            ghy.as_ref(),
            gcy.as_ref(),
            &cx,
            &cy,
            &ws,
        )
    })
}

/// GRU cell forward; `input_bias`/`hidden_bias` may be null (both or neither).
///
/// # Safety
/// As `foo_lstm_cell` (`hy`, `workspace` writable).
#[no_mangle]
pub unsafe extern "C" fn foo_gru_cell(
    hy: *const FooTensor,
    workspace: *const FooTensor,
    input_gates: *const FooTensor,
    hidden_gates: *const FooTensor,
    hx: *const FooTensor,
    input_bias: *const FooTensor,
    hidden_bias: *const FooTensor,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (hy, ws, ig, hg, hx, b1, b2) = unsafe {
            (
                tensor_mut(hy)?,
                tensor_mut(workspace)?,
                tensor_ref(input_gates)?,
                tensor_ref(hidden_gates)?,
                tensor_ref(hx)?,
                opt_ref(input_bias)?,
                opt_ref(hidden_bias)?,
            )
        };
        rnn::gru_cell(&hy, &ws, &ig, &hg, &hx, b1.as_ref(), b2.as_ref())
    })
}

/// GRU cell backward; the two bias gradients may be null.
///
/// # Safety
/// As `foo_lstm_cell` (the five gradients writable).
#[no_mangle]
pub unsafe extern "C" fn foo_gru_cell_backward(
    grad_input_gates: *const FooTensor,
    grad_hidden_gates: *const FooTensor,
    grad_hx: *const FooTensor,
    grad_input_bias: *const FooTensor,
    grad_hidden_bias: *const FooTensor,
    grad_hy: *const FooTensor,
    workspace: *const FooTensor,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (gi, gh, ghx, gib, ghb, go, ws) = unsafe {
            (
                tensor_mut(grad_input_gates)?,
                tensor_mut(grad_hidden_gates)?,
                tensor_mut(grad_hx)?,
                opt_mut(grad_input_bias)?,
                opt_mut(grad_hidden_bias)?,
                tensor_ref(grad_hy)?,
                tensor_ref(workspace)?,
            )
        };
        rnn::gru_cell_backward(&gi, &gh, &ghx, gib.as_ref(), ghb.as_ref(), &go, &ws)
    })
}
