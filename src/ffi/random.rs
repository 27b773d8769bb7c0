//! C ABI of the random kernels (see kernels::random).

use super::args::{ScalarsIn, TensorIn, TensorOut};
use super::guard;
use crate::error::FooError;
use crate::kernels::random::{bernoulli_tensor, dropout, multinomial, random, randperm, RandomOp};

/// Fills the dense `out` from generator `gen` with distribution `op`.
///
/// # Safety
/// `out` must describe live writable dense memory; `params` holds `nparams` scalars.
#[no_mangle]
pub unsafe extern "C" fn foo_random(
    op: i32,
    out: TensorOut,
    gen: u64,
    params: ScalarsIn,
    nparams: i32,
) -> i32 {
    guard(|| {
        let op = RandomOp::from_repr(op)
            .ok_or_else(|| FooError::InvalidArgument(format!("unknown random op {op}")))?;
        let (o, p) = (out.get()?, params.get(nparams));
        random(op, &o, gen, p)
    })
}

/// `out[i] = uniform() < prob[i]`.
///
/// # Safety
/// Descriptors must describe live memory (out dense and writable).
#[no_mangle]
pub unsafe extern "C" fn foo_bernoulli_tensor(out: TensorOut, prob: TensorIn, gen: u64) -> i32 {
    guard(|| bernoulli_tensor(&out.get()?, &prob.get()?, gen))
}

/// Inverted dropout into `out` with the keep-mask in `mask`.
///
/// # Safety
/// Descriptors must describe live memory (out and mask writable, mask dense bool).
#[no_mangle]
pub unsafe extern "C" fn foo_dropout(
    out: TensorOut,
    mask: TensorOut,
    input: TensorIn,
    p: f64,
    gen: u64,
) -> i32 {
    guard(|| dropout(&out.get()?, &mask.get()?, &input.get()?, p, gen))
}

/// A random permutation of 0..numel(out) into the dense integer tensor `out`.
///
/// # Safety
/// `out` must describe live writable dense memory.
#[no_mangle]
pub unsafe extern "C" fn foo_randperm(out: TensorOut, gen: u64) -> i32 {
    guard(|| {
        let o = out.get()?;
        randperm(&o, gen)
    })
}

/// `torch.multinomial` into the dense int64 `out` ([rows, samples]).
///
/// # Safety
/// Descriptors must describe live memory (out dense and writable).
#[no_mangle]
pub unsafe extern "C" fn foo_multinomial(
    out: TensorOut,
    prob: TensorIn,
    samples: i64,
    replacement: bool,
    gen: u64,
) -> i32 {
    guard(|| {
        multinomial(
            &out.get()?,
            &prob.get()?,
            samples.max(0) as usize,
            replacement,
            gen,
        )
    })
}
