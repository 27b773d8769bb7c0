//! Kernels, one file per family. Each is generic over the element type ([`element::Element`]),
//! has a dense fast path and a strided general path ([`layout`], [`map`]), and goes parallel
//! (rayon) only above [`layout::GRAIN`] elements.

pub mod amp;
pub mod attention;
pub mod binary;
pub mod conv;
pub mod copy;
pub mod element;
pub mod fill;
pub mod float;
pub mod gemm_bf16;
pub mod gemm_nt;
pub mod index;
pub mod int;
pub mod layout;
pub mod linalg;
pub mod map;
pub mod nn;
pub mod optim;
pub mod parallel;
pub mod pool;
pub mod random;
pub mod reduce;
pub mod reduced;
pub mod rnn;
pub mod scratch;
pub mod ternary;
pub mod tiles;
pub mod transpose;
pub mod unary;
pub mod vmath;
