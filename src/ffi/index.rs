//! C ABI of the index family (see kernels::index): gathers/scatters through index tensors,
//! cat, nonzero/masked_select/masked_scatter, sort/topk, arange/linspace, tril/triu.

use super::args::{OptScalarIn, ScalarIn, TensorIn, TensorListIn, TensorOut};
use super::{guard, out, tensor_ref};
use crate::error::{FooError, FooResult};
use crate::kernels::index::advanced::{index_gather, index_scatter, Indexer, Reduce};
use crate::kernels::index::iter::Bounds;
use crate::kernels::index::{cat, compact, range, sort};
use crate::tensor::FooTensor;

/// An index tensor and the dim it indexes.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct FooIndexer {
    /// int64 indices, broadcast to the iteration shape.
    pub index: FooTensor,
    /// The size of the data dim it indexes.
    pub size: i64,
    /// The stride (elements) of the data dim it indexes.
    pub stride: i64,
    /// The dim number errors report.
    pub dim: i64,
}

/// `n` indexers: null with `n == 0`, else `n` in a row, each describing a live int64 tensor
/// (the `FooTensorIn` contract, module `args`, for their `index` descriptors).
#[repr(transparent)]
pub struct IndexersIn(*const FooIndexer);

impl IndexersIn {
    fn get(&self, n: i32) -> FooResult<Vec<Indexer>> {
        if n <= 0 {
            return Ok(vec![]);
        }
        if self.0.is_null() {
            return Err(FooError::InvalidArgument("null indexer array".into()));
        }
        // SAFETY: the type's contract: n indexers in a row, live for the call.
        let raw = unsafe { std::slice::from_raw_parts(self.0, n as usize) };
        raw.iter()
            .map(|r| {
                Ok(Indexer {
                    // SAFETY: the type's contract: a valid descriptor of a live tensor.
                    index: unsafe { tensor_ref(&r.index)? },
                    size: r.size,
                    stride: r.stride as isize,
                    dim: r.dim,
                })
            })
            .collect()
    }
}

fn dim_arg(dim: i64) -> FooResult<usize> {
    usize::try_from(dim).map_err(|_| FooError::InvalidArgument(format!("negative dim {dim}")))
}

/// `out[p] = src[p + sum_k index_k[p] * stride_k]` (see kernels::index::advanced). `mode` is
/// a `FooIndexBounds` code; an out-of-range index returns FOO_STATUS_INVALID_ARGUMENT with
/// ATen's message.
///
/// # Safety
/// Descriptors must describe live memory (out writable); `idx` holds `nidx` indexers.
#[no_mangle]
pub unsafe extern "C" fn foo_index_gather(
    out: TensorOut,
    src: TensorIn,
    idx: IndexersIn,
    nidx: i32,
    mode: i32,
) -> i32 {
    guard(|| {
        let (o, s, i) = (out.get()?, src.get()?, idx.get(nidx)?);
        let b = Bounds::from_code(mode)?;
        index_gather(&o, &s, &i, b)
    })
}

/// `dst[p + sum_k index_k[p] * stride_k] (reduce)= src[p]`; `reduce` is a FooIndexReduce code,
/// `alpha` (nullable) scales the source of an add.
///
/// # Safety
/// As `foo_index_gather`; `alpha` is null or points to a scalar.
#[no_mangle]
pub unsafe extern "C" fn foo_index_scatter(
    dst: TensorOut,
    src: TensorIn,
    idx: IndexersIn,
    nidx: i32,
    mode: i32,
    reduce: i32,
    alpha: OptScalarIn,
) -> i32 {
    guard(|| {
        let (d, s, i) = (dst.get()?, src.get()?, idx.get(nidx)?);
        let b = Bounds::from_code(mode)?;
        let r = Reduce::from_repr(reduce).ok_or_else(|| {
            FooError::InvalidArgument(format!("unknown scatter reduction {reduce}"))
        })?;
        let a = alpha.get();
        index_scatter(&d, &s, &i, b, r, a)
    })
}

/// `out = cat(inputs[0..n], dim)` with dtype conversion.
///
/// # Safety
/// `out` and the `n` input descriptors must describe live memory.
#[no_mangle]
pub unsafe extern "C" fn foo_cat(out: TensorOut, inputs: TensorListIn, n: i32, dim: i64) -> i32 {
    guard(|| {
        let (o, ins) = (out.get()?, inputs.get(n)?);
        let d = dim_arg(dim)?;
        cat::cat(&o, &ins, d)
    })
}

/// The number of non-zero elements of `src`.
///
/// # Safety
/// `src` must describe live memory; `count` must be writable.
#[no_mangle]
pub unsafe extern "C" fn foo_count_nonzero(src: TensorIn, count: *mut i64) -> i32 {
    guard(|| {
        let s = src.get()?;
        let n = compact::count_nonzero(&s)?;
        out(count, n as i64)
    })
}

/// Coordinates of the non-zero elements of `src` into `out` ([N, ndim] int64).
///
/// # Safety
/// Descriptors must describe live memory (out writable).
#[no_mangle]
pub unsafe extern "C" fn foo_nonzero(out: TensorOut, src: TensorIn) -> i32 {
    guard(|| compact::nonzero(&out.get()?, &src.get()?))
}

/// `out = src[mask]` (same shapes, bool mask, 1-D out).
///
/// # Safety
/// Descriptors must describe live memory (out writable).
#[no_mangle]
pub unsafe extern "C" fn foo_masked_select(out: TensorOut, src: TensorIn, mask: TensorIn) -> i32 {
    guard(|| compact::masked_select(&out.get()?, &src.get()?, &mask.get()?))
}

/// `dst[mask] = source[:count]`.
///
/// # Safety
/// Descriptors must describe live memory (dst writable).
#[no_mangle]
pub unsafe extern "C" fn foo_masked_scatter(
    dst: TensorOut,
    mask: TensorIn,
    source: TensorIn,
) -> i32 {
    guard(|| compact::masked_scatter(&dst.get()?, &mask.get()?, &source.get()?))
}

/// Stable sort along `dim` into `values` and `indices` (int64).
///
/// # Safety
/// Descriptors must describe live memory (outputs writable, not overlapping src).
#[no_mangle]
pub unsafe extern "C" fn foo_sort(
    values: TensorOut,
    indices: TensorOut,
    src: TensorIn,
    dim: i64,
    descending: bool,
) -> i32 {
    guard(|| {
        let d = dim_arg(dim)?;
        sort::sort(&values.get()?, &indices.get()?, &src.get()?, d, descending)
    })
}

/// The `k` largest (smallest) elements along `dim`, sorted, and their indices.
///
/// # Safety
/// As `foo_sort`.
#[no_mangle]
pub unsafe extern "C" fn foo_topk(
    values: TensorOut,
    indices: TensorOut,
    src: TensorIn,
    k: i64,
    dim: i64,
    largest: bool,
) -> i32 {
    guard(|| {
        let (d, k) = (dim_arg(dim)?, dim_arg(k)?);
        sort::topk(&values.get()?, &indices.get()?, &src.get()?, k, d, largest)
    })
}

/// `out[i] = start + i * step`.
///
/// # Safety
/// `out` must describe live writable memory; the scalars must be valid.
#[no_mangle]
pub unsafe extern "C" fn foo_arange(out: TensorOut, start: ScalarIn, step: ScalarIn) -> i32 {
    guard(|| {
        let o = out.get()?;
        let (a, s) = (start.get()?, step.get()?);
        range::arange(&o, a, s)
    })
}

/// `steps` evenly spaced values from `start` to `end` into `out`.
///
/// # Safety
/// As `foo_arange`.
#[no_mangle]
pub unsafe extern "C" fn foo_linspace(
    out: TensorOut,
    start: ScalarIn,
    end: ScalarIn,
    steps: i64,
) -> i32 {
    guard(|| {
        let o = out.get()?;
        let (a, b, n) = (start.get()?, end.get()?, dim_arg(steps)?);
        range::linspace(&o, a, b, n)
    })
}

/// `out = tril(src, k)` or `triu(src, k)`; `out` may be `src`.
///
/// # Safety
/// Descriptors must describe live memory (out writable).
#[no_mangle]
pub unsafe extern "C" fn foo_tril_triu(out: TensorOut, src: TensorIn, k: i64, upper: bool) -> i32 {
    guard(|| range::tril_triu(&out.get()?, &src.get()?, k, upper))
}
