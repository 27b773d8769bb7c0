//! Neural-network kernels: softmax/log_softmax, losses, layer/batch/group norm, embedding backward.
//! (Pooling, the fused LSTM/GRU cells and fused attention are families of their own:
//! [`super::pool`], [`super::rnn`], [`super::attention`].)
//!
//! Every kernel here takes contiguous operands (the glue calls `.contiguous()`, as ATen's CPU
//! kernels do) and works row by row: a row is loaded into a small buffer of the math type
//! (`FloatStore::M`: f32 for f16/bf16/f32, f64 for f64), reduced and written back. The row
//! loops are compiled twice more with AVX2/AVX-512 enabled and picked at run time
//! ([`super::core::simd`]), so the polynomial `exp` and the multi-lane sums vectorize. Small
//! parameter and statistic tensors are read and written through [`super::core::io`].

pub mod embedding;
pub mod group_norm;
pub mod loss;
pub mod norm;
pub mod softmax;

pub use embedding::embedding_dense_backward;
pub use group_norm::{group_norm, group_norm_backward};
pub use loss::{
    bce_loss, bce_loss_backward, mse_loss, mse_loss_backward, nll_loss, nll_loss_backward,
};
pub use norm::{batch_norm, batch_norm_backward, layer_norm, layer_norm_backward};
pub use softmax::{softmax, softmax_backward};
