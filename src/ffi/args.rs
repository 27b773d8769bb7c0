//! The tensor parameters of the C ABI, typed by role. Each is a `FooTensor` pointer in C
//! (`#[repr(transparent)]`: cbindgen writes `typedef const FooTensor *FooTensorIn;`), so the glue
//! passes `&descriptor` (or null for an optional one) as before; in Rust the role says how the
//! descriptor is unpacked, and the unpacking is written once, here, instead of in every function.
//!
//! Their fields are private: a value exists only as an argument of an `unsafe extern "C"`
//! function, whose `# Safety` contract makes the C caller vouch that a non-null pointer is a
//! valid descriptor of live memory (writable for the `Out` roles) for the duration of the call.
//! `get` relies on that contract and is safe to call inside the function.

use super::{tensor_mut, tensor_ref};
use crate::error::{FooError, FooResult};
use crate::tensor::{FooTensor, Scalar, TensorMut, TensorRef};

/// A tensor the function reads: a valid descriptor of live memory (never null).
#[repr(transparent)]
pub struct TensorIn(*const FooTensor);

/// A tensor the function writes: a valid descriptor of live writable memory (never null).
#[repr(transparent)]
pub struct TensorOut(*const FooTensor);

/// An optional tensor the function reads: null, or as `FooTensorIn`.
#[repr(transparent)]
pub struct OptTensorIn(*const FooTensor);

/// An optional tensor the function writes: null, or as `FooTensorOut`.
#[repr(transparent)]
pub struct OptTensorOut(*const FooTensor);

/// `n` tensors the function reads: null with `n == 0`, else `n` valid descriptors in a row.
#[repr(transparent)]
pub struct TensorListIn(*const FooTensor);

/// `n` tensors the function writes: as `FooTensorListIn`, writable and not overlapping.
#[repr(transparent)]
pub struct TensorListOut(*const FooTensor);

/// `n` scalar parameters: null (read as none), or `n` scalars in a row.
#[repr(transparent)]
pub struct ScalarsIn(*const Scalar);

/// One scalar parameter: a valid pointer; null is an error.
#[repr(transparent)]
pub struct ScalarIn(*const Scalar);

/// An optional scalar parameter: null, or a valid pointer.
#[repr(transparent)]
pub struct OptScalarIn(*const Scalar);

/// A parameter block (`FooConvParams`, `FooAdamArgs`, ...): a valid pointer; null is an error.
#[repr(transparent)]
pub struct ParamsIn<T>(*const T);

impl TensorIn {
    pub fn get(&self) -> FooResult<TensorRef> {
        // SAFETY: the type's contract (module doc): a valid descriptor for the call; null is
        // checked by tensor_ref.
        unsafe { tensor_ref(self.0) }
    }
}

impl TensorOut {
    pub fn get(&self) -> FooResult<TensorMut> {
        // SAFETY: as TensorIn::get, and the memory is writable.
        unsafe { tensor_mut(self.0) }
    }
}

impl OptTensorIn {
    pub fn get(&self) -> FooResult<Option<TensorRef>> {
        if self.0.is_null() {
            return Ok(None);
        }
        // SAFETY: as TensorIn::get (not null here).
        unsafe { tensor_ref(self.0) }.map(Some)
    }
}

impl OptTensorOut {
    pub fn get(&self) -> FooResult<Option<TensorMut>> {
        if self.0.is_null() {
            return Ok(None);
        }
        // SAFETY: as TensorOut::get (not null here).
        unsafe { tensor_mut(self.0) }.map(Some)
    }
}

/// The `n` descriptors of a list (`n` comes with the list in the same call).
fn list<T>(
    first: *const FooTensor,
    n: i64,
    unpack: unsafe fn(*const FooTensor) -> FooResult<T>,
) -> FooResult<Vec<T>> {
    if n <= 0 {
        return Ok(vec![]);
    }
    if first.is_null() {
        return Err(FooError::InvalidArgument("null tensor list".into()));
    }
    (0..n as usize)
        // SAFETY: the list types' contract: n valid descriptors in a row, live for the call.
        .map(|i| unsafe { unpack(first.add(i)) })
        .collect()
}

impl TensorListIn {
    pub fn get(&self, n: impl Into<i64>) -> FooResult<Vec<TensorRef>> {
        list(self.0, n.into(), tensor_ref)
    }
}

impl TensorListOut {
    pub fn get(&self, n: impl Into<i64>) -> FooResult<Vec<TensorMut>> {
        list(self.0, n.into(), tensor_mut)
    }
}

impl ScalarsIn {
    pub fn get(&self, n: i32) -> &[Scalar] {
        if self.0.is_null() || n <= 0 {
            return &[];
        }
        // SAFETY: the type's contract: n scalars in a row, live for the call.
        unsafe { std::slice::from_raw_parts(self.0, n as usize) }
    }
}

impl ScalarIn {
    pub fn get(&self) -> FooResult<&Scalar> {
        // SAFETY: the type's contract: null or a scalar live for the call.
        unsafe { self.0.as_ref() }.ok_or_else(|| FooError::InvalidArgument("null scalar".into()))
    }
}

impl<T> ParamsIn<T> {
    pub fn get(&self) -> FooResult<&T> {
        // SAFETY: the type's contract: null or a parameter block live for the call.
        unsafe { self.0.as_ref() }
            .ok_or_else(|| FooError::InvalidArgument("null parameters".into()))
    }
}

impl OptScalarIn {
    pub fn get(&self) -> Option<&Scalar> {
        // SAFETY: the type's contract: null or a scalar live for the call.
        unsafe { self.0.as_ref() }
    }
}
