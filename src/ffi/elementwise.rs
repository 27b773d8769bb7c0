//! C ABI of the elementwise families (unary, binary, ternary).

use super::args::{ScalarsIn, TensorIn, TensorOut};
use super::guard;
use crate::error::FooError;
use crate::kernels::binary::{binary, BinaryOp};
use crate::kernels::ternary::{ternary, TernaryOp};
use crate::kernels::unary::{unary, UnaryOp};

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
    out: TensorOut,
    a: TensorIn,
    params: ScalarsIn,
    nparams: i32,
) -> i32 {
    guard(|| {
        let op = UnaryOp::from_repr(op).ok_or_else(|| unknown("unary", op))?;
        let (o, a, p) = (out.get()?, a.get()?, params.get(nparams));
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
    out: TensorOut,
    a: TensorIn,
    b: TensorIn,
    params: ScalarsIn,
    nparams: i32,
) -> i32 {
    guard(|| {
        let op = BinaryOp::from_repr(op).ok_or_else(|| unknown("binary", op))?;
        let (o, a, b, p) = (out.get()?, a.get()?, b.get()?, params.get(nparams));
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
    out: TensorOut,
    a: TensorIn,
    b: TensorIn,
    c: TensorIn,
    params: ScalarsIn,
    nparams: i32,
) -> i32 {
    guard(|| {
        let op = TernaryOp::from_repr(op).ok_or_else(|| unknown("ternary", op))?;
        let (o, a, b, c, p) = (
            out.get()?,
            a.get()?,
            b.get()?,
            c.get()?,
            params.get(nparams),
        );
        ternary(op, &o, &a, &b, &c, p)
    })
}
