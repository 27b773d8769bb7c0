//! The kernels' threads, fork-aware: a team of helper threads for [`fork_join`], which every
//! parallel kernel goes through (matrix products too: they split from the calling thread, see
//! `kernels::core::gemm::gemm_split`), and the OpenMP teams of `super::team`.
//!
//! Threads do not survive `fork()`: a child that used threads inherited from its parent would
//! wait forever on threads that do not exist. So the helpers belong to the current process id; a
//! forked child (DataLoader workers with the fork start method) gets fresh ones the first time
//! it runs a parallel kernel, and works like its parent. Small kernels never touch them (see
//! `kernels::core::layout::GRAIN`).

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

struct Owned {
    pid: u32,
    hot: Arc<Hot>,
}

static POOL: Mutex<Option<Owned>> = Mutex::new(None);

/// The most worker threads a process gets: a few per core at most (more only time-slices the
/// same cores), and at least [`MIN_THREAD_CAP`] so that tests can check results with more threads
/// than cores. A larger setting is clamped: 20000 threads once exhausted the machine.
pub fn max_threads() -> usize {
    4 * cores()
}

/// The floor of [`max_threads`].
pub const MIN_THREAD_CAP: usize = 16;

/// The machine's cores, asked once: `available_parallelism` reads cgroup files (a system call or
/// more), and `configured_threads` runs before every parallel op.
fn all_cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    })
}

fn cores() -> usize {
    all_cores().max(MIN_THREAD_CAP / 4)
}

/// The thread count a setting asks for, and a note when it is unusable or clamped.
/// `None` (unset or blank) means every core.
pub fn parse_threads(name: &str, value: Option<&str>) -> (Option<usize>, Option<String>) {
    let Some(text) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return (None, None);
    };
    let cap = max_threads();
    // All digits but too long for u128 is still a (huge) count.
    let count = match text.parse::<u128>() {
        Err(_) if text.bytes().all(|b| b.is_ascii_digit()) => Ok(u128::MAX),
        parsed => parsed,
    };
    match count {
        Ok(0) | Err(_) => (
            None,
            Some(format!(
                "{name}=\"{text}\" is not a thread count (a whole number from 1 to {cap}); \
                 ignoring it"
            )),
        ),
        Ok(n) if n > cap as u128 => (
            Some(cap),
            Some(format!(
                "{name}={text} is more threads than this machine can use; using {cap} \
                 (4 per core at most)"
            )),
        ),
        Ok(n) => (Some(n as usize), None),
    }
}

struct ThreadConfig {
    /// FOO_RS_NUM_THREADS / RAYON_NUM_THREADS, when one of them is a usable count.
    explicit: Option<usize>,
    /// Every core: the count when nothing is set and no [`follow_thread_count`] source is.
    all_cores: usize,
    note: Option<String>,
}

fn thread_config() -> &'static ThreadConfig {
    static CONFIG: std::sync::OnceLock<ThreadConfig> = std::sync::OnceLock::new();
    CONFIG.get_or_init(|| {
        let mut notes = Vec::new();
        let mut explicit = None;
        for key in ["FOO_RS_NUM_THREADS", "RAYON_NUM_THREADS"] {
            let (n, note) = parse_threads(key, std::env::var(key).ok().as_deref());
            notes.extend(note);
            if n.is_some() {
                explicit = n;
                break;
            }
        }
        ThreadConfig {
            explicit,
            all_cores: all_cores(),
            note: (!notes.is_empty()).then(|| notes.join("; ")),
        }
    })
}

/// The thread count of the framework foo runs under (PyTorch's intra-op count, which
/// `torch.set_num_threads` and `OMP_NUM_THREADS` set), as a C function pointer; 0 = none.
static THREAD_COUNT_SOURCE: AtomicUsize = AtomicUsize::new(0);

/// Makes the kernels' thread count follow `source()` (read before every parallel op, so it
/// must be cheap: PyTorch's `at::get_num_threads` is an atomic load) unless FOO_RS_NUM_THREADS
/// or RAYON_NUM_THREADS is set. `None` goes back to every core. Why follow it: `torchrun`
/// sets OMP_NUM_THREADS=1 for several ranks per machine, and users size a process with
/// `torch.set_num_threads`; kernels on every core in each rank oversubscribe the machine.
pub fn follow_thread_count(source: Option<extern "C" fn() -> i32>) {
    THREAD_COUNT_SOURCE.store(source.map_or(0, |f| f as usize), Ordering::Release);
}

/// Worker threads wanted now: FOO_RS_NUM_THREADS, else RAYON_NUM_THREADS (a setting that is not
/// a positive whole number is ignored and one above [`max_threads`] is clamped, see
/// [`thread_setting_note`]), else the [`follow_thread_count`] source (clamped to 1..=
/// [`max_threads`]), else every core.
pub fn configured_threads() -> usize {
    let config = thread_config();
    if let Some(n) = config.explicit {
        return n;
    }
    match THREAD_COUNT_SOURCE.load(Ordering::Acquire) {
        0 => config.all_cores,
        f => {
            // SAFETY: only `follow_thread_count` stores here, and only `extern "C" fn() -> i32`
            // pointers (as usize); 0 is excluded above.
            let source: extern "C" fn() -> i32 = unsafe { std::mem::transmute(f) };
            (source().max(1) as usize).min(max_threads())
        }
    }
}

/// The framework's own thread count (the [`follow_thread_count`] source, PyTorch's intra-op
/// count, even where FOO_RS_NUM_THREADS overrides it for foo's kernels), else
/// [`configured_threads`]: what `omp_get_max_threads()` answers in compiled kernels, which size
/// their per-thread arrays by it or by the same count at compile time.
pub fn framework_threads() -> usize {
    match THREAD_COUNT_SOURCE.load(Ordering::Acquire) {
        0 => configured_threads(),
        f => {
            // SAFETY: as in `configured_threads`.
            let source: extern "C" fn() -> i32 = unsafe { std::mem::transmute(f) };
            (source().max(1) as usize).min(max_threads())
        }
    }
}

/// Why the thread setting was ignored or clamped, if it was (`import foo_rs` warns with it).
pub fn thread_setting_note() -> Option<&'static str> {
    thread_config().note.as_deref()
}

/// Bumped in a forked child (`pthread_atfork`), so the per-thread cache below is re-checked
/// after a fork without a `getpid` system call (~170 ns here) on every parallel op.
static FORK_EPOCH: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_fork_child() {
    FORK_EPOCH.fetch_add(1, Ordering::Relaxed);
}

extern "C" {
    fn pthread_atfork(
        prepare: Option<extern "C" fn()>,
        parent: Option<extern "C" fn()>,
        child: Option<extern "C" fn()>,
    ) -> i32;
}

/// A thread's view of the pool: (fork epoch, helpers).
type Cached = Option<(u64, Arc<Hot>)>;

thread_local! {
    static CACHED: std::cell::RefCell<Cached> = const { std::cell::RefCell::new(None) };
}

/// This process's helpers, for a team of `super::team`.
pub(crate) fn helpers() -> Arc<Hot> {
    let epoch = FORK_EPOCH.load(Ordering::Relaxed);
    let threads = configured_threads();
    let hit = CACHED.with(|c| match &*c.borrow() {
        Some((e, hot)) if *e == epoch && hot.helpers + 1 == threads => Some(hot.clone()),
        _ => None,
    });
    if let Some(found) = hit {
        return found;
    }
    let found = helpers_checked(threads);
    CACHED.with(|c| *c.borrow_mut() = Some((epoch, found.clone())));
    found
}

fn helpers_checked(threads: usize) -> Arc<Hot> {
    static ATFORK: std::sync::Once = std::sync::Once::new();
    // SAFETY: registers a handler that only bumps an atomic (async-signal-safe).
    ATFORK.call_once(|| unsafe {
        pthread_atfork(None, None, Some(on_fork_child));
    });
    let pid = std::process::id();
    let mut guard = POOL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(o) = guard.as_ref() {
        if o.pid == pid && o.hot.helpers + 1 == threads {
            return o.hot.clone();
        }
    }
    match guard.take() {
        // The thread count changed (torch.set_num_threads): this process's helpers stop when
        // they next go idle.
        Some(old) if old.pid == pid => old.hot.stop(),
        // Inherited across fork(): its threads are gone, so dropping it could block on them.
        // Forget it instead (a one-time, bounded leak in the child).
        Some(old) => std::mem::forget(old),
        None => {}
    }
    let hot = Hot::start(threads.saturating_sub(1));
    *guard = Some(Owned {
        pid,
        hot: hot.clone(),
    });
    hot
}

/// The threads a parallel kernel runs on: the caller and this process's helpers.
pub fn num_threads() -> usize {
    helpers().helpers + 1
}

/// A `&dyn Fn` with its lifetime erased, so pool jobs (which must be `'static`) can hold it.
/// Sound use: it is called only for a chunk claimed below `chunks`, and [`fork_join`] returns
/// only after every claimed chunk has finished, so no call outlives the borrow.
struct Body(*const (dyn Fn(usize, usize) + Sync));
// SAFETY: the pointee is `Sync`, and it is only called while the borrow is alive (see above).
unsafe impl Send for Body {}
// SAFETY: as above.
unsafe impl Sync for Body {}

/// Work the helpers run: [`fork_join`]'s chunks, or a team of `super::team`.
pub(crate) trait Job: Send + Sync {
    /// Called by every helper that sees the job published (`member` is 1 + the helper's index;
    /// the publishing thread is member 0); returns when it has nothing (left) to do in it.
    fn work(&self, member: usize);
}

/// One member's home range of a [`Chunks`] job, `lo..hi` in units (chunks, or guided units),
/// packed as `lo << 32 | hi`: its owner claims from the front, the others steal from the back.
/// A cache line of its own (two on CPUs that fetch lines in pairs), so that claims in different
/// homes do not contend.
#[repr(align(128))]
struct Home(AtomicU64);

impl Home {
    fn new(lo: usize, hi: usize) -> Self {
        Home(AtomicU64::new(((lo as u64) << 32) | hi as u64))
    }

    /// Takes `size(left)` units from the front (`back` false) or the back of what is left.
    fn take(&self, back: bool, size: impl Fn(usize) -> usize) -> Option<(usize, usize)> {
        let mut cur = self.0.load(Ordering::Relaxed);
        loop {
            let (lo, hi) = ((cur >> 32) as usize, (cur & u32::MAX as u64) as usize);
            if lo >= hi {
                return None;
            }
            let k = size(hi - lo).clamp(1, hi - lo);
            let (range, next) = match back {
                false => ((lo, lo + k), Home::new(lo + k, hi)),
                true => ((hi - k, hi), Home::new(lo, hi - k)),
            };
            let next = next.0.into_inner();
            match self
                .0
                .compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Some(range),
                Err(now) => cur = now,
            }
        }
    }
}

struct Chunks {
    body: Body,
    n: usize,
    /// Balanced chunks ([`chunk_start`]), or 0 for guided claims.
    chunks: usize,
    /// Member `m`'s share of the units, `chunk_start(units, members, m)..`: the same part of
    /// every op goes to the same thread while no one is late, so what one op writes, the next
    /// reads from the same core's caches. Before, threads took chunks from one counter in
    /// whatever order they came, and data moved between cores from op to op. That costs most on
    /// this project's VM when the host places its two vCPUs far apart (a cache line's round
    /// trip between them 50-60 ns, but 310-370 ns for minutes at a time): resnet18's inference
    /// (batch 8, 2 threads, 30 such rounds of 80, alternating in one process) took 20.2 ms with
    /// the shared counter and 18.2 with homes (the CPU's 20.3; in the near rounds 14.4, 14.1
    /// and 18.5). Where the vCPUs were near, transformer models read level.
    homes: Box<[Home]>,
    /// Units (chunks, or guided units) finished: [`Chunks::total`] when all are.
    done: AtomicUsize,
    panicked: AtomicBool,
}

impl Chunks {
    fn new(body: Body, n: usize, chunks: usize, members: usize) -> Self {
        let (units, groups) = match chunks {
            0 => (n, members),
            c => (c, members.min(c)),
        };
        Chunks {
            body,
            n,
            chunks,
            homes: (0..members)
                .map(|m| match m < groups {
                    true => Home::new(
                        chunk_start(units, groups, m),
                        chunk_start(units, groups, m + 1),
                    ),
                    false => Home::new(0, 0),
                })
                .collect(),
            done: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
        }
    }

    /// What `done` counts up to.
    fn total(&self) -> usize {
        if self.chunks == 0 {
            self.n
        } else {
            self.chunks
        }
    }

    /// Member `member`'s next range with what it adds to `done`, or None when all are claimed:
    /// from the front of its home while any is left, then from the back of the others' homes.
    /// Balanced chunks go one at a time. Guided claims (OpenMP's `schedule(guided)`) take half
    /// of what is left of the home from the front, and a share per member of it from the back,
    /// at least one unit: claims are few, and the last ones in a home single units.
    fn claim(&self, member: usize) -> Option<(usize, usize, usize)> {
        let members = self.homes.len();
        let guided = self.chunks == 0;
        let front = |left: usize| if guided { left / 2 } else { 1 };
        let back = |left: usize| if guided { left / (2 * members) } else { 1 };
        let (lo, hi) = self
            .homes
            .get(member)
            .and_then(|h| h.take(false, front))
            .or_else(|| {
                (1..members).find_map(|k| self.homes[(member + k) % members].take(true, back))
            })?;
        Some(match guided {
            true => (lo, hi, hi - lo),
            false => (self.chunk_bound(lo), self.chunk_bound(hi), hi - lo),
        })
    }

    /// Where balanced chunk `c` starts (`n` for `c == chunks`): each home's chunks split its
    /// share of `0..n` ([`chunk_start`] over the homes) evenly. Chunks balanced over all of
    /// `0..n` instead put the larger ones first, so the first home got more: 44 units in 8 chunks
    /// went 24 to the caller and 20 to the helper, and a bfloat16 1024 mm (44 blocks) took 7-9%
    /// longer than with chunks taken in turns, until the helper's late steal evened it out.
    fn chunk_bound(&self, c: usize) -> usize {
        let (n, chunks) = (self.n, self.chunks);
        let groups = self.homes.len().min(chunks);
        if c >= chunks {
            return n;
        }
        // The home of chunk c: the inverse of chunk_start(chunks, groups, g).
        let (q, r) = (chunks / groups, chunks % groups);
        let g = match c < r * (q + 1) {
            true => c / (q + 1),
            false => r + (c - r * (q + 1)) / q,
        };
        let (c0, c1) = (
            chunk_start(chunks, groups, g),
            chunk_start(chunks, groups, g + 1),
        );
        let (u0, u1) = (chunk_start(n, groups, g), chunk_start(n, groups, g + 1));
        u0 + chunk_start(u1 - u0, c1 - c0, c - c0)
    }
}

impl Job for Chunks {
    /// Claims and runs ranges until none is left.
    fn work(&self, member: usize) {
        while let Some((start, end, count)) = self.claim(member) {
            // SAFETY: the range was claimed, so `fork_join` is still waiting and the borrow
            // behind `body` is alive until `done` counts it.
            let f = unsafe { &*self.body.0 };
            if std::panic::catch_unwind(AssertUnwindSafe(|| f(start, end))).is_err() {
                self.panicked.store(true, Ordering::Relaxed);
            }
            self.done.fetch_add(count, Ordering::Release);
        }
    }
}

/// Where chunk `c` of `chunks` balanced ranges over `0..n` starts: sizes differ by at most one.
///
/// Why balanced, not `n.div_ceil(chunks)` each and a short last one: callers with heavy work
/// units get few of them (a medium convolution: 43 units of 4 tiles in 8 chunks), and chunks of
/// 6 with a last of 1 gave one thread 24 units and the other 19 (11% of the op lost waiting).
fn chunk_start(n: usize, chunks: usize, c: usize) -> usize {
    let (q, r) = (n / chunks, n % chunks);
    c * q + c.min(r)
}

/// Calls `f(start, end)` over `chunks` ranges covering `0..n`, in parallel: each thread has a
/// share of the chunks (the caller the first, helper `i` the `i + 1`-th; shares differ by at
/// most a chunk, and their chunks cover `0..n` in balanced parts, [`chunk_start`] over the
/// threads, each split evenly), runs its own in order, then helps with what is left of the
/// others' from their ends.
///
/// Why not `pool.install(|| par_iter)`: that parks the caller on a latch and needs a worker to
/// wake up before any work starts (10–15 µs per op, measured), which dominated 1e5–1e6-element
/// ops. Here the caller starts at once and a late helper finds nothing left to do; the caller
/// waits only for chunks that were actually claimed.
pub fn fork_join(n: usize, chunks: usize, f: &(dyn Fn(usize, usize) + Sync)) {
    if chunks <= 1 {
        f(0, n);
        return;
    }
    run_chunks(n, chunks.min(n), f);
}

/// Calls `f(start, end)` over ranges covering `0..n` that the threads claim as they go, each
/// from its own share first (as [`fork_join`]), shrinking from half of a share to single units
/// (guided): for few heavy units the threads end at most one unit apart, at a handful of claims
/// per thread. No call for `n` 0.
pub fn fork_join_guided(n: usize, f: &(dyn Fn(usize, usize) + Sync)) {
    if n <= 1 {
        if n == 1 {
            f(0, 1);
        }
        return;
    }
    run_chunks(n, 0, f);
}

/// [`fork_join`] (`chunks` balanced chunks) or [`fork_join_guided`] (`chunks` 0).
fn run_chunks(n: usize, chunks: usize, f: &(dyn Fn(usize, usize) + Sync)) {
    let hot = helpers();
    if hot.helpers == 0 {
        f(0, n);
        return;
    }
    // SAFETY: only the lifetime is erased; see `Body`.
    let body = Body(unsafe {
        std::mem::transmute::<&(dyn Fn(usize, usize) + Sync), *const (dyn Fn(usize, usize) + Sync)>(
            f,
        )
    });
    // Homes count units in 32 bits: more guided units than that go in balanced chunks instead.
    let members = hot.helpers + 1;
    let chunks = match chunks {
        0 if n > u32::MAX as usize => 4 * members,
        c => c.min(u32::MAX as usize),
    };
    let job = Arc::new(Chunks::new(body, n, chunks, members));
    hot.publish(job.clone());
    job.work(0);
    let mut spins = 0u32;
    while job.done.load(Ordering::Acquire) < job.total() {
        if spins < 1 << 12 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            std::thread::yield_now();
        }
    }
    if job.panicked.load(Ordering::Relaxed) {
        panic!("a parallel kernel chunk panicked");
    }
}

/// The helper threads of [`fork_join`], OpenMP-style: after an op each helper polls for the
/// next one for [`SPIN`], then sleeps on a condition variable until the next op.
///
/// Why poll that long: on this project's 2-vCPU KVM machine a helper woken from sleep starts
/// 10-100 µs after the op is published (measured: 2/3 of wake-ups took 10-30 µs, most others
/// 30-100), by which time the caller has done a 20-60 µs GEMM alone. A training step has gaps
/// of 100+ µs between parallel ops (loss, optimizer, `zero_grad`), so with a 50 µs poll a third
/// of the MLP step's parallel ops found the helper asleep; with 300 µs almost none did, and the
/// step went from 1.0-1.2x to 0.7-0.8x the CPU's time (benches/compare_cpu.py, 4 runs each).
/// libgomp and Intel's OpenMP spin for comparable or longer times (milliseconds by default).
/// After [`SPIN_HARD`] the poll yields between checks, so a helper sharing a core with a
/// runnable thread gives the core away instead of taking half of it.
///
/// Why not rayon jobs: a spawned helper job wakes rayon's other idle workers too, and on a
/// 2-core machine their idle spinning competed with the caller and the helper; once a helper
/// was descheduled, ops ran on one thread for hundreds of milliseconds (measured: 1e6-element
/// adds alternated between 75 and 115 µs per run).
pub(crate) struct Hot {
    pub(crate) helpers: usize,
    generation: AtomicU64,
    job: Mutex<Option<Arc<dyn Job>>>,
    /// Helpers asleep (or about to sleep) on `wake`.
    parked: AtomicUsize,
    sleep: Mutex<()>,
    wake: Condvar,
    /// Set when the pool is replaced: helpers exit when they next go idle.
    stopped: AtomicBool,
}

/// How long a helper polls for the next op before it sleeps (see [`Hot`]).
const SPIN: std::time::Duration = std::time::Duration::from_micros(300);

/// How long of [`SPIN`] it polls without yielding: the gap between two ops issued back to back
/// from Python is a few µs, and a helper that yields may not get the core back that soon.
const SPIN_HARD: std::time::Duration = std::time::Duration::from_micros(50);

impl Hot {
    fn start(helpers: usize) -> Arc<Hot> {
        let hot = Arc::new(Hot {
            helpers,
            generation: AtomicU64::new(0),
            job: Mutex::new(None),
            parked: AtomicUsize::new(0),
            sleep: Mutex::new(()),
            wake: Condvar::new(),
            stopped: AtomicBool::new(false),
        });
        for i in 0..helpers {
            let h = hot.clone();
            std::thread::Builder::new()
                .name(format!("foo_rs-helper-{i}"))
                .spawn(move || h.run(i + 1))
                .expect("spawn a foo_rs helper thread");
        }
        hot
    }

    /// Makes every helper exit once idle (a job published after this still completes: its
    /// caller runs every chunk no helper claimed).
    fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.generation.fetch_add(1, Ordering::SeqCst);
        let _guard = self.sleep.lock().unwrap_or_else(|e| e.into_inner());
        self.wake.notify_all();
    }

    pub(crate) fn publish(&self, job: Arc<dyn Job>) {
        *self.job.lock().unwrap_or_else(|e| e.into_inner()) = Some(job);
        self.generation.fetch_add(1, Ordering::SeqCst);
        // Pairs with the SeqCst increment of `parked` in `run`: either the helper sees the new
        // generation before it sleeps, or this sees it parked and wakes it.
        if self.parked.load(Ordering::SeqCst) > 0 {
            let _guard = self.sleep.lock().unwrap_or_else(|e| e.into_inner());
            self.wake.notify_all();
        }
    }

    /// Whether the pool was replaced (its helpers take no more jobs).
    pub(crate) fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    fn run(&self, member: usize) {
        let mut seen = self.generation.load(Ordering::SeqCst);
        loop {
            let mut idle_since = std::time::Instant::now();
            loop {
                if self.stopped.load(Ordering::Acquire) {
                    return;
                }
                let g = self.generation.load(Ordering::Acquire);
                if g != seen {
                    seen = g;
                    let job = self.job.lock().unwrap_or_else(|e| e.into_inner()).clone();
                    if let Some(job) = job {
                        job.work(member);
                    }
                    idle_since = std::time::Instant::now();
                    continue;
                }
                let idle = idle_since.elapsed();
                if idle > SPIN {
                    break;
                }
                if idle > SPIN_HARD {
                    std::thread::yield_now();
                } else {
                    // Looks at the generation between pauses: a `pause` takes 25 ns on the Zen 4
                    // (~40 on recent Xeons), so 64 of them between looks started a helper 0.8 us
                    // late on average. Alternating in one process, 2 threads: `add` of 1e5 and
                    // 1e6 floats 10.5 -> 10.0 and 76 -> 69 us (the CPU's 9.8 and 69).
                    for _ in 0..64 {
                        if self.generation.load(Ordering::Relaxed) != seen {
                            break;
                        }
                        std::hint::spin_loop();
                    }
                }
            }
            let mut guard = self.sleep.lock().unwrap_or_else(|e| e.into_inner());
            self.parked.fetch_add(1, Ordering::SeqCst);
            while self.generation.load(Ordering::SeqCst) == seen
                && !self.stopped.load(Ordering::SeqCst)
            {
                guard = self.wake.wait(guard).unwrap_or_else(|e| e.into_inner());
            }
            self.parked.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn thread_settings_are_parsed_clamped_or_ignored() {
        let cap = max_threads();
        assert!(cap >= MIN_THREAD_CAP);
        assert_eq!(parse_threads("X", None), (None, None));
        assert_eq!(parse_threads("X", Some("  ")), (None, None));
        assert_eq!(parse_threads("X", Some(" 3 ")), (Some(3), None));
        for bad in ["0", "-2", "abc", "2.5", "1e3"] {
            let (n, note) = parse_threads("X", Some(bad));
            assert_eq!(n, None, "{bad}");
            assert!(note.unwrap().contains("is not a thread count"), "{bad}");
        }
        for huge in [
            "20000",
            "99999999999",
            "3402823669209384634633746074317682114560",
        ] {
            let (n, note) = parse_threads("X", Some(huge));
            assert_eq!(n, Some(cap), "{huge}");
            assert!(note.unwrap().contains(&format!("using {cap}")), "{huge}");
        }
    }

    /// The tests that count helpers or change the thread count run one at a time.
    pub(crate) static SERIAL: Mutex<()> = Mutex::new(());

    #[test]
    fn helpers_cover_every_chunk_once_and_sleep_when_idle() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        for round in 0..300 {
            let n = 1 << 16;
            let covered = AtomicUsize::new(0);
            fork_join(n, 1 + round % 9, &|s, e| {
                covered.fetch_add((s..e).map(|i| i % 7).sum::<usize>(), Ordering::Relaxed);
            });
            assert_eq!(covered.into_inner(), (0..n).map(|i| i % 7).sum::<usize>());
        }
        // Once ops stop, every helper goes to sleep.
        let hot = helpers();
        let t = std::time::Instant::now();
        while hot.parked.load(Ordering::SeqCst) != hot.helpers {
            assert!(
                t.elapsed() < std::time::Duration::from_secs(5),
                "helpers keep spinning"
            );
            std::thread::sleep(SPIN);
        }
        // And wake up for the next op.
        let covered = AtomicUsize::new(0);
        fork_join(1000, 4, &|s, e| {
            covered.fetch_add(e - s, Ordering::Relaxed);
        });
        assert_eq!(covered.into_inner(), 1000);
    }

    #[test]
    fn balanced_chunks_differ_by_at_most_one_unit() {
        for (n, chunks) in [(43usize, 8usize), (7, 7), (100, 3), (5, 1), (1000, 64)] {
            let sizes: Vec<usize> = (0..chunks)
                .map(|c| chunk_start(n, chunks, c + 1) - chunk_start(n, chunks, c))
                .collect();
            assert_eq!(chunk_start(n, chunks, 0), 0);
            assert_eq!(chunk_start(n, chunks, chunks), n);
            let (lo, hi) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            assert!(hi - lo <= 1, "{n} in {chunks}: {sizes:?}");
        }
    }

    #[test]
    fn guided_claims_cover_every_unit_once() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        for n in [0usize, 1, 2, 7, 43, 1000] {
            let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
            fork_join_guided(n, &|s, e| {
                assert!(
                    s < e && e <= n,
                    "empty or out-of-range claim {s}..{e} of {n}"
                );
                for h in &hits[s..e] {
                    h.fetch_add(1, Ordering::Relaxed);
                }
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1), "{n}");
        }
    }

    /// Claims of `members` threads taking turns as `order` says (cycled) until none is left:
    /// (member, start, end, count) in claim order.
    fn drain(job: &Chunks, order: &[usize]) -> Vec<(usize, usize, usize, usize)> {
        let mut out = Vec::new();
        let mut idle = 0;
        for &m in order.iter().cycle() {
            match job.claim(m) {
                Some((s, e, c)) => {
                    out.push((m, s, e, c));
                    idle = 0;
                }
                None if idle > order.len() => return out,
                None => idle += 1,
            }
        }
        unreachable!()
    }

    #[test]
    fn each_thread_claims_its_own_share_first_then_the_others_ends() {
        let noop = |_: usize, _: usize| {};
        let body = || Body(&noop as &(dyn Fn(usize, usize) + Sync) as *const _);
        // Balanced: 8 chunks of 10 over 2 threads; the helper (member 1) owns chunks 4..8.
        let job = Chunks::new(body(), 80, 8, 2);
        let claims = drain(&job, &[1, 0, 0, 0, 0, 0]);
        let firsts: Vec<_> = claims.iter().map(|&(m, s, _, _)| (m, s)).collect();
        // Member 0 runs its four chunks in order, then takes the helper's last ones from the end
        // while the helper goes on from the front.
        assert_eq!(
            firsts,
            [
                (1, 40),
                (0, 0),
                (0, 10),
                (0, 20),
                (0, 30),
                (0, 70),
                (1, 50),
                (0, 60)
            ]
        );
        assert!(claims.iter().all(|&(_, s, e, c)| e - s == 10 && c == 1));

        // Balanced chunks split each share evenly, so shares differ by at most one unit: 44
        // units in 8 chunks on 2 threads are 6, 6, 5, 5 | 6, 6, 5, 5 (not 6, 6, 6, 6 | 5, 5, 5, 5).
        let job = Chunks::new(body(), 44, 8, 2);
        let bounds: Vec<_> = (0..=8).map(|c| job.chunk_bound(c)).collect();
        assert_eq!(bounds, [0, 6, 12, 17, 22, 28, 34, 39, 44]);
        for (n, chunks, members) in [
            (44usize, 8usize, 2usize),
            (7, 3, 2),
            (100, 7, 3),
            (5, 3, 4),
            (9, 9, 2),
            (1000, 64, 16),
        ] {
            let job = Chunks::new(body(), n, chunks, members);
            let bounds: Vec<_> = (0..=chunks).map(|c| job.chunk_bound(c)).collect();
            assert!(bounds[0] == 0 && bounds[chunks] == n, "{bounds:?}");
            assert!(
                bounds.windows(2).all(|w| w[0] < w[1]),
                "{n} {chunks} {members}: {bounds:?}"
            );
            let shares: Vec<_> = (0..members)
                .map(|m| {
                    let (lo, hi) = (
                        chunk_start(chunks, members.min(chunks), m),
                        chunk_start(chunks, members.min(chunks), m + 1),
                    );
                    if m < members.min(chunks) {
                        bounds[hi] - bounds[lo]
                    } else {
                        0
                    }
                })
                .filter(|&u| u > 0)
                .collect();
            let (lo, hi) = (shares.iter().min().unwrap(), shares.iter().max().unwrap());
            assert!(hi - lo <= 1, "{n} {chunks} {members}: {shares:?}");
        }

        // Guided: every unit once; each share's first claim is half of it from its front, and
        // the claim that empties a share is a single unit (threads end at most a unit apart).
        for (n, members) in [
            (1usize, 2usize),
            (2, 2),
            (7, 2),
            (43, 2),
            (1000, 2),
            (43, 3),
            (5, 8),
        ] {
            for order in [vec![0], (0..members).collect(), vec![0, 0, 0, 1]] {
                let job = Chunks::new(body(), n, 0, members);
                let claims = drain(&job, &order);
                let mut hits = vec![0; n];
                for &(_, s, e, c) in &claims {
                    assert!(s < e && e <= n && c == e - s, "{n} {members}: {s}..{e}");
                    hits[s..e].iter_mut().for_each(|h| *h += 1);
                }
                assert!(hits.iter().all(|&h| h == 1), "{n} {members} {order:?}");
                for m in 0..members {
                    let (lo, hi) = (chunk_start(n, members, m), chunk_start(n, members, m + 1));
                    let share: Vec<_> = claims.iter().filter(|c| lo <= c.1 && c.2 <= hi).collect();
                    if let Some(first) = share.iter().find(|c| c.0 == m) {
                        assert_eq!(first.1, lo, "{n} {members} {order:?}");
                    }
                    if let Some(last) = share.last() {
                        assert_eq!(last.3, 1, "{n} {members} {order:?}: {share:?}");
                    }
                }
                let first = claims[0];
                assert_eq!(
                    (first.1, first.3),
                    (0, (chunk_start(n, members, 1) / 2).max(1))
                );
            }
        }
    }

    static WANTED: AtomicUsize = AtomicUsize::new(1);

    extern "C" fn wanted() -> i32 {
        WANTED.load(Ordering::SeqCst) as i32
    }

    #[test]
    fn thread_count_follows_the_registered_source() {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        if thread_config().explicit.is_some() {
            return; // FOO_RS_NUM_THREADS / RAYON_NUM_THREADS win over the source by design
        }
        let sum_of = |n: usize| {
            let covered = AtomicUsize::new(0);
            fork_join(n, 8, &|s, e| {
                covered.fetch_add((s..e).sum::<usize>(), Ordering::Relaxed);
            });
            covered.into_inner()
        };
        for (want, got) in [(1, 1), (3, 3), (0, 1), (1 << 30, max_threads()), (2, 2)] {
            WANTED.store(want, Ordering::SeqCst);
            follow_thread_count(Some(wanted));
            assert_eq!(num_threads(), got, "source says {want}");
            assert_eq!(helpers().helpers, got - 1);
            assert_eq!(sum_of(10_000), (0..10_000).sum::<usize>());
        }
        // A replaced pool's helpers exit: only the current helpers remain.
        let old = helpers();
        WANTED.store(1, Ordering::SeqCst);
        assert_eq!(num_threads(), 1);
        assert!(old.stopped.load(Ordering::SeqCst));
        let t = std::time::Instant::now();
        while Arc::strong_count(&old) > 1 {
            assert!(
                t.elapsed() < std::time::Duration::from_secs(5),
                "helpers of a replaced pool live on"
            );
            std::thread::sleep(SPIN);
        }
        follow_thread_count(None);
        assert_eq!(num_threads(), thread_config().all_cores);
    }
}
