//! Kernels, one file per family. Each is generic over the element type ([`element::Element`]),
//! has a dense fast path and a strided general path ([`layout`]), and goes parallel (rayon)
//! only above [`layout::GRAIN`] elements.

pub mod copy;
pub mod element;
pub mod fill;
pub mod layout;
