//! Matrix products (mm, bmm, addmm, baddbmm, addmv, mv, dot) on a tuned GEMM.
