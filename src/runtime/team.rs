//! OpenMP teams on foo's helper threads, for the C++ kernels inductor generates for foo graphs.
//!
//! Inductor writes its C++ kernels for OpenMP: `#pragma omp parallel` regions with `omp for`
//! loops (static schedule), `omp single` blocks and per-thread partial results indexed by
//! `omp_get_thread_num()`. Run by libgomp, such a region on foo would start a second set of
//! spinning threads next to foo's helpers (two pools on the same cores), and one started from
//! autograd's foo device thread makes another libgomp team, after which libgomp counts more
//! threads than cores and makes every team, the CPU's included, sleep between regions (see
//! python/foo_rs/compile/graph_options.py). So foo kernels get the few OpenMP entry points GCC
//! lowers those constructs to (`GOMP_parallel`, `GOMP_barrier`, `GOMP_single_start`,
//! `omp_get_thread_num`, `omp_get_num_threads`) from a prelude compiled into each kernel
//! (python/foo_rs/compile/teams.py), and that prelude calls the functions here.
//!
//! A team is the calling thread plus every helper it asks for. The caller publishes the team
//! as a helper job and waits until all of them have joined before any member runs: OpenMP's
//! static schedule splits loops, and inductor's per-thread partial sums, by the team's size, so
//! the size must not depend on which helpers happened to be polling (a reduction would give
//! different bits from run to run, and the CPU's libgomp always runs its full team too). Every
//! member is a running thread, so a barrier always completes.
//! Regions nested inside a team run on one thread (OpenMP's default).

use super::pool::{self, Job};
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The outlined body of a parallel region: GCC passes the region's shared variables as `data`.
pub type Body = unsafe extern "C" fn(*mut c_void);

/// How often a caller still missing helpers publishes its team again: another thread's op may
/// have taken the helpers' one job slot before they saw this team.
const REPUBLISH: Duration = Duration::from_micros(50);

/// `Team::state`'s flag: the size is fixed, no one joins any more.
const CLOSED: usize = 1 << (usize::BITS - 1);

struct Team {
    body: Body,
    /// The region's `data` pointer (as an integer, so the team is `Send`).
    data: usize,
    /// Helpers wanted beyond the caller.
    wanted: usize,
    /// Helpers that joined, with [`CLOSED`] once the caller fixed the size.
    state: AtomicUsize,
    /// Helpers that finished their part.
    finished: AtomicUsize,
    /// Members at the current barrier, and how many barriers the team has passed.
    arrived: AtomicUsize,
    passed: AtomicUsize,
    /// `omp single` constructs some member has taken.
    singles: AtomicUsize,
}

/// The team the current thread works in, and its place in it.
#[derive(Clone, Copy)]
struct Member {
    /// Null for a team of one.
    team: *const Team,
    tid: usize,
    size: usize,
    /// `omp single` constructs this member has met.
    singles_seen: usize,
}

thread_local! {
    static MEMBER: Cell<Option<Member>> = const { Cell::new(None) };
}

/// Regions run, and those that got at least one helper (for tests and benchmarks).
static REGIONS: AtomicU64 = AtomicU64::new(0);
static SHARED_REGIONS: AtomicU64 = AtomicU64::new(0);

/// (regions run, regions run by more than one thread) since the process started.
pub fn region_counts() -> (u64, u64) {
    (
        REGIONS.load(Ordering::Relaxed),
        SHARED_REGIONS.load(Ordering::Relaxed),
    )
}

/// Waits, spinning first and then yielding the core, until `done()`.
pub fn wait_until(mut done: impl FnMut() -> bool) {
    let mut spins = 0u32;
    while !done() {
        if spins < 1 << 12 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            std::thread::yield_now();
        }
    }
}

impl Team {
    /// Runs the body as member `tid` of a team of `size`.
    fn run_as(&self, tid: usize, size: usize) {
        let me = Member {
            team: if size > 1 { self } else { std::ptr::null() },
            tid,
            size,
            singles_seen: 0,
        };
        run_member(me, self.body, self.data as *mut c_void);
    }

    fn barrier(&self, size: usize) {
        let passed = self.passed.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == size {
            // The others read `arrived` again only after they see `passed` move.
            self.arrived.store(0, Ordering::Relaxed);
            self.passed.fetch_add(1, Ordering::Release);
        } else {
            wait_until(|| self.passed.load(Ordering::Acquire) != passed);
        }
    }
}

impl Job for Team {
    fn work(&self, _member: usize) {
        let mut state = self.state.load(Ordering::Acquire);
        let tid = loop {
            if state & CLOSED != 0 || state >= self.wanted {
                return;
            }
            match self.state.compare_exchange_weak(
                state,
                state + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break state + 1,
                Err(now) => state = now,
            }
        };
        let mut size = 0;
        wait_until(|| {
            let state = self.state.load(Ordering::Acquire);
            size = (state & !CLOSED) + 1;
            state & CLOSED != 0
        });
        self.run_as(tid, size);
        self.finished.fetch_add(1, Ordering::Release);
    }
}

/// Runs `body(data)` as `me`, restoring the thread's previous membership afterwards.
fn run_member(me: Member, body: Body, data: *mut c_void) {
    let previous = MEMBER.replace(Some(me));
    // SAFETY: `body` and `data` are a parallel region's outlined function and its argument,
    // which the region's caller keeps alive until every member has returned (`run` waits).
    unsafe { body(data) };
    MEMBER.set(previous);
}

/// `#pragma omp parallel num_threads(threads)` (0: no clause, `pool::framework_threads`): runs
/// `body(data)` on a team of up to `threads` threads (foo's thread count at most) and returns
/// when every member has.
pub fn run(body: Body, data: *mut c_void, threads: usize) {
    REGIONS.fetch_add(1, Ordering::Relaxed);
    // Without a num_threads clause, OpenMP's default team: the framework's thread count, which
    // the kernel's per-thread arrays were sized by (see `pool::framework_threads`).
    let limit = match threads {
        0 => pool::framework_threads(),
        n => n,
    }
    .min(pool::configured_threads());
    let solo = Member {
        team: std::ptr::null(),
        tid: 0,
        size: 1,
        singles_seen: 0,
    };
    if limit <= 1 || MEMBER.get().is_some() {
        return run_member(solo, body, data);
    }
    let helpers = pool::helpers();
    let wanted = (limit - 1).min(helpers.helpers);
    if wanted == 0 {
        return run_member(solo, body, data);
    }
    let team = Arc::new(Team {
        body,
        data: data as usize,
        wanted,
        state: AtomicUsize::new(0),
        finished: AtomicUsize::new(0),
        arrived: AtomicUsize::new(0),
        passed: AtomicUsize::new(0),
        singles: AtomicUsize::new(0),
    });
    helpers.publish(team.clone());
    let mut published = Instant::now();
    wait_until(|| {
        if team.state.load(Ordering::Acquire) >= wanted || helpers.stopped() {
            // (A pool replaced by a new thread count has no helpers left to wait for.)
            return true;
        }
        if published.elapsed() >= REPUBLISH {
            helpers.publish(team.clone());
            published = Instant::now();
        }
        false
    });
    let joined = team.state.fetch_or(CLOSED, Ordering::AcqRel) & !CLOSED;
    if joined > 0 {
        SHARED_REGIONS.fetch_add(1, Ordering::Relaxed);
    }
    team.run_as(0, joined + 1);
    wait_until(|| team.finished.load(Ordering::Acquire) == joined);
}

/// Runs `f(tid, size)` on a team of up to `threads` threads, as [`run`] runs a region: for
/// Rust kernels whose members meet at [`barrier`]s between phases (a recurrence's time steps).
/// A panic in `f` aborts the process, as one inside a compiled kernel does: a member that
/// unwound would leave the others waiting at its next barrier forever.
pub fn run_fn(threads: usize, f: &(dyn Fn(usize, usize) + Sync)) {
    type Member<'a> = &'a (dyn Fn(usize, usize) + Sync);
    unsafe extern "C" fn trampoline(data: *mut c_void) {
        // SAFETY: `data` points at `f` below, alive until `run` returns, when every member has.
        let f = unsafe { *(data as *const Member) };
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            f(thread_num(), num_threads())
        }));
        if run.is_err() {
            eprintln!("foo_rs: a kernel team member panicked");
            std::process::abort();
        }
    }
    let member: Member = f;
    run(
        trampoline,
        &member as *const Member as *mut c_void,
        threads.max(1),
    );
}

/// `omp_get_thread_num()`: 0 outside a region.
pub fn thread_num() -> usize {
    MEMBER.get().map_or(0, |m| m.tid)
}

/// `omp_get_num_threads()`: 1 outside a region.
pub fn num_threads() -> usize {
    MEMBER.get().map_or(1, |m| m.size)
}

/// `#pragma omp barrier` (and the implied one at the end of `omp for` and `omp single`).
pub fn barrier() {
    if let Some(m) = MEMBER.get().filter(|m| !m.team.is_null()) {
        // SAFETY: a member's team outlives the body it runs (`run` waits for every member).
        unsafe { &*m.team }.barrier(m.size);
    }
}

/// `#pragma omp single`: true for the one member that runs the block (the first to get there).
pub fn single_start() -> bool {
    let Some(mut m) = MEMBER.get() else {
        return true;
    };
    if m.team.is_null() {
        return true;
    }
    let seen = m.singles_seen;
    m.singles_seen += 1;
    MEMBER.set(Some(m));
    // SAFETY: as in `barrier`.
    let team = unsafe { &*m.team };
    team.singles
        .compare_exchange(seen, seen + 1, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Mutex;

    /// What a region writes: each member's (tid, size), what its `omp single` blocks saw, and
    /// the phases a barrier separates.
    struct Region {
        threads: usize,
        seen: Mutex<Vec<(usize, usize)>>,
        phase_one: Vec<AtomicUsize>,
        phase_two_ok: AtomicBool,
        singles_taken: AtomicUsize,
    }

    unsafe extern "C" fn region_body(data: *mut c_void) {
        // SAFETY: the tests pass a `Region` that outlives the region.
        let r = unsafe { &*(data as *const Region) };
        let (tid, size) = (thread_num(), num_threads());
        r.seen.lock().unwrap().push((tid, size));
        // An `omp for` over the phase-one slots (static schedule), then its barrier.
        let n = r.phase_one.len();
        let per = n.div_ceil(size);
        for slot in &r.phase_one[(tid * per).min(n)..((tid + 1) * per).min(n)] {
            slot.fetch_add(1, Ordering::Relaxed);
        }
        barrier();
        // Phase two reads what every member wrote in phase one.
        if r.phase_one.iter().any(|s| s.load(Ordering::Relaxed) != 1) {
            r.phase_two_ok.store(false, Ordering::Relaxed);
        }
        for _ in 0..3 {
            if single_start() {
                r.singles_taken.fetch_add(1, Ordering::Relaxed);
            }
            barrier();
        }
        // A nested region runs on this thread alone.
        run(nested_body, data, r.threads);
    }

    unsafe extern "C" fn nested_body(_: *mut c_void) {
        assert_eq!((thread_num(), num_threads()), (0, 1));
        assert!(single_start());
        barrier();
    }

    fn run_region(threads: usize) -> Region {
        let r = Region {
            threads,
            seen: Mutex::new(Vec::new()),
            phase_one: (0..1000).map(|_| AtomicUsize::new(0)).collect(),
            phase_two_ok: AtomicBool::new(true),
            singles_taken: AtomicUsize::new(0),
        };
        run(region_body, &r as *const Region as *mut c_void, threads);
        r
    }

    #[test]
    fn teams_are_always_whole_and_run_every_member_once_with_working_barriers_and_singles() {
        let _serial = pool::tests::SERIAL
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for round in 0..2000 {
            let threads = [0, 1, 2, 3, 8][round % 5];
            let r = run_region(threads);
            let mut seen = r.seen.into_inner().unwrap();
            seen.sort();
            // Always the whole team: the requested size, within foo's threads and helpers.
            let requested = match threads {
                0 => pool::framework_threads(),
                n => n,
            };
            let size = requested
                .min(pool::configured_threads())
                .min(pool::helpers().helpers + 1)
                .max(1);
            assert_eq!(seen, (0..size).map(|t| (t, size)).collect::<Vec<_>>());
            assert!(r.phase_one.iter().all(|s| s.load(Ordering::Relaxed) == 1));
            assert!(
                r.phase_two_ok.into_inner(),
                "a barrier let a member through early"
            );
            assert_eq!(r.singles_taken.into_inner(), 3);
            assert_eq!((thread_num(), num_threads()), (0, 1));
        }
    }

    #[test]
    fn teams_started_from_many_threads_at_once_finish() {
        let _serial = pool::tests::SERIAL
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..300 {
                        let r = run_region(0);
                        assert!(r.phase_two_ok.into_inner());
                        assert_eq!(r.singles_taken.into_inner(), 3);
                    }
                });
            }
        });
    }
}
