//! The right operand of `a @ w.t()` (the linear layer's layout: `w` stored `n x k`, rows
//! contiguous) transposed into a dense `k x n` scratch matrix, so that `gemm` runs its fast
//! row-major product. `gemm` reads a right operand in that orientation by gathering element
//! by element: 256 x 1024 @ (1024 x 1024)^T took 7.8 ms against 5.1 ms for `a @ b`, and
//! 128 x 256 x 256 0.20 ms against 0.15 ms (one thread, measured); the blocked transpose costs
//! about 0.5 ns per element of `w` (0.6 ms for 1024 x 1024), less than the difference from
//! 128 rows of `a` on while `w` stays in the caches (`linalg::NT_PACK_ROWS` says when).

use super::transpose::transpose_into;
use std::cell::RefCell;

/// Scratch buffers of at most this many bytes are kept by their thread for the next product
/// (fresh pages cost a fault each, ~0.25 us per 4 KiB); larger ones are freed after use.
const KEEP_BYTES: usize = 16 << 20;

thread_local! {
    static SCRATCH: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// Calls `f` with a dense `k x n` copy of the transpose of `w` (`n x k`, rows `ldw` apart):
/// the right operand of `a @ w.t()` in the row-major layout `gemm` reads fast.
///
/// # Safety
/// `w` addresses every element of the `n x k` matrix.
pub unsafe fn with_transposed<T: Copy + Default + Send + Sync, R>(
    w: *const T,
    ldw: isize,
    n: usize,
    k: usize,
    f: impl FnOnce(&[T]) -> R,
) -> R {
    const { assert!(std::mem::align_of::<T>() <= 8) };
    let len = n * k;
    let words = (len * std::mem::size_of::<T>()).div_ceil(8);
    // Taken out of the thread's slot while in use: a nested product on this thread (none today)
    // would get a buffer of its own instead of a borrow error.
    let mut buf = SCRATCH.with(|s| std::mem::take(&mut *s.borrow_mut()));
    if buf.len() < words {
        buf = vec![0u64; words];
    }
    // SAFETY: `buf` holds at least len elements of T (8-byte words, T aligned to at most 8);
    // every element is written by the transpose before it is read.
    let dst = unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr() as *mut T, len) };
    // SAFETY: the caller's contract for `w`.
    unsafe { transpose_into(w, ldw, n, k, dst) };
    let out = f(dst);
    if buf.len() * 8 <= KEEP_BYTES {
        SCRATCH.with(|s| *s.borrow_mut() = buf);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_transposed_reuses_small_buffers_and_transposes_each_call() {
        for (n, k) in [(3, 4), (5, 2), (64, 64)] {
            let w: Vec<f32> = (0..n * k).map(|i| i as f32).collect();
            // SAFETY: w is n x k, dense.
            let t = unsafe { with_transposed(w.as_ptr(), k as isize, n, k, |t| t.to_vec()) };
            for j in 0..n {
                for p in 0..k {
                    assert_eq!(t[p * n + j], w[j * k + p]);
                }
            }
        }
    }
}
