//! Range factories (arange, linspace) with ATen's CPU arithmetic, and tril/triu.

use crate::dtype::{DType, Kind};
use crate::error::FooResult;
use crate::kernels::core::element::Element;
use crate::kernels::core::layout::DynLayout;
use crate::kernels::core::layout::GRAIN;
use crate::kernels::core::parallel::{parallel_for, SendPtr};
use crate::tensor::{Scalar, TensorMut, TensorRef};
use crate::{invalid_arg, not_implemented};
use half::{bf16, f16};

/// `out[i] = f(i)` for the row-major position `i` of every element of `out`, in parallel.
fn fill_positions<T: Element>(out: &TensorMut, f: &(dyn Fn(usize) -> T + Sync)) {
    let n = out.numel();
    let l = DynLayout::logical(&out.shape, &[&out.strides]);
    let (o, so) = (SendPtr::<u8>::of(out.ptr), l.inner_stride(0));
    parallel_for(n, GRAIN, &|start, end| {
        l.for_each_row(start, end, &mut |off, len, pos| {
            for t in 0..len {
                // SAFETY: elements of the live output, each written once.
                unsafe { *o.cast::<T>().at(off[0] + t as isize * so) = f(pos + t) };
            }
            true
        });
    });
}

fn check_real(out: &TensorMut, what: &str) -> FooResult<()> {
    match out.dtype.kind() {
        Kind::Complex | Kind::Bool => {
            not_implemented!("{what}: dtype {} is not supported", out.dtype.name())
        }
        _ => Ok(()),
    }
}

/// `out[i] = start + i * step`, computed like ATen's CPU kernel: in double for float32/64,
/// float for float16/bfloat16 and int64 for integers.
pub fn arange(out: &TensorMut, start: &Scalar, step: &Scalar) -> FooResult<()> {
    check_real(out, "arange")?;
    if out.numel() == 0 {
        return Ok(());
    }
    match out.dtype {
        DType::F16 | DType::BF16 => {
            let (a, s) = (
                f64::from_scalar(start) as f32,
                f64::from_scalar(step) as f32,
            );
            crate::dispatch!(all: out.dtype, T => fill_positions::<T>(out, &|i| T::from_f64((a + s * i as f32) as f64)));
        }
        DType::F32 | DType::F64 => {
            let (a, s) = (f64::from_scalar(start), f64::from_scalar(step));
            crate::dispatch!(all: out.dtype, T => fill_positions::<T>(out, &|i| T::from_f64(a + s * i as f64)));
        }
        _ => {
            let (a, s) = (i64::from_scalar(start), i64::from_scalar(step));
            crate::dispatch!(all: out.dtype, T => fill_positions::<T>(out, &|i| T::from_i64(a.wrapping_add(s.wrapping_mul(i as i64)))));
        }
    }
    Ok(())
}

/// `steps` evenly spaced values from `start` to `end` (the first half counted from `start`,
/// the second from `end`, as ATen's CPU kernel; its arithmetic type per dtype).
pub fn linspace(out: &TensorMut, start: &Scalar, end: &Scalar, steps: usize) -> FooResult<()> {
    check_real(out, "linspace")?;
    if out.numel() != steps {
        return invalid_arg!(
            "linspace: output has {} elements, expected {steps}",
            out.numel()
        );
    }
    if steps == 0 {
        return Ok(());
    }
    let half = steps / 2;
    let denom = steps.saturating_sub(1).max(1);
    match out.dtype {
        DType::F32 => {
            let (a, b) = (f32::from_scalar(start), f32::from_scalar(end));
            let step = (b - a) / denom as f32;
            fill_positions::<f32>(out, &|i| {
                if i < half {
                    a + step * i as f32
                } else {
                    b - step * (steps - i - 1) as f32
                }
            });
        }
        DType::F64 => {
            let (a, b) = (f64::from_scalar(start), f64::from_scalar(end));
            let step = (b - a) / denom as f64;
            fill_positions::<f64>(out, &|i| {
                if i < half {
                    a + step * i as f64
                } else {
                    b - step * (steps - i - 1) as f64
                }
            });
        }
        DType::F16 => half_linspace::<f16>(out, start, end, steps, f16::to_f32, f16::from_f32),
        DType::BF16 => half_linspace::<bf16>(out, start, end, steps, bf16::to_f32, bf16::from_f32),
        _ => {
            let (a, b) = (i64::from_scalar(start), i64::from_scalar(end));
            let step = (b as f64 - a as f64) / denom as f64;
            crate::dispatch!(all: out.dtype, T => fill_positions::<T>(out, &|i| {
                let v = if i < half {
                    a as f64 + step * i as f64
                } else {
                    b as f64 - step * (steps - i - 1) as f64
                };
                T::from_f64(v)
            }));
        }
    }
    Ok(())
}

/// linspace for half types: every operation rounds to the storage type, as c10::Half does.
fn half_linspace<T: Element>(
    out: &TensorMut,
    start: &Scalar,
    end: &Scalar,
    steps: usize,
    to: fn(T) -> f32,
    from: fn(f32) -> T,
) {
    let r = |x: f32| to(from(x));
    let (a, b) = (to(T::from_scalar(start)), to(T::from_scalar(end)));
    let denom = steps.saturating_sub(1).max(1);
    let step = r(r(b - a) / r(denom as f32));
    let half = steps / 2;
    fill_positions::<T>(out, &|i| {
        if i < half {
            from(a + r(step * r(i as f32)))
        } else {
            from(b - r(step * r((steps - i - 1) as f32)))
        }
    });
}

/// `out = tril(src, k)` (or triu when `upper`) over the last two dims: elements with
/// `col - row > k` (tril) or `col - row < k` (triu) become zero. `out` may be `src` itself.
pub fn tril_triu(out: &TensorMut, src: &TensorRef, k: i64, upper: bool) -> FooResult<()> {
    let nd = out.ndim();
    if nd < 2 || out.shape != src.shape || out.dtype != src.dtype {
        return invalid_arg!("tril/triu: input and output must be the same >= 2-d shape and dtype");
    }
    if out.numel() == 0 {
        return Ok(());
    }
    let (rows_n, cols) = (out.shape[nd - 2], out.shape[nd - 1]);
    let l = DynLayout::logical(
        &out.shape[..nd - 1],
        &[&out.strides[..nd - 1], &src.strides[..nd - 1]],
    );
    let (co, cs) = (out.strides[nd - 1], src.strides[nd - 1]);
    let (o, s) = (SendPtr::<u8>::of(out.ptr), SendPtr::<u8>::of(src.ptr));
    let (lo, io) = (l.inner_stride(0), l.inner_stride(1));
    crate::dispatch!(size: out.dtype.size(), T => parallel_for(l.numel(), (GRAIN / cols).max(1), &|start, end| {
        l.for_each_row(start, end, &mut |off, len, pos| {
            for t in 0..len {
                let row = ((pos + t) % rows_n) as i64;
                let (ob, sb) = (off[0] + t as isize * lo, off[1] + t as isize * io);
                for j in 0..cols {
                    let d = j as i64 - row;
                    let keep = if upper { d >= k } else { d <= k };
                    // SAFETY: elements of the live operands; each output element written once
                    // (in place: read then written by the same thread).
                    unsafe {
                        let v = if keep { *s.cast::<T>().at(sb + j as isize * cs) } else { T::default() };
                        *o.cast::<T>().at(ob + j as isize * co) = v;
                    }
                }
            }
            true
        });
    }));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::core::map::testing::Owned;

    #[test]
    fn arange_types() {
        let mut o = Owned::<f32>::zeros(&[4]);
        arange(&o.m(), &Scalar::from_f64(0.5), &Scalar::from_f64(0.25)).unwrap();
        assert_eq!(o.data, vec![0.5, 0.75, 1.0, 1.25]);
        let mut o = Owned::<i64>::zeros(&[3]);
        arange(&o.m(), &Scalar::from_i64(5), &Scalar::from_i64(-2)).unwrap();
        assert_eq!(o.data, vec![5, 3, 1]);
    }

    #[test]
    fn linspace_ends_exact() {
        let mut o = Owned::<f32>::zeros(&[5]);
        linspace(&o.m(), &Scalar::from_f64(-1.0), &Scalar::from_f64(1.0), 5).unwrap();
        assert_eq!(o.data, vec![-1.0, -0.5, 0.0, 0.5, 1.0]);
        let mut o = Owned::<i32>::zeros(&[4]);
        linspace(&o.m(), &Scalar::from_i64(0), &Scalar::from_i64(10), 4).unwrap();
        assert_eq!(o.data, vec![0, 3, 6, 10]);
    }

    #[test]
    fn tril_and_triu_in_place() {
        let mut a = Owned::new((1..=9).collect::<Vec<i32>>(), &[3, 3]);
        let src = a.r();
        tril_triu(&a.m(), &src, 0, false).unwrap();
        assert_eq!(a.data, vec![1, 0, 0, 4, 5, 0, 7, 8, 9]);
        let b = Owned::new((1..=6).collect::<Vec<i32>>(), &[2, 3]);
        let mut o = Owned::<i32>::zeros(&[2, 3]);
        tril_triu(&o.m(), &b.r(), 1, true).unwrap();
        assert_eq!(o.data, vec![0, 2, 3, 0, 0, 6]);
    }
}
