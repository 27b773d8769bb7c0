//! C ABI of the fused scaled-dot-product attention (see kernels::attention). Optional
//! tensors are null pointers; `dropout_p == 0` means no dropout (seed and offset unused).

use super::args::{OptTensorIn, OptTensorOut, TensorIn, TensorOut};
use super::{guard, out};
use crate::kernels::attention::{self, qkv, Dropout, Grads, Params};
use crate::runtime::rng;

fn params(scale: f64, causal: i32, dropout_p: f64, seed: u64, offset: u64) -> Params {
    Params {
        scale,
        causal: causal != 0,
        dropout: (dropout_p != 0.0).then_some(Dropout {
            p: dropout_p,
            seed,
            offset,
        }),
    }
}

/// Reserves `count` words of generator `generator`'s Philox stream for an attention dropout
/// mask and returns the stream's seed and the first word's offset.
#[no_mangle]
pub extern "C" fn foo_attention_rng(
    generator: u64,
    count: u64,
    seed: *mut u64,
    offset: *mut u64,
) -> i32 {
    guard(|| {
        let (s, o) = rng::reserve(generator, count)?;
        out(seed, s)?;
        out(offset, o)
    })
}

/// Bytes of workspace `foo_attention_forward` (`backward == 0`) or `foo_attention_backward`
/// needs for these operands.
///
/// # Safety
/// Descriptors must describe live memory for the call.
#[no_mangle]
pub unsafe extern "C" fn foo_attention_workspace(
    q: TensorIn,
    k: TensorIn,
    v: TensorIn,
    backward: i32,
    bytes: *mut usize,
) -> i32 {
    guard(|| {
        out(
            bytes,
            attention::attention_workspace(&q.get()?, &k.get()?, &v.get()?, backward != 0)?,
        )
    })
}

/// Forward: `output [B, Hq, L, Ev]`, `lse [B, Hq, L]` (f32, f64 for f64 operands) from
/// `q [B, Hq, L, E]`, `k [B, Hk, S, E]`, `v [B, Hk, S, Ev]` and an optional mask `[B, Hq, L, S]`.
/// Operands are 4-D `[batch, heads, seq, dim]` views with a unit last stride; the mask may have
/// any strides (zero where it is broadcast). `dropout_p == 0` means no dropout (`seed` and
/// `offset`, from `foo_attention_rng`, unused). `workspace` (null: allocated by Rust) is a byte
/// tensor of foo memory (the caching allocator) of `foo_attention_workspace` bytes.
///
/// # Safety
/// Descriptors must describe live memory (outputs and workspace writable) for the call; `mask`
/// and `workspace` may be null.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn foo_attention_forward(
    output: TensorOut,
    lse: TensorOut,
    q: TensorIn,
    k: TensorIn,
    v: TensorIn,
    mask: OptTensorIn,
    workspace: OptTensorOut,
    scale: f64,
    causal: i32,
    dropout_p: f64,
    seed: u64,
    offset: u64,
) -> i32 {
    guard(|| {
        let p = params(scale, causal, dropout_p, seed, offset);
        attention::attention_forward(
            &output.get()?,
            &lse.get()?,
            &q.get()?,
            &k.get()?,
            &v.get()?,
            mask.get()?.as_ref(),
            p,
            workspace.get()?.as_ref(),
        )
    })
}

/// Backward of `foo_attention_forward`: `grad_bias` (may be null) is a dense `[B, Hq, L, S]`
/// tensor of the math dtype receiving the gradient of the scores.
///
/// # Safety
/// As `foo_attention_forward`; `grad_bias`, `mask` and `workspace` may be null.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn foo_attention_backward(
    grad_q: TensorOut,
    grad_k: TensorOut,
    grad_v: TensorOut,
    grad_bias: OptTensorOut,
    grad_out: TensorIn,
    q: TensorIn,
    k: TensorIn,
    v: TensorIn,
    output: TensorIn,
    lse: TensorIn,
    mask: OptTensorIn,
    workspace: OptTensorOut,
    scale: f64,
    causal: i32,
    dropout_p: f64,
    seed: u64,
    offset: u64,
) -> i32 {
    guard(|| {
        let dq = grad_q.get()?;
        let dk = grad_k.get()?;
        let dv = grad_v.get()?;
        let dbias = grad_bias.get()?;
        let grads = Grads {
            dq: &dq,
            dk: &dk,
            dv: &dv,
            dbias: dbias.as_ref(),
        };
        let p = params(scale, causal, dropout_p, seed, offset);
        attention::attention_backward(
            grads,
            &grad_out.get()?,
            &q.get()?,
            &k.get()?,
            &v.get()?,
            &output.get()?,
            &lse.get()?,
            mask.get()?.as_ref(),
            p,
            workspace.get()?.as_ref(),
        )
    })
}

/// `_transform_bias_rescale_qkv`: `q_k_v [3, B, heads, T, D / heads]` from `qkv [B, T, 3D]` plus
/// `bias [3D]`, q scaled by `1 / sqrt(D / heads)` (all contiguous, one float dtype).
///
/// # Safety
/// Descriptors must describe live memory (`q_k_v` writable) for the call.
#[no_mangle]
pub unsafe extern "C" fn foo_transform_bias_rescale_qkv(
    q_k_v: TensorOut,
    qkv: TensorIn,
    bias: TensorIn,
    heads: i64,
) -> i32 {
    guard(|| {
        let heads = usize::try_from(heads).unwrap_or(0);
        qkv::transform_bias_rescale_qkv(&q_k_v.get()?, &qkv.get()?, &bias.get()?, heads)
    })
}
