//! Kernels: [`core`], the infrastructure, and one module per op family beside it. Each kernel is
//! generic over the element type ([`core::element::Element`]), has a dense fast path and a
//! strided general path ([`core::layout`], [`core::map`]), and goes parallel only above
//! [`core::layout::GRAIN`] elements.

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
