//! foo_rs: the Rust half of the `foo` PyTorch device.
//!
//! Device memory ([`runtime::memory`]), device selection ([`runtime::device`]), generator state
//! ([`runtime::rng`]) and every kernel ([`kernels`]) live here. The C++ glue under `src/glue/`
//! reaches them through the C ABI in [`ffi`]; Python reaches runtime services through the PyO3
//! module `foo_rs._C` (feature `python`).

pub mod dtype;
pub mod error;
pub mod ffi;
pub mod kernels;
pub mod runtime;
pub mod tensor;

#[cfg(feature = "python")]
mod python;

pub use dtype::DType;
pub use error::{FooError, FooResult};
pub use tensor::{Scalar, TensorMut, TensorRef};
