//! OpenMP's entry points for inductor's C++ kernels of foo graphs (`runtime::team`): the
//! prelude those kernels are compiled with (python/foo_rs/compile/teams.py) defines
//! `GOMP_parallel`, `GOMP_barrier`, ... as calls of these.

use crate::runtime::team;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs `f` and aborts on a panic: these are called from the middle of generated kernels, where
/// neither an unwind nor skipping the region's work is an option.
fn or_abort<R>(what: &str, f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        eprintln!(
            "foo_rs: {what} failed inside a compiled kernel: {}",
            super::panic_message(&*payload)
        );
        std::process::abort()
    })
}

/// `#pragma omp parallel num_threads(threads)` (0: no clause): runs `body(data)` on a team of
/// foo's threads and returns when every member has.
///
/// # Safety
/// `body` must be callable with `data` from any thread until this returns.
#[no_mangle]
pub unsafe extern "C" fn foo_team_run(
    body: Option<unsafe extern "C" fn(*mut c_void)>,
    data: *mut c_void,
    threads: u32,
) {
    if let Some(body) = body {
        or_abort("a parallel region", || {
            team::run(body, data, threads as usize)
        });
    }
}

/// `omp_get_thread_num()` of the calling thread: 0 outside a region.
#[no_mangle]
pub extern "C" fn foo_team_thread_num() -> i32 {
    or_abort("omp_get_thread_num", team::thread_num) as i32
}

/// `omp_get_num_threads()`: 1 outside a region.
#[no_mangle]
pub extern "C" fn foo_team_num_threads() -> i32 {
    or_abort("omp_get_num_threads", team::num_threads) as i32
}

/// `omp_get_max_threads()`: the most threads a region without `num_threads` gets (PyTorch's
/// thread count; foo's may cap the team further).
#[no_mangle]
pub extern "C" fn foo_team_max_threads() -> i32 {
    or_abort(
        "omp_get_max_threads",
        crate::runtime::pool::framework_threads,
    ) as i32
}

/// A barrier of the calling thread's team.
#[no_mangle]
pub extern "C" fn foo_team_barrier() {
    or_abort("a barrier", team::barrier);
}

/// `#pragma omp single`: true for the one member that runs the block.
#[no_mangle]
pub extern "C" fn foo_team_single_start() -> bool {
    or_abort("omp single", team::single_start)
}
