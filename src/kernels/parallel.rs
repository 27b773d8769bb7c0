//! The one parallel driver every kernel goes through: split `0..n` into chunks of at least
//! `grain` items and run them on the process's rayon pool (see `runtime::pool`). It is not
//! generic over the kernel (it takes `&dyn Fn`), so rayon's machinery is compiled once, not once
//! per op and dtype.

use rayon::prelude::*;

/// Calls `f(start, end)` over disjoint ranges covering `0..n`: on the calling thread when
/// `n < grain`, else in parallel chunks (about four per worker, for load balance).
pub fn parallel_for(n: usize, grain: usize, f: &(dyn Fn(usize, usize) + Sync)) {
    if n == 0 {
        return;
    }
    let threads = rayon::current_num_threads().max(1);
    if n < grain.max(1) || threads == 1 {
        f(0, n);
        return;
    }
    let chunks = (n / grain.max(1)).clamp(1, threads * 4);
    let step = n.div_ceil(chunks);
    (0..chunks).into_par_iter().for_each(|c| {
        let start = c * step;
        let end = ((c + 1) * step).min(n);
        if start < end {
            f(start, end);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

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
}
