//! The kernels' thread pool, fork-aware.
//!
//! Rayon's worker threads do not survive `fork()`: a child that used a pool inherited from its
//! parent would wait forever on threads that do not exist. So kernels run on a pool owned by
//! the current process id; a forked child (DataLoader workers with the fork start method) gets
//! a fresh pool the first time it runs a parallel kernel, and works like its parent. Small
//! kernels never touch the pool (see `kernels::layout::GRAIN`).

use rayon::{ThreadPool, ThreadPoolBuilder};
use std::sync::{Arc, Mutex};

struct Owned {
    pid: u32,
    pool: Arc<ThreadPool>,
}

static POOL: Mutex<Option<Owned>> = Mutex::new(None);

/// Worker threads: `FOO_RS_NUM_THREADS`, else `RAYON_NUM_THREADS`, else every core.
pub fn configured_threads() -> usize {
    ["FOO_RS_NUM_THREADS", "RAYON_NUM_THREADS"]
        .iter()
        .find_map(|k| {
            std::env::var(k)
                .ok()
                .and_then(|v| v.trim().parse::<usize>().ok())
        })
        .filter(|&n| n > 0)
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
}

fn pool() -> Arc<ThreadPool> {
    let pid = std::process::id();
    let mut guard = POOL.lock().unwrap_or_else(|e| e.into_inner());
    match guard.as_ref() {
        Some(o) if o.pid == pid => o.pool.clone(),
        stale => {
            if let Some(old) = stale {
                // Inherited across fork(): its threads are gone, so dropping it could block on
                // them. Forget it instead (a one-time, bounded leak in the child).
                std::mem::forget(old.pool.clone());
            }
            let pool = Arc::new(
                ThreadPoolBuilder::new()
                    .num_threads(configured_threads())
                    .thread_name(|i| format!("foo_rs-worker-{i}"))
                    .build()
                    .expect("rayon thread pool"),
            );
            if let Some(old) = guard.take() {
                std::mem::forget(old);
            }
            *guard = Some(Owned {
                pid,
                pool: pool.clone(),
            });
            pool
        }
    }
}

/// Runs `f` inside this process's pool when the work is large enough to go parallel;
/// runs it on the calling thread otherwise (no hand-off latency for small ops).
pub fn run<R: Send>(parallel: bool, f: impl FnOnce() -> R + Send) -> R {
    if parallel && rayon::current_thread_index().is_none() {
        pool().install(f)
    } else {
        f()
    }
}

/// Number of worker threads of this process's pool.
pub fn num_threads() -> usize {
    pool().current_num_threads()
}
