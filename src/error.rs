//! The error type every fallible Rust entry point returns, and its C status code.

use std::fmt;

/// Status codes returned across the C ABI (C: `FooStatus`, `FOO_STATUS_*`): the glue maps each
/// code to an exception (or, for `Unsupported`, to the CPU fallback).
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Success.
    Ok = 0,
    /// A generic runtime failure (C++ raises `RuntimeError`).
    Error = 1,
    /// The device memory limit (or the host) refused an allocation (`torch.OutOfMemoryError`).
    OutOfMemory = 2,
    /// A bad argument: shape, dtype, device index (`ValueError`/`IndexError`-like).
    InvalidArgument = 3,
    /// The operation is not supported for these inputs (`NotImplementedError`).
    NotImplemented = 4,
    /// A Rust panic was caught at the boundary (`RuntimeError`, process stays usable).
    Panic = 5,
    /// Device index out of range (`IndexError`... torch raises `RuntimeError` for cuda; we match).
    InvalidDevice = 6,
    /// The inputs are valid but this kernel has no code for them (e.g. a complex dtype): the glue
    /// runs the op through the counted CPU fallback instead of raising.
    Unsupported = 7,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FooError {
    OutOfMemory(String),
    InvalidArgument(String),
    NotImplemented(String),
    InvalidDevice(String),
    Unsupported(String),
    Runtime(String),
}

pub type FooResult<T> = Result<T, FooError>;

impl FooError {
    pub fn status(&self) -> Status {
        match self {
            FooError::OutOfMemory(_) => Status::OutOfMemory,
            FooError::InvalidArgument(_) => Status::InvalidArgument,
            FooError::NotImplemented(_) => Status::NotImplemented,
            FooError::InvalidDevice(_) => Status::InvalidDevice,
            FooError::Unsupported(_) => Status::Unsupported,
            FooError::Runtime(_) => Status::Error,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            FooError::OutOfMemory(m)
            | FooError::InvalidArgument(m)
            | FooError::NotImplemented(m)
            | FooError::InvalidDevice(m)
            | FooError::Unsupported(m)
            | FooError::Runtime(m) => m,
        }
    }
}

impl fmt::Display for FooError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for FooError {}

/// `Err(FooError::InvalidArgument(format!(...)))` in one line.
#[macro_export]
macro_rules! invalid_arg {
    ($($arg:tt)*) => { Err($crate::error::FooError::InvalidArgument(format!($($arg)*))) };
}

/// `Err(FooError::NotImplemented(format!(...)))` in one line.
#[macro_export]
macro_rules! not_implemented {
    ($($arg:tt)*) => { Err($crate::error::FooError::NotImplemented(format!($($arg)*))) };
}

/// `Err(FooError::Unsupported(format!(...)))` in one line: a kernel without code for valid inputs
/// (the op then runs through the CPU fallback), unlike `not_implemented!` (the CPU raises too).
#[macro_export]
macro_rules! unsupported {
    ($($arg:tt)*) => { Err($crate::error::FooError::Unsupported(format!($($arg)*))) };
}
