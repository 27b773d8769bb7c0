//! The indexing / data-movement family: advanced indexing (gather / scatter with index tensors),
//! concatenation, compaction (nonzero, masked_select, masked_scatter), sorting (sort, topk) and
//! the range factories (arange, linspace) plus tril/triu.
//!
//! Pure data movement is instantiated once per element *size* ([`by_size!`]), not per dtype;
//! arithmetic (accumulating scatters, comparisons, ranges) is per dtype.

pub mod advanced;
pub mod cat;
pub mod compact;
pub mod iter;
pub mod range;
pub mod sort;

/// A 16-byte element (complex128) for moves by size.
#[derive(Clone, Copy, Default, Debug, PartialEq)]
#[repr(C)]
pub struct B16(pub [u64; 2]);

/// Runs `$body` with `$T` bound to an unsigned type of `$size` bytes (1, 2, 4, 8 or 16).
#[macro_export]
macro_rules! by_size {
    ($size:expr, $T:ident => $body:expr) => {{
        match $size {
            1 => {
                type $T = u8;
                $body
            }
            2 => {
                type $T = u16;
                $body
            }
            4 => {
                type $T = u32;
                $body
            }
            8 => {
                type $T = u64;
                $body
            }
            _ => {
                type $T = $crate::kernels::index::B16;
                $body
            }
        }
    }};
}
