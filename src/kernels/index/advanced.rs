//! Gathers and scatters through index tensors: the engine behind index.Tensor, index_put_,
//! index_select, gather, scatter*, index_add/index_copy/index_fill and take.
//!
//! The glue restrides every operand to one iteration shape (as ATen's `AdvancedIndex` does):
//! the source (gather) or destination (scatter) gets stride 0 in the dims the index tensors
//! replace, and each index tensor is broadcast to the iteration shape. An element at iteration
//! position `p` then addresses `base(p) + sum_k index_k(p) * stride_k`.
//!
//! Gathers write each output element once and run fully parallel. Scatters may hit the same
//! destination element several times (duplicate indices), so they are split: dims where the
//! destination has a real (non-zero) stride are "column" dims whose positions reach disjoint
//! destination elements (the destination has no internal overlap), and are split across
//! threads; the remaining "sequence" dims are walked in row-major order by every thread.
//! Every destination element therefore receives its updates in the same order whatever the
//! thread count: results are deterministic, duplicates accumulate without races.

use super::iter::{Bounds, FirstError};
use crate::dtype::{DType, Kind};
use crate::error::FooResult;
use crate::kernels::core::element::Element;
use crate::kernels::core::layout::DynLayout;
use crate::kernels::core::layout::GRAIN;
use crate::kernels::core::parallel::{parallel_for, SendPtr};
use crate::tensor::{Scalar, TensorMut, TensorRef};
use crate::{invalid_arg, not_implemented};
use half::{bf16, f16};
use num_complex::{Complex32, Complex64};

/// One index tensor (int64, broadcast to the iteration shape) and the dim it indexes.
#[derive(Debug, Clone)]
pub struct Indexer {
    pub index: TensorRef,
    /// Size of the indexed dim (valid indices are `0..size`, or `-size..size`).
    pub size: i64,
    /// Stride of the indexed dim in the data tensor, in elements.
    pub stride: isize,
    /// The dim number reported in out-of-range errors.
    pub dim: i64,
}

/// How a scatter combines a source element with the destination element (`reduce` of
/// `foo_index_scatter`).
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::FromRepr)]
pub enum Reduce {
    Assign = 0,
    Add = 1,
    Mul = 2,
    Max = 3,
    Min = 4,
}

/// Arithmetic of accumulating scatters, with ATen's CPU semantics (integers wrap, bool add is
/// `or`, half types round after each operation, max/min propagate NaN).
pub trait Acc: Element {
    fn acc_add(self, o: Self) -> Self;
    fn acc_mul(self, o: Self) -> Self;
    fn acc_max(self, o: Self) -> Self;
    fn acc_min(self, o: Self) -> Self;
}

macro_rules! acc_int {
    ($($t:ty),*) => {$(
        impl Acc for $t {
            #[inline(always)]
            fn acc_add(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline(always)]
            fn acc_mul(self, o: Self) -> Self { self.wrapping_mul(o) }
            #[inline(always)]
            fn acc_max(self, o: Self) -> Self { self.max(o) }
            #[inline(always)]
            fn acc_min(self, o: Self) -> Self { self.min(o) }
        }
    )*};
}
acc_int!(u8, u16, u32, u64, i8, i16, i32, i64);

macro_rules! acc_float {
    ($t:ty, $to:expr, $from:expr) => {
        impl Acc for $t {
            #[inline(always)]
            fn acc_add(self, o: Self) -> Self {
                $from($to(self) + $to(o))
            }
            #[inline(always)]
            fn acc_mul(self, o: Self) -> Self {
                $from($to(self) * $to(o))
            }
            #[inline(always)]
            fn acc_max(self, o: Self) -> Self {
                let (a, b) = ($to(self), $to(o));
                if a.is_nan() || b.is_nan() {
                    $from(f32::NAN as _)
                } else if b > a {
                    o
                } else {
                    self
                }
            }
            #[inline(always)]
            fn acc_min(self, o: Self) -> Self {
                let (a, b) = ($to(self), $to(o));
                if a.is_nan() || b.is_nan() {
                    $from(f32::NAN as _)
                } else if b < a {
                    o
                } else {
                    self
                }
            }
        }
    };
}
acc_float!(f32, |x: f32| x, |x: f32| x);
acc_float!(f64, |x: f64| x, |x: f64| x);
acc_float!(f16, f16::to_f32, f16::from_f32);
acc_float!(bf16, bf16::to_f32, bf16::from_f32);

impl Acc for bool {
    #[inline(always)]
    fn acc_add(self, o: Self) -> Self {
        self | o
    }
    #[inline(always)]
    fn acc_mul(self, o: Self) -> Self {
        self & o
    }
    #[inline(always)]
    fn acc_max(self, o: Self) -> Self {
        self | o
    }
    #[inline(always)]
    fn acc_min(self, o: Self) -> Self {
        self & o
    }
}

macro_rules! acc_complex {
    ($($t:ty),*) => {$(
        impl Acc for $t {
            #[inline(always)]
            fn acc_add(self, o: Self) -> Self { self + o }
            #[inline(always)]
            fn acc_mul(self, o: Self) -> Self { self * o }
            // Complex numbers are unordered; kernels reject max/min before dispatching.
            #[inline(always)]
            fn acc_max(self, _o: Self) -> Self { self }
            #[inline(always)]
            fn acc_min(self, _o: Self) -> Self { self }
        }
    )*};
}
acc_complex!(Complex32, Complex64);

fn check_operands(
    what: &str,
    shape: &[usize],
    dtype: DType,
    src: &TensorRef,
    idx: &[Indexer],
) -> FooResult<()> {
    if src.dtype != dtype {
        return invalid_arg!(
            "{what}: source dtype {} differs from the destination dtype {}",
            src.dtype.name(),
            dtype.name()
        );
    }
    if src.shape[..] != *shape {
        return invalid_arg!(
            "{what}: source shape {:?} differs from {shape:?}",
            src.shape
        );
    }
    for i in idx {
        if i.index.dtype != DType::I64 {
            return invalid_arg!(
                "{what}: index tensors must be int64, got {}",
                i.index.dtype.name()
            );
        }
        if i.index.shape[..] != *shape {
            return invalid_arg!(
                "{what}: index shape {:?} differs from the iteration shape {shape:?}",
                i.index.shape
            );
        }
    }
    Ok(())
}

/// Offset of the data element an iteration position addresses: `base + sum_k index_k * stride_k`
/// where `index_k` is read at element offset `offs[k]` of index tensor k.
#[inline(always)]
fn indexed(
    base: isize,
    idx: &[Indexer],
    ptrs: &[SendPtr<u8>],
    offs: impl Fn(usize) -> isize,
    bounds: Bounds,
) -> Result<isize, String> {
    let mut acc = base;
    for (k, (i, p)) in idx.iter().zip(ptrs).enumerate() {
        // SAFETY: offs(k) addresses an element of index tensor k (its layout came from its
        // shape/strides); the tensor is live for the kernel (callers' contract).
        let v = unsafe { *p.cast::<i64>().at(offs(k)) };
        acc += bounds.normalize(v, i.size, i.dim)? as isize * i.stride;
    }
    Ok(acc)
}

/// `out[p] = src[p + sum_k index_k[p] * stride_k]` for every position `p` of `out`'s shape.
pub fn index_gather(
    out: &TensorMut,
    src: &TensorRef,
    idx: &[Indexer],
    bounds: Bounds,
) -> FooResult<()> {
    check_operands("index gather", &out.shape, out.dtype, src, idx)?;
    if out.numel() == 0 {
        return Ok(());
    }
    let mut strides: Vec<&[isize]> = vec![&out.strides, &src.strides];
    strides.extend(idx.iter().map(|i| i.index.strides.as_slice()));
    let l = DynLayout::coalesce(&out.shape, &strides);
    let (o, s) = (SendPtr::<u8>::of(out.ptr), SendPtr::<u8>::of(src.ptr));
    crate::dispatch!(size: out.dtype.size(), T => gather_typed::<T>(&l, o, s, idx, bounds))
}

fn gather_typed<T: Copy>(
    l: &DynLayout,
    o: SendPtr<u8>,
    s: SendPtr<u8>,
    idx: &[Indexer],
    bounds: Bounds,
) -> FooResult<()> {
    let ptrs: Vec<SendPtr<u8>> = idx.iter().map(|i| SendPtr::<u8>::of(i.index.ptr)).collect();
    let (so, ss) = (l.inner_stride(0), l.inner_stride(1));
    let si: Vec<isize> = (0..idx.len()).map(|k| l.inner_stride(2 + k)).collect();
    let rows_share_index = si.iter().all(|&x| x == 0);
    let err = FirstError::default();
    parallel_for(l.numel(), GRAIN, &|start, end| {
        l.for_each_row(start, end, &mut |off, len, pos| {
            if rows_share_index {
                // The index is constant along the row: one lookup, then a strided row copy.
                match indexed(off[1], idx, &ptrs, |k| off[2 + k], bounds) {
                    // SAFETY: the row lies inside `out` and (after the bounds check) `src`.
                    Ok(base) => unsafe {
                        copy_row::<T>(o.cast().at(off[0]), so, s.cast().at(base), ss, len)
                    },
                    Err(m) => {
                        err.record(pos, m);
                        return false;
                    }
                }
                return true;
            }
            for t in 0..len as isize {
                match indexed(
                    off[1] + t * ss,
                    idx,
                    &ptrs,
                    |k| off[2 + k] + t * si[k],
                    bounds,
                ) {
                    // SAFETY: in-bounds element of out (layout) and of src (checked index).
                    Ok(p) => unsafe { *o.cast::<T>().at(off[0] + t * so) = *s.cast::<T>().at(p) },
                    Err(m) => {
                        err.record(pos + t as usize, m);
                        return false;
                    }
                }
            }
            true
        });
    });
    err.into_result()
}

/// Copies `len` elements between strided rows that do not overlap.
///
/// # Safety
/// Both rows must be valid for `len` elements at their strides.
#[inline(always)]
pub unsafe fn copy_row<T: Copy>(dst: *mut T, ds: isize, src: *const T, ss: isize, len: usize) {
    // SAFETY: caller's contract.
    unsafe {
        if ds == 1 && ss == 1 {
            std::ptr::copy_nonoverlapping(src, dst, len);
        } else {
            for t in 0..len as isize {
                *dst.offset(t * ds) = *src.offset(t * ss);
            }
        }
    }
}

/// `dst[p + sum_k index_k[p] * stride_k] (reduce)= src[p]` for every position `p` of the
/// iteration shape (`dst` restrided: stride 0 in the dims the indices replace). `alpha`
/// scales the source of an `Add`.
pub fn index_scatter(
    dst: &TensorMut,
    src: &TensorRef,
    idx: &[Indexer],
    bounds: Bounds,
    reduce: Reduce,
    alpha: Option<&Scalar>,
) -> FooResult<()> {
    check_operands("index scatter", &dst.shape, dst.dtype, src, idx)?;
    if dst.numel() == 0 {
        return Ok(());
    }
    if dst.dtype.kind() == Kind::Complex && matches!(reduce, Reduce::Max | Reduce::Min) {
        return not_implemented!("scatter max/min is not defined for complex tensors");
    }
    let mut plan = Plan::new(dst, src, idx);
    // An overlapping destination (index_put_ on an expanded tensor, which the CPU allows with a
    // warning): columns may share addresses, so they are written by one thread, in order.
    plan.serial = crate::tensor::may_overlap(&dst.shape, &dst.strides);
    let (d, s) = (SendPtr::<u8>::of(dst.ptr), SendPtr::<u8>::of(src.ptr));
    match reduce {
        Reduce::Assign => crate::dispatch!(size: dst.dtype.size(), T => {
            plan.run::<T>(d, s, idx, bounds, &Op(|_: T, v: T| v))
        }),
        Reduce::Add => crate::dispatch!(all: dst.dtype, T => {
            // A unit alpha is skipped, except for complex numbers: (1 + 0i) * (nan + 0i) is
            // nan + nan i, and the CPU multiplies.
            let complex = matches!(T::KIND, crate::dtype::Kind::Complex);
            match alpha.map(T::from_scalar).filter(|a| *a != T::from_i64(1) || complex) {
                Some(a) => plan.run::<T>(d, s, idx, bounds, &Op(move |x: T, v: T| x.acc_add(v.acc_mul(a)))),
                None => plan.run::<T>(d, s, idx, bounds, &Op(|x: T, v: T| x.acc_add(v))),
            }
        }),
        Reduce::Mul => crate::dispatch!(all: dst.dtype, T => {
            plan.run::<T>(d, s, idx, bounds, &Op(|x: T, v: T| x.acc_mul(v)))
        }),
        Reduce::Max => crate::dispatch!(all: dst.dtype, T => {
            plan.run::<T>(d, s, idx, bounds, &Op(|x: T, v: T| x.acc_max(v)))
        }),
        Reduce::Min => crate::dispatch!(all: dst.dtype, T => {
            plan.run::<T>(d, s, idx, bounds, &Op(|x: T, v: T| x.acc_min(v)))
        }),
    }
}

/// A scatter's element operation applied to whole rows (one dynamic call per row; the loops
/// are monomorphic in the operation).
trait RowOp<T>: Sync {
    /// `dst[k * ds] = f(dst[k * ds], src[k * ss])` for `k < len`.
    ///
    /// # Safety
    /// The rows must be valid, dst elements owned by the caller.
    unsafe fn strided(&self, dst: *mut T, ds: isize, src: *const T, ss: isize, len: usize);
    /// `dst[offs[k]] = f(dst[offs[k]], src[k * ss])`, in order of k.
    ///
    /// # Safety
    /// As `strided`.
    unsafe fn scattered(&self, dst: *mut T, offs: &[isize], src: *const T, ss: isize);
}

struct Op<F>(F);

impl<T: Copy, F: Fn(T, T) -> T + Sync> RowOp<T> for Op<F> {
    #[inline]
    unsafe fn strided(&self, dst: *mut T, ds: isize, src: *const T, ss: isize, len: usize) {
        // SAFETY: caller's contract.
        unsafe {
            if ds == 1 && ss == 1 {
                let (d, s) = (
                    std::slice::from_raw_parts_mut(dst, len),
                    std::slice::from_raw_parts(src, len),
                );
                for (d, &s) in d.iter_mut().zip(s) {
                    *d = (self.0)(*d, s);
                }
            } else {
                for k in 0..len as isize {
                    let p = dst.offset(k * ds);
                    *p = (self.0)(*p, *src.offset(k * ss));
                }
            }
        }
    }

    #[inline]
    unsafe fn scattered(&self, dst: *mut T, offs: &[isize], src: *const T, ss: isize) {
        for (k, &o) in offs.iter().enumerate() {
            // SAFETY: caller's contract.
            unsafe {
                let p = dst.offset(o);
                *p = (self.0)(*p, *src.offset(k as isize * ss));
            }
        }
    }
}

/// The column/sequence split of a scatter (operands: 0 = dst, 1 = src, 2.. = indices).
struct Plan {
    col: DynLayout,
    seq: DynLayout,
    /// Run on the calling thread (the destination may overlap itself).
    serial: bool,
}

impl Plan {
    fn new(dst: &TensorMut, src: &TensorRef, idx: &[Indexer]) -> Plan {
        let mut all: Vec<&[isize]> = vec![&dst.strides, &src.strides];
        all.extend(idx.iter().map(|i| i.index.strides.as_slice()));
        let nd = dst.shape.len();
        let col_dims: Vec<usize> = (0..nd)
            .filter(|&d| dst.shape[d] > 1 && dst.strides[d] != 0)
            .collect();
        let seq_dims: Vec<usize> = (0..nd)
            .filter(|&d| dst.shape[d] > 1 && dst.strides[d] == 0)
            .collect();
        let pick = |dims: &[usize]| -> (Vec<usize>, Vec<Vec<isize>>) {
            (
                dims.iter().map(|&d| dst.shape[d]).collect(),
                all.iter()
                    .map(|s| dims.iter().map(|&d| s[d]).collect())
                    .collect(),
            )
        };
        let (cs, cst) = pick(&col_dims);
        let (ss, sst) = pick(&seq_dims);
        let cst: Vec<&[isize]> = cst.iter().map(|v| v.as_slice()).collect();
        let sst: Vec<&[isize]> = sst.iter().map(|v| v.as_slice()).collect();
        Plan {
            col: DynLayout::coalesce(&cs, &cst),
            seq: DynLayout::logical(&ss, &sst),
            serial: false,
        }
    }

    fn run<T: Copy>(
        &self,
        d: SendPtr<u8>,
        s: SendPtr<u8>,
        idx: &[Indexer],
        bounds: Bounds,
        op: &dyn RowOp<T>,
    ) -> FooResult<()> {
        let ptrs: Vec<SendPtr<u8>> = idx.iter().map(|i| SendPtr::<u8>::of(i.index.ptr)).collect();
        let nops = 2 + idx.len();
        let (ncol, nseq) = (self.col.numel(), self.seq.numel());
        let ci: Vec<isize> = (0..nops).map(|op| self.col.inner_stride(op)).collect();
        let qi: Vec<isize> = (0..nops).map(|op| self.seq.inner_stride(op)).collect();
        // Whether the indices are constant along a column row (then one lookup per row).
        let row_const = ci[2..].iter().all(|&x| x == 0);
        let err = FirstError::default();
        let grain = if self.serial {
            ncol + 1
        } else {
            (GRAIN / nseq.max(1)).max(1)
        };
        parallel_for(ncol, grain, &|cs, ce| {
            // This chunk's column rows: offsets per operand, length, linear position.
            let mut rows: Vec<(usize, usize, usize)> = Vec::new();
            let mut row_offs: Vec<isize> = Vec::new();
            self.col.for_each_row(cs, ce, &mut |off, len, pos| {
                rows.push((row_offs.len(), len, pos));
                row_offs.extend_from_slice(off);
                true
            });
            let mut base = vec![0isize; nops];
            let mut offs: Vec<isize> = Vec::new();
            self.seq.for_each_row(0, nseq, &mut |qoff, qlen, qpos| {
                for qt in 0..qlen as isize {
                    for &(r, len, pos) in &rows {
                        for (op, b) in base.iter_mut().enumerate() {
                            *b = row_offs[r + op] + qoff[op] + qt * qi[op];
                        }
                        let at_err = |t: usize| (qpos + qt as usize) * ncol + pos + t;
                        if row_const {
                            match indexed(base[0], idx, &ptrs, |k| base[2 + k], bounds) {
                                // SAFETY: an in-bounds dst row (checked index; column dims owned by
                                // this chunk) and a src row of the layout.
                                Ok(p) => unsafe {
                                    op.strided(
                                        d.cast().at(p),
                                        ci[0],
                                        s.cast().at(base[1]),
                                        ci[1],
                                        len,
                                    )
                                },
                                Err(m) => {
                                    err.record(at_err(0), m);
                                    return false;
                                }
                            }
                            continue;
                        }
                        offs.clear();
                        for t in 0..len as isize {
                            match indexed(
                                base[0] + t * ci[0],
                                idx,
                                &ptrs,
                                |k| base[2 + k] + t * ci[2 + k],
                                bounds,
                            ) {
                                Ok(p) => offs.push(p),
                                Err(m) => {
                                    err.record(at_err(t as usize), m);
                                    return false;
                                }
                            }
                        }
                        // SAFETY: checked dst offsets of elements owned by this chunk; src row.
                        unsafe { op.scattered(d.cast().at(0), &offs, s.cast().at(base[1]), ci[1]) };
                    }
                }
                true
            });
        });
        err.into_result()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::core::map::testing::Owned;

    fn indexer(
        t: &Owned<i64>,
        shape: &[usize],
        strides: &[isize],
        size: i64,
        stride: isize,
    ) -> Indexer {
        Indexer {
            index: TensorRef {
                ptr: t.data.as_ptr() as *const u8,
                shape: shape.to_vec().into(),
                strides: strides.to_vec().into(),
                dtype: DType::I64,
            },
            size,
            stride,
            dim: 0,
        }
    }

    fn bounds(allow_negative: bool) -> Bounds {
        Bounds::from_code(allow_negative as i32).unwrap()
    }

    #[test]
    fn index_select_rows_with_negative_index() {
        // src 3x2, select rows [2, -3, 1] -> out 3x2.
        let src = Owned::new(vec![0f32, 1., 2., 3., 4., 5.], &[3, 2]);
        let ix = Owned::new(vec![2i64, -3, 1], &[3]);
        let mut out = Owned::<f32>::zeros(&[3, 2]);
        let s = TensorRef {
            strides: smallvec::smallvec![0, 1],
            ..src.r()
        };
        let i = indexer(&ix, &[3, 2], &[1, 0], 3, 2);
        index_gather(&out.m(), &s, &[i], bounds(true)).unwrap();
        assert_eq!(out.data, vec![4., 5., 0., 1., 2., 3.]);
    }

    #[test]
    fn out_of_range_is_an_error() {
        let src = Owned::new(vec![1u8, 2, 3], &[3]);
        let ix = Owned::new(vec![0i64, 5], &[2]);
        let mut out = Owned::<u8>::zeros(&[2]);
        let s = TensorRef {
            shape: smallvec::smallvec![2],
            strides: smallvec::smallvec![0],
            ..src.r()
        };
        let e = index_gather(
            &out.m(),
            &s,
            &[indexer(&ix, &[2], &[1], 3, 1)],
            bounds(true),
        )
        .unwrap_err();
        assert_eq!(
            e.message(),
            "index 5 is out of bounds for dimension 0 with size 3"
        );
        let ix = Owned::new(vec![-1i64], &[1]);
        let s1 = TensorRef {
            shape: smallvec::smallvec![1],
            ..s
        };
        let mut out = Owned::<u8>::zeros(&[1]);
        assert!(index_gather(
            &out.m(),
            &s1,
            &[indexer(&ix, &[1], &[1], 3, 1)],
            bounds(false)
        )
        .is_err());
    }

    #[test]
    fn scatter_add_accumulates_duplicates_deterministically() {
        // dst 4x3 (+= rows of src at index [1, 1, 3, 1]) - a large column count goes parallel.
        for cols in [3usize, GRAIN + 5] {
            let mut dst = Owned::<f64>::zeros(&[4, cols]);
            let src = Owned::new((0..4 * cols).map(|x| x as f64).collect(), &[4, cols]);
            let ix = Owned::new(vec![1i64, 1, 3, 1], &[4]);
            let d = TensorMut {
                strides: smallvec::smallvec![0, 1],
                ..dst.m()
            };
            let i = indexer(&ix, &[4, cols], &[1, 0], 4, cols as isize);
            index_scatter(&d, &src.r(), &[i], bounds(true), Reduce::Add, None).unwrap();
            for c in 0..cols {
                let col = |r: usize| src.data[r * cols + c];
                assert_eq!(dst.data[cols + c], col(0) + col(1) + col(3));
                assert_eq!(dst.data[3 * cols + c], col(2));
                assert_eq!(dst.data[c], 0.0);
            }
        }
    }

    #[test]
    fn scatter_reductions_and_alpha() {
        let mut dst = Owned::new(vec![1i32, 1, 1], &[3]);
        let src = Owned::new(vec![2i32, 3, 4], &[3]);
        let ix = Owned::new(vec![0i64, 0, 2], &[3]);
        let d = TensorMut {
            strides: smallvec::smallvec![0],
            ..dst.m()
        };
        let i = indexer(&ix, &[3], &[1], 3, 1);
        index_scatter(
            &d,
            &src.r(),
            std::slice::from_ref(&i),
            bounds(false),
            Reduce::Mul,
            None,
        )
        .unwrap();
        assert_eq!(dst.data, vec![6, 1, 4]);
        index_scatter(
            &d,
            &src.r(),
            std::slice::from_ref(&i),
            bounds(false),
            Reduce::Add,
            Some(&Scalar::from_i64(2)),
        )
        .unwrap();
        assert_eq!(dst.data, vec![16, 1, 12]);
        index_scatter(&d, &src.r(), &[i], bounds(false), Reduce::Assign, None).unwrap();
        assert_eq!(dst.data, vec![3, 1, 4]);
    }

    #[test]
    fn float_max_propagates_nan() {
        assert!(1.0f32.acc_max(f32::NAN).is_nan());
        assert!(f16::NAN.acc_min(f16::from_f32(1.0)).is_nan());
        assert_eq!(
            bf16::from_f32(2.0).acc_max(bf16::from_f32(3.0)),
            bf16::from_f32(3.0)
        );
        assert!(true.acc_add(false));
    }
}
