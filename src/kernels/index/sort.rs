//! sort (always stable) and topk along one dim; rows run in parallel.
//!
//! Order is ATen's: NaN compares greater than every number (last ascending, first descending),
//! -0.0 equals 0.0.

use crate::dtype::DType;
use crate::error::FooResult;
use crate::kernels::core::layout::DynLayout;
use crate::kernels::core::layout::GRAIN;
use crate::kernels::core::parallel::{parallel_for, SendPtr};
use crate::tensor::{TensorMut, TensorRef};
use crate::{invalid_arg, not_implemented};
use half::{bf16, f16};
use std::cmp::Ordering;

/// A total order for sorting: NaN greatest.
pub trait SortKey: Copy + Send + Sync {
    fn key_cmp(&self, o: &Self) -> Ordering;
}

macro_rules! ord_key {
    ($($t:ty),*) => {$(
        impl SortKey for $t {
            #[inline(always)]
            fn key_cmp(&self, o: &Self) -> Ordering { self.cmp(o) }
        }
    )*};
}
ord_key!(u8, u16, u32, u64, i8, i16, i32, i64, bool);

macro_rules! float_key {
    ($t:ty, $to:expr) => {
        impl SortKey for $t {
            #[inline(always)]
            fn key_cmp(&self, o: &Self) -> Ordering {
                let (a, b) = ($to(*self), $to(*o));
                match (a.is_nan(), b.is_nan()) {
                    (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
                    (true, true) => Ordering::Equal,
                    (true, false) => Ordering::Greater,
                    (false, true) => Ordering::Less,
                }
            }
        }
    };
}
float_key!(f32, |x: f32| x);
float_key!(f64, |x: f64| x);
float_key!(f16, f16::to_f32);
float_key!(bf16, bf16::to_f32);

/// The rows of a per-dim op: every position of the other dims, for operands
/// (values out, indices out, src). Returns the layout and the three strides along `dim`.
fn rows(
    values: &TensorMut,
    indices: &TensorMut,
    src: &TensorRef,
    dim: usize,
) -> (DynLayout, [isize; 3]) {
    let drop = |v: &[usize]| -> Vec<usize> {
        v.iter()
            .enumerate()
            .filter(|(d, _)| *d != dim)
            .map(|(_, &x)| x)
            .collect()
    };
    let drops = |v: &[isize]| -> Vec<isize> {
        v.iter()
            .enumerate()
            .filter(|(d, _)| *d != dim)
            .map(|(_, &x)| x)
            .collect()
    };
    let shape = drop(&src.shape);
    let (a, b, c) = (
        drops(&values.strides),
        drops(&indices.strides),
        drops(&src.strides),
    );
    let l = DynLayout::coalesce(&shape, &[&a, &b, &c]);
    let along = |s: &[isize]| s.get(dim).copied().unwrap_or(0);
    (
        l,
        [
            along(&values.strides),
            along(&indices.strides),
            along(&src.strides),
        ],
    )
}

fn check(
    what: &str,
    values: &TensorMut,
    indices: &TensorMut,
    src: &TensorRef,
    dim: usize,
    k: usize,
) -> FooResult<()> {
    let rank = src.ndim().max(1);
    if dim >= rank || values.dtype != src.dtype || indices.dtype != DType::I64 {
        return invalid_arg!("{what}: bad dim or output dtypes");
    }
    let mut expect = src.shape.clone();
    if !expect.is_empty() {
        expect[dim] = k;
    }
    if values.shape != expect || indices.shape != expect {
        return invalid_arg!("{what}: outputs must have shape {expect:?}");
    }
    Ok(())
}

/// Stable sort of `src` along `dim` into `values` and `indices` (int64).
pub fn sort(
    values: &TensorMut,
    indices: &TensorMut,
    src: &TensorRef,
    dim: usize,
    descending: bool,
) -> FooResult<()> {
    let n = src.shape.get(dim).copied().unwrap_or(1);
    check("sort", values, indices, src, dim, n)?;
    if src.numel() == 0 {
        return Ok(());
    }
    let (l, along) = rows(values, indices, src, dim);
    crate::dispatch!(real: src.dtype, T => {
        per_row::<T>(&l, along, values, indices, src, n, n, &|buf: &mut Vec<(T, i64)>| {
            if descending {
                buf.sort_by(|a, b| b.0.key_cmp(&a.0));
            } else {
                buf.sort_by(|a, b| a.0.key_cmp(&b.0));
            }
        });
        Ok(())
    }, _ => not_implemented!("sort: dtype {} is not sortable", src.dtype.name()))
}

/// The `k` largest (or smallest) elements of each row along `dim`, sorted, and their indices.
/// Ties go to the lower index.
pub fn topk(
    values: &TensorMut,
    indices: &TensorMut,
    src: &TensorRef,
    k: usize,
    dim: usize,
    largest: bool,
) -> FooResult<()> {
    let n = src.shape.get(dim).copied().unwrap_or(1);
    if k > n {
        return invalid_arg!("selected index k out of range");
    }
    check("topk", values, indices, src, dim, k)?;
    if values.numel() == 0 {
        return Ok(());
    }
    let (l, along) = rows(values, indices, src, dim);
    crate::dispatch!(real: src.dtype, T => {
        per_row::<T>(&l, along, values, indices, src, n, k, &|buf: &mut Vec<(T, i64)>| {
            let cmp = |a: &(T, i64), b: &(T, i64)| {
                let o = if largest { b.0.key_cmp(&a.0) } else { a.0.key_cmp(&b.0) };
                o.then(a.1.cmp(&b.1))
            };
            if k * 16 <= buf.len() {
                // Small k: one pass keeping the k best in order (most elements are rejected by
                // one comparison with the current k-th best).
                let mut best: Vec<(T, i64)> = Vec::with_capacity(k + 1);
                for e in buf.iter() {
                    if best.len() == k && cmp(e, &best[k - 1]) != std::cmp::Ordering::Less {
                        continue;
                    }
                    let at = best.partition_point(|b| cmp(b, e) == std::cmp::Ordering::Less);
                    best.insert(at, *e);
                    best.truncate(k);
                }
                buf.clear();
                buf.extend_from_slice(&best);
                return;
            }
            if k < buf.len() {
                buf.select_nth_unstable_by(k - 1, cmp);
                buf.truncate(k);
            }
            buf.sort_by(cmp);
        });
        Ok(())
    }, _ => not_implemented!("topk: dtype {} is not sortable", src.dtype.name()))
}

/// Arranges a row's (value, position) pairs in place.
type Order<'a, T> = dyn Fn(&mut Vec<(T, i64)>) + Sync + 'a;

/// For every row: loads the `n` elements with their positions, lets `order` arrange them, and
/// writes the first `k` to the outputs.
#[allow(clippy::too_many_arguments)]
fn per_row<T: SortKey>(
    l: &DynLayout,
    along: [isize; 3],
    values: &TensorMut,
    indices: &TensorMut,
    src: &TensorRef,
    n: usize,
    k: usize,
    order: &Order<'_, T>,
) {
    let (v, ix, s) = (
        SendPtr::<u8>::of(values.ptr),
        SendPtr::<u8>::of(indices.ptr),
        SendPtr::<u8>::of(src.ptr),
    );
    let inner = [l.inner_stride(0), l.inner_stride(1), l.inner_stride(2)];
    parallel_for(l.numel(), (GRAIN / n.max(1)).max(1), &|start, end| {
        let mut buf: Vec<(T, i64)> = Vec::with_capacity(n);
        l.for_each_row(start, end, &mut |off, len, _| {
            for t in 0..len as isize {
                let (vo, io, so) = (
                    off[0] + t * inner[0],
                    off[1] + t * inner[1],
                    off[2] + t * inner[2],
                );
                buf.clear();
                buf.extend((0..n).map(|j| {
                    // SAFETY: row elements of the live src (layout from its shape/strides).
                    let x = unsafe { *s.cast::<T>().at(so + j as isize * along[2]) };
                    (x, j as i64)
                }));
                order(&mut buf);
                for (j, &(x, i)) in buf.iter().take(k).enumerate() {
                    // SAFETY: j < k = the outputs' size along dim; rows are disjoint per chunk.
                    unsafe {
                        *v.cast::<T>().at(vo + j as isize * along[0]) = x;
                        *ix.cast::<i64>().at(io + j as isize * along[1]) = i;
                    }
                }
            }
            true
        });
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::core::map::testing::Owned;

    #[test]
    fn sort_nan_and_stability() {
        let src = Owned::new(vec![3f32, f32::NAN, 1.0, 3.0, -0.0, 0.0], &[6]);
        let mut v = Owned::<f32>::zeros(&[6]);
        let mut i = Owned::<i64>::zeros(&[6]);
        sort(&v.m(), &i.m(), &src.r(), 0, false).unwrap();
        assert_eq!(i.data, vec![4, 5, 2, 0, 3, 1]);
        sort(&v.m(), &i.m(), &src.r(), 0, true).unwrap();
        assert_eq!(i.data, vec![1, 0, 3, 2, 4, 5]);
        assert!(v.data[0].is_nan());
    }

    #[test]
    fn sort_rows_of_matrix_along_dim0() {
        let src = Owned::new(vec![3i32, 1, 2, 5, 1, 0], &[3, 2]);
        let mut v = Owned::<i32>::zeros(&[3, 2]);
        let mut i = Owned::<i64>::zeros(&[3, 2]);
        sort(&v.m(), &i.m(), &src.r(), 0, false).unwrap();
        assert_eq!(v.data, vec![1, 0, 2, 1, 3, 5]);
        assert_eq!(i.data, vec![2, 2, 1, 0, 0, 1]);
    }

    #[test]
    fn topk_small_k_matches_full_sort() {
        let n = 1000;
        let data: Vec<i32> = (0..n).map(|i| ((i * 7919) % 101) as i32).collect();
        let src = Owned::new(data.clone(), &[n]);
        for largest in [true, false] {
            let mut v = Owned::<i32>::zeros(&[5]);
            let mut i = Owned::<i64>::zeros(&[5]);
            topk(&v.m(), &i.m(), &src.r(), 5, 0, largest).unwrap();
            let mut all: Vec<(i32, i64)> = data.iter().copied().zip(0..).collect();
            all.sort_by(|a, b| {
                if largest {
                    b.0.cmp(&a.0)
                } else {
                    a.0.cmp(&b.0)
                }
                .then(a.1.cmp(&b.1))
            });
            assert_eq!(v.data, all[..5].iter().map(|x| x.0).collect::<Vec<_>>());
            assert_eq!(i.data, all[..5].iter().map(|x| x.1).collect::<Vec<_>>());
        }
    }

    #[test]
    fn topk_largest_and_smallest() {
        let src = Owned::new(vec![1f64, 5., 3., 5., 0.], &[5]);
        let mut v = Owned::<f64>::zeros(&[2]);
        let mut i = Owned::<i64>::zeros(&[2]);
        topk(&v.m(), &i.m(), &src.r(), 2, 0, true).unwrap();
        assert_eq!((v.data.clone(), i.data.clone()), (vec![5., 5.], vec![1, 3]));
        topk(&v.m(), &i.m(), &src.r(), 2, 0, false).unwrap();
        assert_eq!((v.data.clone(), i.data.clone()), (vec![0., 1.], vec![4, 0]));
    }
}
