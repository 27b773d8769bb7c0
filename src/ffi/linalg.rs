//! C ABI of the linalg family (see kernels::linalg).
