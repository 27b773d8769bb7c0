//! The one parallel driver every kernel goes through: split `0..n` into chunks of at least
//! `grain` items and run them on the process's helper threads (see `runtime::pool`). It is not
//! generic over the kernel (it takes `&dyn Fn`), so the machinery is compiled once, not once per
//! op and dtype.
//!
//! Chunks that write a dense output take their part of it as a slice ([`par_chunks_mut`],
//! [`par_rows_mut`]); everything else a task reads or writes through raw addresses goes through
//! [`SendPtr`], the one pointer type shared across tasks.

use crate::runtime::pool;
use rayon::prelude::*;

/// Calls `f(start, end)` over disjoint ranges covering `0..n`: on the calling thread when
/// `n < grain`, else in parallel chunks (about four per thread, for load balance). From a
/// plain thread it fans out with [`pool::fork_join`] (the caller works too); on a worker of a
/// rayon pool (the Rust tests run kernels under pools of several sizes to check that results do
/// not depend on the thread count) it uses rayon's own splitting over that pool.
pub fn parallel_for(n: usize, grain: usize, f: &(dyn Fn(usize, usize) + Sync)) {
    if n == 0 {
        return;
    }
    let grain = grain.max(1);
    if n < grain {
        f(0, n);
        return;
    }
    if rayon::current_thread_index().is_none() {
        pool::fork_join(n, chunk_count(n, grain, pool::num_threads()), f);
        return;
    }
    let threads = rayon::current_num_threads().max(1);
    if threads == 1 {
        f(0, n);
        return;
    }
    let chunks = chunk_count(n, grain, threads);
    let step = n.div_ceil(chunks);
    (0..chunks).into_par_iter().for_each(|c| {
        let start = c * step;
        let end = ((c + 1) * step).min(n);
        if start < end {
            f(start, end);
        }
    });
}

/// Calls `f(i, start, end)` over parts `start..end` of segments `i` of lengths `lens`, as
/// [`parallel_for`] splits their concatenation: one fork-join for a list of tensors (a fused
/// optimizer step over a model's parameters) instead of one per tensor, and chunks that balance
/// over the whole list. A chunk that spans several segments makes a call for each.
pub fn parallel_segments(lens: &[usize], grain: usize, f: &(dyn Fn(usize, usize, usize) + Sync)) {
    // starts[i]..starts[i + 1] is segment i in the concatenation.
    let mut starts = Vec::with_capacity(lens.len() + 1);
    starts.push(0usize);
    for &len in lens {
        starts.push(starts[starts.len() - 1] + len);
    }
    parallel_for(starts[lens.len()], grain, &|s, e| {
        // The last segment starting at or before `s` (empty segments before it share its start).
        let mut i = starts.partition_point(|&b| b <= s) - 1;
        let mut pos = s;
        while pos < e {
            let end = starts[i + 1].min(e);
            if end > pos {
                f(i, pos - starts[i], end - starts[i]);
                pos = end;
            }
            i += 1;
        }
    });
}

/// Calls `f(start, end)` over ranges of units covering `0..n`, in parallel, claimed as the
/// threads go, from large to single units ([`pool::fork_join_guided`]): for kernels whose units
/// are heavy (tens of microseconds: tiles of a convolution times a block of channels), where
/// [`parallel_for`]'s four chunks per thread would let the threads finish up to a chunk apart
/// (a helper that starts late, a chunk count that does not split evenly). Measured,
/// channels-last 3x3 [8,128,16,16] -> 64 on 2 threads (43 units of 4 tiles): 1.53 ms in 8
/// chunks, 1.38-1.41 claimed unit by unit (one thread: 2.67).
pub fn parallel_units(n: usize, f: &(dyn Fn(usize, usize) + Sync)) {
    if n == 0 {
        return;
    }
    if rayon::current_thread_index().is_none() {
        pool::fork_join_guided(n, f);
        return;
    }
    (0..n).into_par_iter().for_each(|u| f(u, u + 1));
}

/// Runs `f(offset, chunk)` over disjoint chunks of `out` that cover it, as [`parallel_for`]
/// splits `out.len()` elements with `grain`: `chunk` is `out[offset..offset + chunk.len()]`.
pub fn par_chunks_mut<T: Send>(out: &mut [T], grain: usize, f: &(dyn Fn(usize, &mut [T]) + Sync)) {
    par_rows_mut(out, 1, grain, f);
}

/// [`par_chunks_mut`] in whole rows of `row` elements (the last one may be shorter when
/// `out.len()` is not a multiple): `f(first, rows)` gets rows `first..` of `out`, `grain` counts
/// rows.
pub fn par_rows_mut<T: Send>(
    out: &mut [T],
    row: usize,
    grain: usize,
    f: &(dyn Fn(usize, &mut [T]) + Sync),
) {
    let (len, row) = (out.len(), row.max(1));
    let base = SendPtr::new(out.as_mut_ptr());
    parallel_for(len.div_ceil(row), grain, &|s, e| {
        let (lo, hi) = (s * row, (e * row).min(len));
        // SAFETY: parallel_for hands out disjoint ranges of rows, so the chunks `lo..hi` are
        // disjoint parts of `out`, which this call borrows mutably until every task is done.
        f(s, unsafe { base.slice_mut(lo, hi - lo) })
    });
}

/// A raw pointer that the tasks of a parallel kernel share (raw pointers are neither `Send`
/// nor `Sync`): the one type kernels hand an operand's address to [`parallel_for`]'s closures
/// with. Holding or copying one is safe; reading or writing through it is `unsafe` and each
/// such use says why it holds. The contract every kernel keeps (and what makes the `Send` and
/// `Sync` impls sound):
///
/// * **live**: the memory it addresses (a tensor described to the kernel, a buffer the kernel
///   owns) outlives the parallel call that uses it, so no task ever holds a dangling address;
/// * **disjoint writes**: the tasks that write through it write disjoint elements (their chunk,
///   rows, planes or slots), and nothing reads an element another task may write meanwhile.
///
/// Offsets are in elements of `T`; [`SendPtr::at`] computes addresses without dereferencing
/// (wrapping arithmetic), so building the address of an element is safe, using it is not.
pub struct SendPtr<T>(*mut T);

impl<T> Clone for SendPtr<T> {
    #[inline(always)]
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for SendPtr<T> {}

// SAFETY: a `SendPtr` is an address; the type's contract (live memory, disjoint writes between
// tasks) is what every dereference relies on, and each dereference is an `unsafe` block that
// says how it keeps it.
unsafe impl<T> Send for SendPtr<T> {}
// SAFETY: as for `Send`: shared references only copy the address.
unsafe impl<T> Sync for SendPtr<T> {}

impl<T> SendPtr<T> {
    #[inline(always)]
    pub fn new(p: *mut T) -> Self {
        SendPtr(p)
    }

    /// The address `p` (a tensor's data pointer, any pointer type) as a pointer to `T`.
    #[inline(always)]
    pub fn of<U>(p: *const U) -> Self {
        SendPtr(p as *mut T)
    }

    #[inline(always)]
    pub fn get(self) -> *mut T {
        self.0
    }

    /// The address of element `off` (wrapping arithmetic: computing it is safe).
    #[inline(always)]
    pub fn at(self, off: isize) -> *mut T {
        self.0.wrapping_offset(off)
    }

    /// The same address as a pointer to `U`.
    #[inline(always)]
    pub fn cast<U>(self) -> SendPtr<U> {
        SendPtr(self.0 as *mut U)
    }

    /// Elements `off..off + len` as a slice.
    ///
    /// # Safety
    /// They must be in bounds of live memory of `T` (the type's contract) that nobody writes
    /// while the slice lives.
    #[inline(always)]
    pub unsafe fn slice<'a>(self, off: usize, len: usize) -> &'a [T] {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(self.0.add(off), len) }
    }

    /// Elements `off..off + len` as a mutable slice.
    ///
    /// # Safety
    /// As [`SendPtr::slice`], and this task is the only one that reads or writes them while the
    /// slice lives.
    #[inline(always)]
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slice_mut<'a>(self, off: usize, len: usize) -> &'a mut [T] {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.0.add(off), len) }
    }
}

/// Chunks of at least `grain` items, at most four per thread, and a multiple of the thread
/// count once there are enough: equal chunks then finish together (3 chunks on 2 threads take
/// as long as 4).
fn chunk_count(n: usize, grain: usize, threads: usize) -> usize {
    let threads = threads.max(1);
    let chunks = (n / grain).clamp(1, threads * 4);
    if chunks >= threads {
        chunks / threads * threads
    } else {
        chunks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn par_chunks_and_rows_cover_the_output_once() {
        for n in [0usize, 1, 7, 100_000, 1_000_003] {
            let mut v = vec![0usize; n];
            par_chunks_mut(&mut v, 1000, &|off, c| {
                for (i, x) in c.iter_mut().enumerate() {
                    *x += off + i;
                }
            });
            assert!(v.iter().enumerate().all(|(i, &x)| x == i));
            let mut v = vec![0usize; n];
            par_rows_mut(&mut v, 10, 100, &|first, rows| {
                for (i, x) in rows.iter_mut().enumerate() {
                    *x += first * 10 + i;
                }
            });
            assert!(v.iter().enumerate().all(|(i, &x)| x == i));
        }
    }

    #[test]
    fn segments_are_covered_once_in_parts_of_one_segment() {
        for lens in [
            vec![],
            vec![0],
            vec![5, 0, 0, 100_000, 3, 0],
            vec![40_000; 7],
            vec![1; 1000],
        ] {
            let seen: Vec<Vec<AtomicUsize>> = lens
                .iter()
                .map(|&n| (0..n).map(|_| AtomicUsize::new(0)).collect())
                .collect();
            parallel_segments(&lens, 1000, &|i, s, e| {
                assert!(s < e && e <= lens[i]);
                for x in &seen[i][s..e] {
                    x.fetch_add(1, Ordering::Relaxed);
                }
            });
            assert!(seen
                .iter()
                .flatten()
                .all(|x| x.load(Ordering::Relaxed) == 1));
        }
    }

    #[test]
    fn chunk_counts_are_multiples_of_the_thread_count() {
        assert_eq!(chunk_count(100_000, 32_768, 2), 2);
        assert_eq!(chunk_count(10, 32_768, 2), 1);
        assert_eq!(chunk_count(1_000_000, 32_768, 2), 8);
        assert_eq!(chunk_count(200_000, 32_768, 4), 4);
        assert_eq!(chunk_count(100_000, 32_768, 1), 3);
    }

    #[test]
    fn covers_range_exactly_once() {
        for n in [0usize, 1, 7, 100_000, 1_000_003] {
            let sum = AtomicUsize::new(0);
            parallel_for(n, 1000, &|s, e| {
                sum.fetch_add((s..e).sum::<usize>(), Ordering::Relaxed);
            });
            assert_eq!(sum.into_inner(), (0..n).sum::<usize>());
        }
    }

    #[test]
    fn fork_join_from_a_plain_thread_runs_every_chunk_and_propagates_panics() {
        let n = 1_000_003;
        let sum = AtomicUsize::new(0);
        crate::runtime::pool::fork_join(n, 64, &|s, e| {
            sum.fetch_add((s..e).sum::<usize>(), Ordering::Relaxed);
        });
        assert_eq!(sum.into_inner(), (0..n).sum::<usize>());
        let r = std::panic::catch_unwind(|| {
            crate::runtime::pool::fork_join(100, 10, &|s, _| assert!(s != 50, "boom"))
        });
        assert!(r.is_err());
        // The pool still works after a panicking chunk.
        let count = AtomicUsize::new(0);
        parallel_for(1 << 20, 1 << 12, &|s, e| {
            count.fetch_add(e - s, Ordering::Relaxed);
        });
        assert_eq!(count.into_inner(), 1 << 20);
    }
}
