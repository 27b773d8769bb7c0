//! C ABI of the random kernels (see kernels::random).

use super::{guard, scalars, tensor_mut, tensor_ref};
use crate::error::FooError;
use crate::kernels::random::{bernoulli_tensor, dropout, multinomial, random, randperm, RandomOp};
use crate::tensor::{FooTensor, Scalar};

/// Fills the dense `out` from generator `gen` with distribution `op`.
///
/// # Safety
/// `out` must describe live writable dense memory; `params` holds `nparams` scalars.
#[no_mangle]
pub unsafe extern "C" fn foo_random(
    op: i32,
    out: *const FooTensor,
    gen: u64,
    params: *const Scalar,
    nparams: i32,
) -> i32 {
    guard(|| {
        let op = RandomOp::from_repr(op)
            .ok_or_else(|| FooError::InvalidArgument(format!("unknown random op {op}")))?;
        // SAFETY: caller's contract.
        let (o, p) = unsafe { (tensor_mut(out)?, scalars(params, nparams)) };
        random(op, &o, gen, p)
    })
}

/// `out[i] = uniform() < prob[i]`.
///
/// # Safety
/// Descriptors must describe live memory (out dense and writable).
#[no_mangle]
pub unsafe extern "C" fn foo_bernoulli_tensor(
    out: *const FooTensor,
    prob: *const FooTensor,
    gen: u64,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (o, p) = unsafe { (tensor_mut(out)?, tensor_ref(prob)?) };
        bernoulli_tensor(&o, &p, gen)
    })
}

/// Inverted dropout into `out` with the keep-mask in `mask`.
///
/// # Safety
/// Descriptors must describe live memory (out and mask writable, mask dense bool).
#[no_mangle]
pub unsafe extern "C" fn foo_dropout(
    out: *const FooTensor,
    mask: *const FooTensor,
    input: *const FooTensor,
    p: f64,
    gen: u64,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (o, m, x) = unsafe { (tensor_mut(out)?, tensor_mut(mask)?, tensor_ref(input)?) };
        dropout(&o, &m, &x, p, gen)
    })
}

/// A random permutation of 0..numel(out) into the dense integer tensor `out`.
///
/// # Safety
/// `out` must describe live writable dense memory.
#[no_mangle]
pub unsafe extern "C" fn foo_randperm(out: *const FooTensor, gen: u64) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let o = unsafe { tensor_mut(out)? };
        randperm(&o, gen)
    })
}

/// `torch.multinomial` into the dense int64 `out` ([rows, samples]).
///
/// # Safety
/// Descriptors must describe live memory (out dense and writable).
#[no_mangle]
pub unsafe extern "C" fn foo_multinomial(
    out: *const FooTensor,
    prob: *const FooTensor,
    samples: i64,
    replacement: bool,
    gen: u64,
) -> i32 {
    guard(|| {
        // SAFETY: caller's contract.
        let (o, p) = unsafe { (tensor_mut(out)?, tensor_ref(prob)?) };
        multinomial(&o, &p, samples.max(0) as usize, replacement, gen)
    })
}
