//! The tensor descriptor that crosses the C ABI, and the safe views kernels work on.

use crate::dtype::DType;
use crate::error::FooResult;
use crate::invalid_arg;
use smallvec::SmallVec;
use std::ffi::c_void;

/// Inline capacity of a shape: tensors of up to this rank describe themselves without a heap
/// allocation (each small op builds several views; their allocations were ~10% of its cost).
pub const INLINE_DIMS: usize = 6;
/// A shape (sizes in elements), inline up to `INLINE_DIMS` dimensions.
pub type Dims = SmallVec<[usize; INLINE_DIMS]>;
/// Strides in elements (may be 0 or negative), inline up to `INLINE_DIMS` dimensions.
pub type Strides = SmallVec<[isize; INLINE_DIMS]>;

const _: () = assert!(std::mem::size_of::<isize>() == std::mem::size_of::<i64>());

/// The tensor descriptor every kernel call takes.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct FooTensor {
    /// Element 0 (storage base + storage offset).
    pub data: *mut c_void,
    /// `ndim` sizes, in elements.
    pub sizes: *const i64,
    /// `ndim` strides, in elements (may be 0 or negative).
    pub strides: *const i64,
    pub ndim: i32,
    /// The c10::ScalarType code.
    pub dtype: i32,
    pub device: i32,
}

/// A read-only view of tensor memory: shape, strides (elements, may be 0 or negative), dtype.
#[derive(Debug, Clone)]
pub struct TensorRef {
    pub ptr: *const u8,
    pub shape: Dims,
    pub strides: Strides,
    pub dtype: DType,
}

/// A writable view of tensor memory. Kernels never write through a view with internal overlap
/// (the glue checks `has_internal_overlap` for outputs).
#[derive(Debug, Clone)]
pub struct TensorMut {
    pub ptr: *mut u8,
    pub shape: Dims,
    pub strides: Strides,
    pub dtype: DType,
}

// SAFETY: the views are plain pointers into device memory whose lifetime the caller (the glue,
// holding the at::Tensor) guarantees for the duration of the kernel; kernels partition writes.
unsafe impl Send for TensorRef {}
// SAFETY: see above; a TensorRef is only read.
unsafe impl Sync for TensorRef {}
// SAFETY: see above; parallel kernels write disjoint elements.
unsafe impl Send for TensorMut {}
// SAFETY: see above.
unsafe impl Sync for TensorMut {}

fn read_layout(t: &FooTensor) -> FooResult<(Dims, Strides, DType)> {
    let dtype = DType::from_code(t.dtype)?;
    let ndim = t.ndim;
    // Any rank, as on the CPU: shapes beyond INLINE_DIMS live on the heap.
    if ndim < 0 {
        return invalid_arg!("negative tensor rank {ndim}");
    }
    let ndim = ndim as usize;
    if ndim == 0 {
        return Ok((Dims::new(), Strides::new(), dtype));
    }
    if t.sizes.is_null() || t.strides.is_null() {
        return invalid_arg!("tensor descriptor has null sizes/strides");
    }
    // SAFETY: the glue passes pointers to `ndim` int64 sizes and strides that outlive this call;
    // isize has i64's size and alignment on the 64-bit targets this crate builds for.
    let (sizes, strides) = unsafe {
        (
            std::slice::from_raw_parts(t.sizes as *const isize, ndim),
            std::slice::from_raw_parts(t.strides as *const isize, ndim),
        )
    };
    if let Some(s) = sizes.iter().find(|&&s| s < 0) {
        return invalid_arg!("negative dimension size {s}");
    }
    // Sizes are non-negative, so their bits are the same as usize's: copy them in one go.
    // SAFETY: the same `ndim` sizes, all checked non-negative just above.
    let shape =
        Dims::from_slice(unsafe { std::slice::from_raw_parts(t.sizes as *const usize, ndim) });
    let strides = Strides::from_slice(strides);
    if t.data.is_null() && shape.iter().product::<usize>() > 0 {
        return invalid_arg!("non-empty tensor with a null data pointer");
    }
    Ok((shape, strides, dtype))
}

/// The shape queries both views share.
macro_rules! view_queries {
    ($view:ty) => {
        impl $view {
            pub fn numel(&self) -> usize {
                self.shape.iter().product()
            }

            pub fn ndim(&self) -> usize {
                self.shape.len()
            }

            pub fn is_contiguous(&self) -> bool {
                is_contiguous(&self.shape, &self.strides)
            }
        }
    };
}

view_queries!(TensorRef);
view_queries!(TensorMut);

impl TensorRef {
    /// # Safety
    /// `t` must describe live memory valid for reads at every index its sizes/strides reach.
    pub unsafe fn from_ffi(t: &FooTensor) -> FooResult<Self> {
        let (shape, strides, dtype) = read_layout(t)?;
        Ok(TensorRef {
            ptr: t.data as *const u8,
            shape,
            strides,
            dtype,
        })
    }
}

impl TensorMut {
    /// # Safety
    /// `t` must describe live memory valid for reads and writes at every index it reaches.
    pub unsafe fn from_ffi(t: &FooTensor) -> FooResult<Self> {
        let (shape, strides, dtype) = read_layout(t)?;
        Ok(TensorMut {
            ptr: t.data as *mut u8,
            shape,
            strides,
            dtype,
        })
    }

    pub fn as_ref(&self) -> TensorRef {
        TensorRef {
            ptr: self.ptr,
            shape: self.shape.clone(),
            strides: self.strides.clone(),
            dtype: self.dtype,
        }
    }
}

/// Row-major contiguity, ignoring the strides of size-1 dims (as PyTorch does).
pub fn is_contiguous(shape: &[usize], strides: &[isize]) -> bool {
    // As ATen: an empty tensor is contiguous whatever its strides.
    if shape.contains(&0) {
        return true;
    }
    let mut expected = 1isize;
    for (&n, &s) in shape.iter().zip(strides).rev() {
        if n != 1 {
            if s != expected {
                return false;
            }
            expected *= n as isize;
        }
    }
    true
}

/// Whether two elements of a view might share an address (an expanded or other overlapping
/// layout). Conservative: `false` is a proof that they cannot (each |stride|, in increasing
/// order, passes the extent of the smaller dims), `true` may be a false alarm.
pub fn may_overlap(shape: &[usize], strides: &[isize]) -> bool {
    if shape.contains(&0) {
        return false;
    }
    let mut dims: Vec<(usize, usize)> = shape
        .iter()
        .zip(strides)
        .filter(|(&n, _)| n > 1)
        .map(|(&n, &s)| (s.unsigned_abs(), n))
        .collect();
    dims.sort_unstable();
    let mut extent = 0usize; // largest offset reachable with the smaller dims
    for (s, n) in dims {
        if s <= extent {
            return true;
        }
        extent = extent.saturating_add(s.saturating_mul(n - 1));
    }
    false
}

/// Contiguous (row-major) strides for a shape.
/// Whether a tensor's elements fill one block of memory from its first element, each once:
/// its dims, ordered by stride, are contiguous (a channels-last tensor, a permuted contiguous
/// one). Two such tensors with the same shape and strides hold element `i` of a flat walk at
/// the same offset, so elementwise kernels can treat them as flat arrays.
pub fn is_dense(shape: &[usize], strides: &[isize]) -> bool {
    if shape.contains(&0) {
        return true;
    }
    let mut dims: SmallVec<[(isize, usize); INLINE_DIMS]> = shape
        .iter()
        .zip(strides)
        .filter(|(&n, _)| n != 1)
        .map(|(&n, &s)| (s, n))
        .collect();
    dims.sort_unstable();
    let mut expected = 1isize;
    for (s, n) in dims {
        if s != expected {
            return false;
        }
        expected *= n as isize;
    }
    true
}

pub fn contiguous_strides(shape: &[usize]) -> Strides {
    let mut strides: Strides = smallvec::smallvec![0isize; shape.len()];
    let mut acc = 1isize;
    for i in (0..shape.len()).rev() {
        strides[i] = acc;
        acc *= shape[i].max(1) as isize;
    }
    strides
}

/// A scalar value crossing the C ABI (C: `FooScalar`): a tagged union of the values a
/// c10::Scalar holds.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scalar {
    /// A `FooScalarTag` code; kernels that take optional parameters read any other value (-1) as
    /// "absent".
    pub tag: i32,
    pub i: i64,
    pub f: f64,
    pub imag: f64,
}

/// What a `FooScalar` holds (its `tag`).
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScalarTag {
    /// A bool, in `i` (0 or 1).
    Bool = 0,
    /// A signed integer, in `i`.
    Int = 1,
    /// A float, in `f`.
    Float = 2,
    /// A complex number: real part in `f`, imaginary part in `imag`.
    Complex = 3,
    /// An unsigned 64-bit integer, in `i` reinterpreted as u64.
    Uint = 4,
}

/// The tags as constants, for `match` patterns.
/// cbindgen:ignore
impl Scalar {
    pub const TAG_BOOL: i32 = ScalarTag::Bool as i32;
    pub const TAG_INT: i32 = ScalarTag::Int as i32;
    pub const TAG_FLOAT: i32 = ScalarTag::Float as i32;
    pub const TAG_COMPLEX: i32 = ScalarTag::Complex as i32;
    pub const TAG_UINT: i32 = ScalarTag::Uint as i32;

    pub fn from_bool(v: bool) -> Self {
        Scalar {
            tag: Self::TAG_BOOL,
            i: v as i64,
            f: 0.0,
            imag: 0.0,
        }
    }
    pub fn from_i64(v: i64) -> Self {
        Scalar {
            tag: Self::TAG_INT,
            i: v,
            f: 0.0,
            imag: 0.0,
        }
    }
    pub fn from_u64(v: u64) -> Self {
        Scalar {
            tag: Self::TAG_UINT,
            i: v as i64,
            f: 0.0,
            imag: 0.0,
        }
    }
    pub fn from_f64(v: f64) -> Self {
        Scalar {
            tag: Self::TAG_FLOAT,
            i: 0,
            f: v,
            imag: 0.0,
        }
    }
    pub fn from_complex(re: f64, im: f64) -> Self {
        Scalar {
            tag: Self::TAG_COMPLEX,
            i: 0,
            f: re,
            imag: im,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{is_dense, may_overlap};

    #[test]
    fn dense_layouts() {
        assert!(is_dense(&[2, 3, 4], &[12, 4, 1])); // contiguous
        assert!(is_dense(&[2, 8, 3, 3], &[72, 1, 24, 8])); // channels-last
        assert!(is_dense(&[4, 3], &[1, 4])); // transposed
        assert!(is_dense(&[2, 1, 3], &[3, 7, 1])); // size-1 dims do not count
        assert!(is_dense(&[0, 5], &[9, 9])); // empty
        assert!(!is_dense(&[2, 3], &[6, 1])); // stepped rows
        assert!(!is_dense(&[2, 3], &[0, 1])); // expanded
        assert!(!is_dense(&[3], &[-1])); // flipped
    }

    #[test]
    fn overlap_of_views() {
        assert!(!may_overlap(&[3, 4], &[4, 1])); // contiguous
        assert!(!may_overlap(&[4, 3], &[1, 4])); // transposed
        assert!(!may_overlap(&[2, 3], &[6, 2])); // stepped
        assert!(!may_overlap(&[1, 3], &[0, 1])); // size-1 dims do not count
        assert!(!may_overlap(&[0, 5], &[0, 0])); // empty
        assert!(may_overlap(&[2, 3], &[0, 1])); // expanded
        assert!(may_overlap(&[3, 3], &[1, 1])); // sliding window
        assert!(!may_overlap(&[3], &[-1])); // flipped
    }
}
