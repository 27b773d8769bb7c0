//! C ABI of the nn family (see kernels::nn).
