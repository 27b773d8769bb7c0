//! The right operand of `a @ w.t()` (the linear layer's layout: `w` stored `n x k`, rows
//! contiguous) transposed into a dense `k x n` scratch matrix, so that `gemm` runs its fast
//! row-major product. `gemm` reads a right operand in that orientation by gathering element
//! by element: 256 x 1024 @ (1024 x 1024)^T took 7.8 ms against 5.1 ms for `a @ b`, and
//! 128 x 256 x 256 0.20 ms against 0.15 ms (one thread, measured); the blocked transpose costs
//! about 0.5 ns per element of `w` (0.6 ms for 1024 x 1024), less than the difference from
//! 128 rows of `a` on while `w` stays in the caches ([`super::NT_PACK_ROWS`] says when).

use super::GemmElem;
use crate::kernels::core::scratch::with_scratch;
use crate::kernels::core::transpose::transpose_into;

/// Calls `f` with a dense `k x n` copy of the transpose of `w` (`n x k`, rows `ldw` apart):
/// the right operand of `a @ w.t()` in the row-major layout `gemm` reads fast. The copy lives
/// in a kept scratch buffer of the calling thread (see `kernels::core::scratch`); `parallel` as
/// [`transpose_into`]'s.
///
/// # Safety
/// `w` addresses every element of the `n x k` matrix.
pub unsafe fn with_transposed<T: GemmElem, R>(
    w: *const T,
    ldw: isize,
    n: usize,
    k: usize,
    parallel: bool,
    f: impl FnOnce(&[T]) -> R,
) -> R {
    with_scratch(n * k, |dst| {
        // SAFETY: the caller's contract for `w`; every element of dst is written before `f`
        // reads it.
        unsafe { transpose_into(w, ldw, n, k, dst, parallel) };
        f(dst)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_transposed_reuses_small_buffers_and_transposes_each_call() {
        for (n, k) in [(3, 4), (5, 2), (64, 64)] {
            let w: Vec<f32> = (0..n * k).map(|i| i as f32).collect();
            // SAFETY: w is n x k, dense.
            let t = unsafe { with_transposed(w.as_ptr(), k as isize, n, k, true, |t| t.to_vec()) };
            for j in 0..n {
                for p in 0..k {
                    assert_eq!(t[p * n + j], w[j * k + p]);
                }
            }
        }
    }
}
