//! Cumulative sum and product along one dim. Accumulation follows ATen's CPU kernels: float32
//! and float64 in float64, float16/bfloat16 in float32, integers and bool in int64 (output int64).
//!
//! The other dims are coalesced and walked in rows; a row whose lines are adjacent in memory
//! is scanned column-wise (vectorized across lines), a row of dense lines line by line.

use crate::dtype::DType;
use crate::error::{FooError, FooResult};
use crate::invalid_arg;
use crate::kernels::core::element::Element;
use crate::kernels::core::float::FloatStore;
use crate::kernels::core::layout::{coalesce, for_each_row, GRAIN};
use crate::kernels::core::parallel::SendPtr;
use crate::tensor::{TensorMut, TensorRef};

/// `foo_scan`'s op codes.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::FromRepr)]
pub enum ScanOp {
    CumSum = 0,
    CumProd = 1,
}

/// Scans `n` elements along the dim for lines starting at each row of the other dims.
fn drive<I: Copy, O: Copy, A: Copy + Send + Sync>(
    out: &TensorMut,
    input: &TensorRef,
    dim: usize,
    init: A,
    step: impl Fn(A, I) -> A + Sync,
    conv: impl Fn(A) -> O + Sync,
) {
    let (mut shape, mut so, mut si) = (vec![], vec![], vec![]);
    for d in 0..input.ndim() {
        if d != dim {
            shape.push(input.shape[d]);
            so.push(out.strides[d]);
            si.push(input.strides[d]);
        }
    }
    let (n, sod, sid) = if input.ndim() == 0 {
        (1, 1, 1)
    } else {
        (input.shape[dim], out.strides[dim], input.strides[dim])
    };
    let l = coalesce(&shape, [&so, &si]);
    let lines = l.numel();
    if lines == 0 || n == 0 {
        return;
    }
    let (isi, iso) = (
        l.strides[1].last().copied().unwrap_or(0),
        l.strides[0].last().copied().unwrap_or(0),
    );
    let (po, pi) = (SendPtr::<O>::of(out.ptr), SendPtr::<I>::of(input.ptr));
    let grain = (GRAIN / n).max(1);
    super::engine::par(lines * n, lines, grain, &|s, e| {
        let mut acc: Vec<A> = Vec::new();
        for_each_row(&l, s, e, &mut |off, len| {
            let o = po.at(off[0]);
            let x = pi.at(off[1]) as *const I;
            // SAFETY: every address is an element of `out` / `input` (offsets from their
            // shapes and strides); `out` does not overlap `input` (the glue stages it).
            unsafe {
                if len == 1 || (sid == 1 && isi != 1) {
                    for j in 0..len as isize {
                        let (o, x) = (o.offset(j * iso), x.offset(j * isi));
                        let mut a = init;
                        for k in 0..n as isize {
                            a = step(a, *x.offset(k * sid));
                            *o.offset(k * sod) = conv(a);
                        }
                    }
                } else {
                    acc.clear();
                    acc.resize(len, init);
                    for k in 0..n as isize {
                        let (o, x) = (o.offset(k * sod), x.offset(k * sid));
                        if isi == 1 && iso == 1 {
                            let os = std::slice::from_raw_parts_mut(o, len);
                            let xs = std::slice::from_raw_parts(x, len);
                            for ((a, o), &x) in acc.iter_mut().zip(os).zip(xs) {
                                *a = step(*a, x);
                                *o = conv(*a);
                            }
                        } else {
                            for (j, a) in acc.iter_mut().enumerate() {
                                let j = j as isize;
                                *a = step(*a, *x.offset(j * isi));
                                *o.offset(j * iso) = conv(*a);
                            }
                        }
                    }
                }
            }
        });
    });
}

fn half_scan<F: FloatStore<M = f32>>(out: &TensorMut, input: &TensorRef, dim: usize, prod: bool) {
    if prod {
        drive(
            out,
            input,
            dim,
            1.0f32,
            |a: f32, x: F| a * x.load(),
            F::store,
        );
    } else {
        drive(
            out,
            input,
            dim,
            0.0f32,
            |a: f32, x: F| a + x.load(),
            F::store,
        );
    }
}

/// `out = cumsum/cumprod(input, dim)`. Float inputs write their own dtype; integer and bool
/// inputs write int64.
pub fn scan(op: ScanOp, out: &TensorMut, input: &TensorRef, dim: usize) -> FooResult<()> {
    if out.shape != input.shape || (input.ndim() > 0 && dim >= input.ndim()) {
        return invalid_arg!(
            "scan: bad shapes {:?} -> {:?} or dim {dim}",
            input.shape,
            out.shape
        );
    }
    let dt = input.dtype;
    let prod = op == ScanOp::CumProd;
    let want = if dt.kind() == crate::dtype::Kind::Float {
        dt
    } else {
        DType::I64
    };
    if out.dtype != want {
        return Err(FooError::Runtime(format!(
            "scan: output has dtype {} but the kernel writes {}",
            out.dtype.name(),
            want.name()
        )));
    }
    match dt {
        DType::F32 | DType::F64 => crate::dispatch!(float: dt, F => {
            let init = if prod { 1.0 } else { 0.0 };
            if prod {
                drive(out, input, dim, init, |a: f64, x: F| a * x.to_f64(), F::from_f64);
            } else {
                drive(out, input, dim, init, |a: f64, x: F| a + x.to_f64(), F::from_f64);
            }
        }, _ => unreachable!()),
        DType::F16 => half_scan::<half::f16>(out, input, dim, prod),
        DType::BF16 => half_scan::<half::bf16>(out, input, dim, prod),
        DType::C64 | DType::C128 => {
            return Err(FooError::NotImplemented(format!(
                "{op:?} is not implemented for dtype {} on foo",
                dt.name()
            )))
        }
        _ => crate::dispatch!(all: dt, T => {
            if prod {
                drive(out, input, dim, 1i64, |a: i64, x: T| a.wrapping_mul(x.to_i64()), |a| a);
            } else {
                drive(out, input, dim, 0i64, |a: i64, x: T| a.wrapping_add(x.to_i64()), |a| a);
            }
        }),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::core::map::testing::Owned;

    #[test]
    fn cumsum_both_dims() {
        let a = Owned::new((1..=6).map(|x| x as f32).collect(), &[2, 3]);
        let mut o = Owned::<f32>::zeros(&[2, 3]);
        scan(ScanOp::CumSum, &o.m(), &a.r(), 1).unwrap();
        assert_eq!(o.data, vec![1.0, 3.0, 6.0, 4.0, 9.0, 15.0]);
        scan(ScanOp::CumSum, &o.m(), &a.r(), 0).unwrap();
        assert_eq!(o.data, vec![1.0, 2.0, 3.0, 5.0, 7.0, 9.0]);
        let b = Owned::new(vec![true, true, false, true], &[4]);
        let mut p = Owned::<i64>::zeros(&[4]);
        scan(ScanOp::CumProd, &p.m(), &b.r(), 0).unwrap();
        assert_eq!(p.data, vec![1, 1, 0, 0]);
    }
}
