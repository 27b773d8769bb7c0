//! C ABI of the index family (see kernels::index).
