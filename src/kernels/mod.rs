//! Kernels: [`core`], the infrastructure, and one module per op family beside it (unary,
//! binary, ternary, fill, amp, reduce, linalg, conv, pool, nn, rnn, attention, index, random,
//! optim). A family imports from `core` and its own submodules only, never from another family:
//! what two families need goes into `core`.
//!
//! Each kernel is generic over the element type ([`core::element::Element`], bound to the dtype
//! by [`dispatch!`](crate::dispatch)), has a dense fast path and a strided general path
//! ([`core::layout`], [`core::map`]), and goes parallel ([`core::parallel`]) only above
//! [`core::layout::GRAIN`] elements. `_foreach_*` ops have no family of their own: the glue calls
//! the elementwise families once per tensor.

pub mod core;

pub mod amp;
pub mod attention;
pub mod binary;
pub mod conv;
pub mod fill;
pub mod index;
pub mod linalg;
pub mod nn;
pub mod optim;
pub mod pool;
pub mod random;
pub mod reduce;
pub mod rnn;
pub mod ternary;
pub mod unary;
