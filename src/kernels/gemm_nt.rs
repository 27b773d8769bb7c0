//! The right operand of `a @ w.t()` (the linear layer's layout: `w` stored `n x k`, rows
//! contiguous) transposed into a dense `k x n` scratch matrix, so that `gemm` runs its fast
//! row-major product. `gemm` reads a right operand in that orientation by gathering element
//! by element: 256 x 1024 @ (1024 x 1024)^T took 7.8 ms against 5.1 ms for `a @ b`, and
//! 128 x 256 x 256 0.20 ms against 0.15 ms (one thread, measured); the blocked transpose costs
//! about 0.5 ns per element of `w` (0.6 ms for 1024 x 1024), less than the difference from
//! about 64 rows of `a` on (see `linalg::gemm_raw` for the cases with fewer rows).

use super::parallel::parallel_for;
use std::cell::RefCell;

/// A pointer shareable across threads (each task writes its own rows of the destination).
#[derive(Clone, Copy)]
struct Addr(usize);

/// `dst[j * rows + i] = src[i * ld + j]` for `i < rows`, `j < cols`: the transpose of a
/// row-major `rows x cols` matrix (rows `ld` apart) into a dense `cols x rows` one, in 8 x 8
/// blocks so that reads and writes both stay within cache lines.
///
/// # Safety
/// `src` addresses every element of the `rows x cols` matrix; `dst` holds `rows * cols`.
pub unsafe fn transpose_into<T: Copy + Default + Send + Sync>(
    src: *const T,
    ld: isize,
    rows: usize,
    cols: usize,
    dst: &mut [T],
) {
    const B: usize = 8;
    assert!(dst.len() >= rows * cols);
    let (s, d) = (Addr(src as usize), Addr(dst.as_mut_ptr() as usize));
    // Parallel over blocks of destination rows (source columns), 64K elements or more each.
    let grain = (1 << 16) / (rows * B).max(1) + 1;
    parallel_for(cols.div_ceil(B), grain, &|c_lo, c_hi| {
        let (src, dst) = (s.0 as *const T, d.0 as *mut T);
        for cb in c_lo..c_hi {
            let (c0, c1) = (cb * B, ((cb + 1) * B).min(cols));
            let mut r0 = 0;
            while r0 < rows {
                let r1 = (r0 + B).min(rows);
                if r1 - r0 == B && c1 - c0 == B {
                    let mut blk = [[T::default(); B]; B];
                    for (r, row) in blk.iter_mut().enumerate() {
                        for (cc, v) in row.iter_mut().enumerate() {
                            // SAFETY: (r0 + r, c0 + cc) lies in the source matrix.
                            *v =
                                unsafe { *src.offset((r0 + r) as isize * ld + (c0 + cc) as isize) };
                        }
                    }
                    for cc in 0..B {
                        for (r, row) in blk.iter().enumerate() {
                            // SAFETY: (c0 + cc, r0 + r) lies in dst, whose rows c0..c1 are
                            // this task's.
                            unsafe { *dst.add((c0 + cc) * rows + r0 + r) = row[cc] };
                        }
                    }
                } else {
                    for r in r0..r1 {
                        for cc in c0..c1 {
                            // SAFETY: as above.
                            unsafe {
                                *dst.add(cc * rows + r) = *src.offset(r as isize * ld + cc as isize)
                            };
                        }
                    }
                }
                r0 = r1;
            }
        }
    });
}

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
    fn transpose_into_is_a_transpose() {
        for &(r, c) in &[(1, 1), (8, 8), (9, 17), (33, 5), (300, 260)] {
            let src: Vec<f64> = (0..r * (c + 2)).map(|i| i as f64).collect();
            let mut dst = vec![0.0; r * c];
            // SAFETY: src holds r rows of c + 2 elements.
            unsafe { transpose_into(src.as_ptr(), (c + 2) as isize, r, c, &mut dst) };
            for i in 0..r {
                for j in 0..c {
                    assert_eq!(dst[j * r + i], src[i * (c + 2) + j]);
                }
            }
        }
    }

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
