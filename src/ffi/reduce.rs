//! C ABI of the reduce family (see kernels::reduce).
