//! Reductions (sum, mean, prod, max/min, arg*, var/std, norm, all/any, logsumexp) and scans (cumsum, cumprod).
//!
//! [`engine`] holds the one layout planner and driver every reduction goes through (inner,
//! outer and general strided patterns, deterministic chunking of long reductions);
//! [`ops`] holds the per-op accumulators (the only code monomorphized per dtype) and the entry
//! point [`ops::reduce`]; [`scan`] holds the cumulative ops.

pub mod engine;
pub mod ops;
pub mod scan;

pub use ops::{reduce, ReduceOp};
pub use scan::{scan, ScanOp};
