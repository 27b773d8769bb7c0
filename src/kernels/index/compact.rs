//! Compaction in row-major order: nonzero, masked_select and masked_scatter.
//!
//! The logical index space is cut into fixed blocks (independent of the thread count); a first
//! parallel pass counts the selected elements per block, a prefix sum gives every block its
//! output offset, and a second parallel pass writes. Results are deterministic.

use super::iter::unravel;
use crate::dtype::DType;
use crate::error::FooResult;
use crate::invalid_arg;
use crate::kernels::core::element::Element;
use crate::kernels::core::layout::DynLayout;
use crate::kernels::core::layout::GRAIN;
use crate::kernels::core::parallel::{parallel_for, SendPtr};
use crate::tensor::{TensorMut, TensorRef};
use std::sync::atomic::{AtomicUsize, Ordering};

const BLOCK: usize = 1 << 14;

fn blocks(n: usize) -> usize {
    n.div_ceil(BLOCK)
}

fn block_range(b: usize, n: usize) -> (usize, usize) {
    (b * BLOCK, ((b + 1) * BLOCK).min(n))
}

/// Runs `f(block)` for every block, in parallel when there are enough elements.
fn for_blocks(n: usize, f: &(dyn Fn(usize) + Sync)) {
    parallel_for(blocks(n), (GRAIN / BLOCK).max(1), &|s, e| {
        (s..e).for_each(f)
    });
}

/// Per-block counts of non-zero elements of operand 0 of `l` (a logical layout over `n`).
fn block_counts<T: Element>(l: &DynLayout, base: SendPtr<u8>, n: usize) -> Vec<usize> {
    let counts: Vec<AtomicUsize> = (0..blocks(n)).map(|_| AtomicUsize::new(0)).collect();
    let s0 = l.inner_stride(0);
    for_blocks(n, &|b| {
        let (start, end) = block_range(b, n);
        let mut c = 0usize;
        l.for_each_row(start, end, &mut |off, len, _| {
            for t in 0..len as isize {
                // SAFETY: the layout addresses elements of the live operand 0.
                c += (unsafe { *base.cast::<T>().at(off[0] + t * s0) } != T::default()) as usize;
            }
            true
        });
        counts[b].store(c, Ordering::Relaxed);
    });
    counts.into_iter().map(|c| c.into_inner()).collect()
}

/// Exclusive prefix sums; returns (offsets, total).
fn prefix(counts: &[usize]) -> (Vec<usize>, usize) {
    let mut acc = 0usize;
    let offs = counts
        .iter()
        .map(|&c| {
            let o = acc;
            acc += c;
            o
        })
        .collect();
    (offs, acc)
}

/// The number of non-zero elements of `t` (NaN counts as non-zero, -0.0 as zero).
pub fn count_nonzero(t: &TensorRef) -> FooResult<usize> {
    let n = t.numel();
    if n == 0 {
        return Ok(0);
    }
    let l = DynLayout::logical(&t.shape, &[&t.strides]);
    let base = SendPtr::<u8>::of(t.ptr);
    Ok(
        crate::dispatch!(all: t.dtype, T => block_counts::<T>(&l, base, n))
            .iter()
            .sum(),
    )
}

/// `out[r, d]` = coordinate `d` of the r-th non-zero element of `src` (row-major order);
/// `out` must have shape `[count_nonzero(src), src.ndim()]` and dtype int64.
pub fn nonzero(out: &TensorMut, src: &TensorRef) -> FooResult<()> {
    let n = src.numel();
    if out.dtype != DType::I64 || out.ndim() != 2 || out.shape[1] != src.ndim() {
        return invalid_arg!(
            "nonzero: output must be int64 of shape [N, {}], got {} {:?}",
            src.ndim(),
            out.dtype.name(),
            out.shape
        );
    }
    if n == 0 {
        return if out.shape[0] == 0 {
            Ok(())
        } else {
            invalid_arg!("nonzero: output has too many rows")
        };
    }
    let l = DynLayout::logical(&src.shape, &[&src.strides]);
    crate::dispatch!(all: src.dtype, T => nonzero_typed::<T>(out, src, &l, n))
}

fn nonzero_typed<T: Element>(
    out: &TensorMut,
    src: &TensorRef,
    l: &DynLayout,
    n: usize,
) -> FooResult<()> {
    let base = SendPtr::<u8>::of(src.ptr);
    let (offs, total) = prefix(&block_counts::<T>(l, base, n));
    if total != out.shape[0] {
        return invalid_arg!(
            "nonzero: {total} non-zero elements but the output has {} rows",
            out.shape[0]
        );
    }
    let (o, s0) = (SendPtr::<u8>::of(out.ptr), l.inner_stride(0));
    let (rs, cs) = (out.strides[0], out.strides[1]);
    let nd = src.ndim();
    for_blocks(n, &|b| {
        let (start, end) = block_range(b, n);
        let mut r = offs[b] as isize;
        let mut coords = vec![0i64; nd];
        l.for_each_row(start, end, &mut |off, len, pos| {
            for t in 0..len {
                // SAFETY: as in block_counts.
                if unsafe { *base.cast::<T>().at(off[0] + t as isize * s0) } != T::default() {
                    unravel(pos + t, &src.shape, &mut coords);
                    for (d, &c) in coords.iter().enumerate() {
                        // SAFETY: r < total rows (prefix sums), d < ndim: inside `out`.
                        unsafe { *o.cast::<i64>().at(r * rs + d as isize * cs) = c };
                    }
                    r += 1;
                }
            }
            true
        });
    });
    Ok(())
}

/// `out[k]` = the k-th element of `src` (row-major) whose `mask` is true. `src` and `mask`
/// (bool) have the same shape; `out` is 1-D with `count_nonzero(mask)` elements.
pub fn masked_select(out: &TensorMut, src: &TensorRef, mask: &TensorRef) -> FooResult<()> {
    if mask.dtype != DType::Bool
        || src.shape != mask.shape
        || out.dtype != src.dtype
        || out.ndim() != 1
    {
        return invalid_arg!(
            "masked_select: bad operands (mask must be bool and shaped like the input)"
        );
    }
    let n = src.numel();
    if n == 0 {
        return Ok(());
    }
    let l = DynLayout::logical(&src.shape, &[&mask.strides, &src.strides]);
    let m = SendPtr::<u8>::of(mask.ptr);
    let (offs, total) = prefix(&block_counts::<bool>(&l, m, n));
    if total != out.shape[0] {
        return invalid_arg!(
            "masked_select: {total} selected elements but the output has {}",
            out.shape[0]
        );
    }
    let (o, so) = (SendPtr::<u8>::of(out.ptr), out.strides[0]);
    let (s, sm, ss) = (
        SendPtr::<u8>::of(src.ptr),
        l.inner_stride(0),
        l.inner_stride(1),
    );
    crate::dispatch!(size: src.dtype.size(), T => for_blocks(n, &|b| {
        let (start, end) = block_range(b, n);
        let mut r = offs[b] as isize;
        l.for_each_row(start, end, &mut |off, len, _| {
            for t in 0..len as isize {
                // SAFETY: mask/src elements from the layout; r < total = out's length.
                unsafe {
                    if *m.cast::<bool>().at(off[0] + t * sm) {
                        *o.cast::<T>().at(r * so) = *s.cast::<T>().at(off[1] + t * ss);
                        r += 1;
                    }
                }
            }
            true
        });
    }));
    Ok(())
}

/// `dst[p] = source[k]` for the k-th position `p` (row-major) where `mask` is true. `mask` (bool)
/// has dst's shape; `source` is 1-D with at least that many elements.
pub fn masked_scatter(dst: &TensorMut, mask: &TensorRef, source: &TensorRef) -> FooResult<()> {
    if mask.dtype != DType::Bool
        || dst.shape != mask.shape
        || source.dtype != dst.dtype
        || source.ndim() != 1
    {
        return invalid_arg!(
            "masked_scatter: bad operands (mask must be bool and shaped like self)"
        );
    }
    let n = dst.numel();
    if n == 0 {
        return Ok(());
    }
    let l = DynLayout::logical(&dst.shape, &[&mask.strides, &dst.strides]);
    let m = SendPtr::<u8>::of(mask.ptr);
    let (offs, total) = prefix(&block_counts::<bool>(&l, m, n));
    if total > source.shape[0] {
        return invalid_arg!("Number of elements of source < number of ones in mask");
    }
    let (s, ss) = (SendPtr::<u8>::of(source.ptr), source.strides[0]);
    let (d, sm, sd) = (
        SendPtr::<u8>::of(dst.ptr),
        l.inner_stride(0),
        l.inner_stride(1),
    );
    crate::dispatch!(size: dst.dtype.size(), T => for_blocks(n, &|b| {
        let (start, end) = block_range(b, n);
        let mut r = offs[b] as isize;
        l.for_each_row(start, end, &mut |off, len, _| {
            for t in 0..len as isize {
                // SAFETY: mask/dst elements from the layout; r < total <= source length.
                unsafe {
                    if *m.cast::<bool>().at(off[0] + t * sm) {
                        *d.cast::<T>().at(off[1] + t * sd) = *s.cast::<T>().at(r * ss);
                        r += 1;
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
    fn nonzero_of_transposed_floats() {
        // [[0, 1], [-0.0, nan]] stored transposed.
        let data = Owned::new(vec![0f32, -0.0, 1.0, f32::NAN], &[2, 2]);
        let t = TensorRef {
            strides: smallvec::smallvec![1, 2],
            ..data.r()
        };
        assert_eq!(count_nonzero(&t).unwrap(), 2);
        let mut out = Owned::<i64>::zeros(&[2, 2]);
        nonzero(&out.m(), &t).unwrap();
        assert_eq!(out.data, vec![0, 1, 1, 1]);
    }

    #[test]
    fn large_select_and_scatter_round_trip() {
        let n = 3 * BLOCK + 17;
        let src = Owned::new((0..n as i64).collect(), &[n]);
        let mask = Owned::new((0..n).map(|i| i % 3 == 0).collect(), &[n]);
        let k = count_nonzero(&mask.r()).unwrap();
        assert_eq!(k, n.div_ceil(3));
        let mut out = Owned::<i64>::zeros(&[k]);
        masked_select(&out.m(), &src.r(), &mask.r()).unwrap();
        assert!(out.data.iter().enumerate().all(|(i, &v)| v == 3 * i as i64));
        let mut dst = Owned::<i64>::zeros(&[n]);
        masked_scatter(&dst.m(), &mask.r(), &out.r()).unwrap();
        assert!(dst
            .data
            .iter()
            .enumerate()
            .all(|(i, &v)| v == if i % 3 == 0 { i as i64 } else { 0 }));
        let short = Owned::<i64>::zeros(&[1]);
        assert!(masked_scatter(&dst.m(), &mask.r(), &short.r()).is_err());
    }
}
