//! The one parallel driver every kernel goes through: split `0..n` into chunks of at least
//! `grain` items and run them on the process's rayon pool (see `runtime::pool`). It is not
//! generic over the kernel (it takes `&dyn Fn`), so rayon's machinery is compiled once, not once
//! per op and dtype.

use crate::runtime::pool;
use rayon::prelude::*;

/// Calls `f(start, end)` over disjoint ranges covering `0..n`: on the calling thread when
/// `n < grain`, else in parallel chunks (about four per thread, for load balance). From a
/// plain thread it fans out with [`pool::fork_join`] (the caller works too); inside a pool
/// worker (under [`pool::install`]) it uses rayon's own splitting.
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
