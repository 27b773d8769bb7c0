//! C ABI of the elementwise families (unary, binary, ternary).

use super::{guard, scalars, tensor_mut, tensor_ref};
use crate::error::FooError;
use crate::kernels::binary::{binary, BinaryOp};
use crate::kernels::ternary::{ternary, TernaryOp};
use crate::kernels::unary::{unary, UnaryOp};
use crate::tensor::{FooTensor, Scalar};

fn unknown(family: &str, code: i32) -> FooError {
    FooError::InvalidArgument(format!("unknown {family} op code {code}"))
}

/// `out = op(a)`.
///
/// # Safety
/// Descriptors must describe live memory (out writable); `params` holds `nparams` scalars.
#[no_mangle]
pub unsafe extern "C" fn foo_unary(
    op: i32,
    out: *const FooTensor,
    a: *const FooTensor,
    params: *const Scalar,
    nparams: i32,
) -> i32 {
    guard(|| {
        let op = UnaryOp::from_repr(op).ok_or_else(|| unknown("unary", op))?;
        // SAFETY: caller's contract.
        let (o, a, p) = unsafe { (tensor_mut(out)?, tensor_ref(a)?, scalars(params, nparams)) };
        unary(op, &o, &a, p)
    })
}

/// `out = op(a, b)`.
///
/// # Safety
/// As `foo_unary`.
#[no_mangle]
pub unsafe extern "C" fn foo_binary(
    op: i32,
    out: *const FooTensor,
    a: *const FooTensor,
    b: *const FooTensor,
    params: *const Scalar,
    nparams: i32,
) -> i32 {
    guard(|| {
        let op = BinaryOp::from_repr(op).ok_or_else(|| unknown("binary", op))?;
        // SAFETY: caller's contract.
        let (o, a, b, p) = unsafe {
            (
                tensor_mut(out)?,
                tensor_ref(a)?,
                tensor_ref(b)?,
                scalars(params, nparams),
            )
        };
        binary(op, &o, &a, &b, p)
    })
}

/// `out = op(a, b, c)`.
///
/// # Safety
/// As `foo_unary`.
#[no_mangle]
pub unsafe extern "C" fn foo_ternary(
    op: i32,
    out: *const FooTensor,
    a: *const FooTensor,
    b: *const FooTensor,
    c: *const FooTensor,
    params: *const Scalar,
    nparams: i32,
) -> i32 {
    guard(|| {
        let op = TernaryOp::from_repr(op).ok_or_else(|| unknown("ternary", op))?;
        // SAFETY: caller's contract.
        let (o, a, b, c, p) = unsafe {
            (
                tensor_mut(out)?,
                tensor_ref(a)?,
                tensor_ref(b)?,
                tensor_ref(c)?,
                scalars(params, nparams),
            )
        };
        ternary(op, &o, &a, &b, &c, p)
    })
}
