//! C ABI of the conv family (see kernels::conv).
