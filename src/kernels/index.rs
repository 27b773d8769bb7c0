//! The indexing / data-movement family: advanced indexing (gather / scatter with index tensors),
//! concatenation, compaction (nonzero, masked_select, masked_scatter), sorting (sort, topk) and
//! the range factories (arange, linspace) plus tril/triu.
//!
//! Pure data movement is instantiated once per element *size* (`dispatch!(size: ...)`, see
//! [`super::core::dispatch`]), not per dtype;
//! arithmetic (accumulating scatters, comparisons, ranges) is per dtype.

pub mod advanced;
pub mod cat;
pub mod compact;
pub mod iter;
pub mod range;
pub mod sort;
