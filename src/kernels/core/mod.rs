//! The kernels' infrastructure: everything an op family builds on, and the only module families
//! import from (families never import each other).
//!
//! * element types: [`element`] (`Element`, c10's casts), [`float`] (`FloatStore`/`Math`, the
//!   opmath type), [`int`] (`IntElem`, PyTorch's integer semantics), [`dispatch`] (the one
//!   dtype-dispatch macro, `dispatch!`);
//! * iteration: [`layout`] (the one dimension coalescing and row walk, ndarray views), [`map`] (the
//!   elementwise engine; [`widened`], its float16 loops in float32 blocks), [`tiles`] (2-D tiles
//!   for transposed operands), [`copy`] (strided copy with dtype conversion);
//! * parallelism: [`parallel`] (`parallel_for`, the one driver onto `runtime::pool`;
//!   `SendPtr`, the one pointer type tasks share, its contract written there; `par_chunks_mut`
//!   and `par_rows_mut`, which hand a dense output to the tasks as disjoint slices);
//! * vectorization: [`simd`] (instruction-set detection, multiversioning, lane sums),
//!   [`vmath`] (branch-free f32 math), [`philox`] (Philox words in bulk);
//! * dense helpers: [`reduced`] (float16/bfloat16 <-> float32 of whole tensors), [`scratch`]
//!   (per-thread temporary buffers), [`transpose`], [`io`] (small tensors as vectors, scalars);
//! * the GEMM engine: [`gemm`] (`gemm` crate products, the native bfloat16 kernel), which
//!   linalg's products and conv's im2col GEMMs run on.
//!
//! The copy op (`foo_copy`) is [`copy::copy`] itself: cat, linalg's staging and the reduced
//! conversions use the same strided copy, so it lives here rather than in a family.

pub mod copy;
pub mod dispatch;
pub mod element;
pub mod float;
pub mod gemm;
pub mod int;
pub mod io;
pub mod layout;
pub mod map;
pub mod parallel;
pub mod philox;
pub mod reduced;
pub mod scratch;
pub mod simd;
pub mod tiles;
pub mod transpose;
pub mod vmath;
pub mod vmath_avx512;
pub mod widened;
