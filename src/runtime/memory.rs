//! Device memory: a caching allocator per device, owned by Rust.
//!
//! Blocks are 64-byte aligned host allocations. A freed block goes back to its device's cache
//! (keyed by size class) instead of to the system, so a training loop that allocates the same
//! shapes every step stops paying for fresh pages; `empty_cache()` returns cached blocks. The
//! cache is bounded (see `trim_cache`), so programs whose shapes keep changing do not grow.
//! Statistics follow `torch.cuda.memory_stats` (allocated/reserved/active/requested bytes,
//! current/peak/allocated/freed, per pool). An optional per-device limit on reserved bytes
//! (`FOO_RS_MEMORY_LIMIT`) turns an oversized request into an out-of-memory error after one
//! cache flush and retry, like the CUDA caching allocator.

use super::device::{check_device, device_count};
use crate::error::{FooError, FooResult};
use std::alloc::{alloc, dealloc, Layout};
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// Alignment of every block (a cache line; enough for any SIMD load).
pub const ALIGN: usize = 64;
/// Requests below this size are served from the "small" pool (as in PyTorch: < 1 MiB).
pub const SMALL_LIMIT: usize = 1 << 20;

/// One statistic, as c10's `Stat`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub current: i64,
    pub peak: i64,
    pub allocated: i64,
    pub freed: i64,
}

impl Stat {
    fn increase(&mut self, n: usize) {
        self.current += n as i64;
        self.peak = self.peak.max(self.current);
        self.allocated += n as i64;
    }
    fn decrease(&mut self, n: usize) {
        self.current -= n as i64;
        self.freed += n as i64;
    }
}

/// A statistic per pool, in c10's `StatType` order (aggregate, small pool, large pool).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StatArray {
    pub all: Stat,
    pub small: Stat,
    pub large: Stat,
}

impl StatArray {
    fn increase(&mut self, small: bool, n: usize) {
        self.all.increase(n);
        if small {
            self.small.increase(n)
        } else {
            self.large.increase(n)
        }
    }
    fn decrease(&mut self, small: bool, n: usize) {
        self.all.decrease(n);
        if small {
            self.small.decrease(n)
        } else {
            self.large.decrease(n)
        }
    }
    fn stats_mut(&mut self) -> [&mut Stat; 3] {
        [&mut self.all, &mut self.small, &mut self.large]
    }
}

/// Per-device statistics, as c10's `DeviceStats` (C: `FooMemoryStats`, filled by
/// `foo_memory_stats`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct MemoryStats {
    /// Live client allocations (count).
    pub allocation: StatArray,
    /// Blocks obtained from the system, live or cached (count).
    pub segment: StatArray,
    /// Blocks in use (count; equals `allocation` in this synchronous model).
    pub active: StatArray,
    /// Bytes of live blocks (size-class rounded).
    pub allocated_bytes: StatArray,
    /// Bytes obtained from the system, live or cached.
    pub reserved_bytes: StatArray,
    /// Bytes of blocks in use.
    pub active_bytes: StatArray,
    /// Bytes the callers asked for (unrounded).
    pub requested_bytes: StatArray,
    pub num_alloc_retries: i64,
    pub num_ooms: i64,
    pub num_device_alloc: i64,
    pub num_device_free: i64,
}

impl MemoryStats {
    fn arrays_mut(&mut self) -> [&mut StatArray; 7] {
        [
            &mut self.allocation,
            &mut self.segment,
            &mut self.active,
            &mut self.allocated_bytes,
            &mut self.reserved_bytes,
            &mut self.active_bytes,
            &mut self.requested_bytes,
        ]
    }
}

/// The size class a request is served from: multiples of 512 B below 1 MiB, above that eight
/// classes per power of two (at most 12.5% slack), always a multiple of the alignment.
pub fn round_size(nbytes: usize) -> usize {
    if nbytes < SMALL_LIMIT {
        return nbytes.max(1).div_ceil(512) * 512;
    }
    let step = 1usize << (usize::BITS - 1 - nbytes.leading_zeros()).saturating_sub(3);
    nbytes.div_ceil(step) * step
}

/// Parses a byte size such as `1073741824`, `512M`, `2GiB`, `1.5g` (binary multiples).
pub fn parse_size(text: &str) -> Result<usize, String> {
    let t = text.trim().to_ascii_lowercase();
    let t = t.strip_suffix('b').unwrap_or(&t);
    let t = t.strip_suffix('i').unwrap_or(t);
    let (num, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('m') => (&t[..t.len() - 1], 1 << 20),
        Some('g') => (&t[..t.len() - 1], 1 << 30),
        Some('t') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    let value: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a byte size (e.g. 2G, 512M, 1048576)"))?;
    if !(value >= 0.0 && value.is_finite()) {
        return Err(format!(
            "{text:?} is not a byte size (e.g. 2G, 512M, 1048576)"
        ));
    }
    Ok((value * mult as f64) as usize)
}

#[derive(Debug, Clone, Copy)]
struct Block {
    device: usize,
    size: usize,
    requested: usize,
    /// The private pool it was allocated in (`torch.foo.MemPool`), 0 for the device's cache.
    pool: u64,
}

/// Hashes a size class with one multiply: the keys are a few hundred distinct multiples of 512
/// chosen by the allocator itself, so SipHash's defence against crafted keys buys nothing and
/// cost ~20 ns on every allocation and free.
#[derive(Default)]
struct SizeHasher(u64);

impl Hasher for SizeHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

#[derive(Default)]
struct Pool {
    /// The device this pool serves.
    device: usize,
    /// size class -> addresses of cached (free) blocks
    cached: HashMap<usize, Vec<usize>, BuildHasherDefault<SizeHasher>>,
    cached_bytes: usize,
    stats: MemoryStats,
    /// Maximum reserved bytes; None = unlimited.
    limit: Option<usize>,
}

/// Everything an allocation or a free touches, behind one lock: one uncontended lock per call
/// instead of two (pool, then registry) halves the allocator's share of a small op.
struct State {
    pools: Vec<Pool>,
    /// Live device blocks: address -> block (ordered, so interior pointers resolve too).
    live: BTreeMap<usize, Block>,
    /// Private pools (`torch.foo.MemPool`) by id.
    private: HashMap<u64, PrivatePool>,
}

/// A private memory pool, as CUDA's `MemPool`: the blocks allocated while a thread uses it
/// (`use_mem_pool`) come back to it when freed and serve only its later allocations;
/// `empty_cache` leaves them, and they go back to the system when the pool is released. Its
/// segments count in the device's statistics like any other.
#[derive(Default)]
struct PrivatePool {
    /// (device, size class) -> addresses of cached blocks.
    cached: HashMap<(usize, usize), Vec<usize>>,
}

thread_local! {
    /// The private pools this thread allocates into, innermost last: (device, pool id).
    static POOL_STACK: std::cell::RefCell<Vec<(usize, u64)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The private pool this thread allocates into on `device`, 0 for none.
fn thread_pool(device: usize) -> u64 {
    POOL_STACK.with(|s| {
        s.borrow()
            .iter()
            .rev()
            .find(|(d, _)| *d == device)
            .map_or(0, |&(_, id)| id)
    })
}

struct Allocator {
    state: Mutex<State>,
    /// Live pinned host blocks (address -> size) and the pinned allocator's statistics.
    pinned: Mutex<Pinned>,
    /// A `FOO_RS_MEMORY_LIMIT` that did not parse: every allocation reports it.
    limit_error: Option<String>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave the maps half-updated in a way that matters
    // more than refusing all further allocations would; keep going.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn allocator() -> &'static Allocator {
    static ALLOCATOR: OnceLock<Allocator> = OnceLock::new();
    ALLOCATOR.get_or_init(|| {
        let (limit, limit_error) = match std::env::var("FOO_RS_MEMORY_LIMIT") {
            Ok(v) if !v.trim().is_empty() => match parse_size(&v) {
                Ok(0) => (None, None),
                Ok(n) => (Some(n), None),
                Err(e) => (None, Some(format!("FOO_RS_MEMORY_LIMIT: {e}"))),
            },
            _ => (None, None),
        };
        Allocator {
            state: Mutex::new(State {
                pools: (0..device_count())
                    .map(|device| Pool {
                        device,
                        limit,
                        ..Pool::default()
                    })
                    .collect(),
                live: BTreeMap::new(),
                private: HashMap::new(),
            }),
            pinned: Mutex::new(Pinned::default()),
            limit_error,
        }
    })
}

/// Blocks of at least this size are aligned to it and backed by transparent huge pages where
/// the kernel offers them (`madvise` mode): streaming kernels over multi-MB tensors then miss
/// the TLB 512 times less often.
pub const HUGE_PAGE: usize = 2 << 20;

fn device_layout(size: usize) -> Layout {
    let align = if size >= HUGE_PAGE { HUGE_PAGE } else { ALIGN };
    // Powers of two, and sizes far below isize::MAX after the limit checks.
    Layout::from_size_align(size, align).expect("valid block layout")
}

#[cfg(target_os = "linux")]
fn advise_huge_pages(ptr: *mut u8, size: usize) {
    extern "C" {
        fn madvise(addr: *mut std::ffi::c_void, len: usize, advice: i32) -> i32;
    }
    const MADV_HUGEPAGE: i32 = 14;
    if size >= HUGE_PAGE {
        // SAFETY: [ptr, ptr + size) is a block this allocator just obtained; the advice only
        // changes how the kernel backs it. A refusal (THP off) leaves ordinary pages.
        unsafe { madvise(ptr as *mut std::ffi::c_void, size, MADV_HUGEPAGE) };
    }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_ptr: *mut u8, _size: usize) {}

fn layout(size: usize) -> Layout {
    // ALIGN is a power of two and sizes are far below isize::MAX after the limit checks.
    Layout::from_size_align(size, ALIGN).expect("valid block layout")
}

fn release_cached(pool: &mut Pool) {
    for (size, addrs) in pool.cached.drain() {
        for addr in addrs {
            release_block(pool.device, &mut pool.stats, addr, size);
        }
    }
    pool.cached_bytes = 0;
}

/// Gives one cached block back to the system.
fn release_block(device: usize, stats: &mut MemoryStats, addr: usize, size: usize) {
    let small = size < SMALL_LIMIT;
    // SAFETY: cached blocks were allocated with `device_layout(size)` and are owned by the pool.
    unsafe { dealloc(addr as *mut u8, device_layout(size)) };
    stats.segment.decrease(small, 1);
    stats.reserved_bytes.decrease(small, size);
    stats.num_device_free += 1;
    notify_segment(SegmentEvent::Free, device, addr, size);
}

/// What happened to a segment (a block obtained from or returned to the system): the `event`
/// a `FooSegmentObserver` is called with.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentEvent {
    Alloc = 0,
    Free = 1,
}

/// Called with (event, device, address, size) for every segment obtained or released, while
/// the allocator's lock is held: it must not call back into the allocator (the glue's memory
/// history only appends to its own trace).
pub type SegmentObserver = extern "C" fn(event: i32, device: i32, addr: usize, size: usize);

/// The observer as a plain address (0: none), so the allocation path pays one relaxed load.
static SEGMENT_OBSERVER: AtomicUsize = AtomicUsize::new(0);

/// Installs (`Some`) or removes (`None`) the segment observer.
pub fn set_segment_observer(observer: Option<SegmentObserver>) {
    SEGMENT_OBSERVER.store(observer.map_or(0, |f| f as usize), Ordering::Release);
}

fn notify_segment(event: SegmentEvent, device: usize, addr: usize, size: usize) {
    let f = SEGMENT_OBSERVER.load(Ordering::Acquire);
    if f != 0 {
        // SAFETY: a non-zero value was stored by `set_segment_observer` from a `SegmentObserver`.
        let f: SegmentObserver = unsafe { std::mem::transmute::<usize, SegmentObserver>(f) };
        f(event as i32, device as i32, addr, size);
    }
}

/// Bytes the cache may always keep (a training step's working set is reused from it).
const CACHE_FLOOR: usize = 256 << 20;

/// Keeps the cache within max([`CACHE_FLOOR`], the peak of allocated bytes): a steady loop
/// re-uses at most its peak, while blocks of sizes never asked for again (a program whose shapes
/// vary) would otherwise pile up without bound (the differential fuzzer's process reached 5.7 GB
/// with nothing allocated). The largest size classes go first: the fewest frees for the bytes.
fn trim_cache(pool: &mut Pool) {
    let cap = CACHE_FLOOR.max(pool.stats.allocated_bytes.all.peak.max(0) as usize);
    if pool.cached_bytes <= cap {
        return;
    }
    let mut sizes: Vec<usize> = pool.cached.keys().copied().collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    for size in sizes {
        let Some(addrs) = pool.cached.get_mut(&size) else {
            continue;
        };
        while pool.cached_bytes > cap {
            let Some(addr) = addrs.pop() else { break };
            pool.cached_bytes -= size;
            release_block(pool.device, &mut pool.stats, addr, size);
        }
        if addrs.is_empty() {
            pool.cached.remove(&size);
        }
        if pool.cached_bytes <= cap {
            break;
        }
    }
}

fn fmt_bytes(n: usize) -> String {
    const UNITS: [&str; 5] = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} bytes")
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

/// Allocates `nbytes` on `device`. Zero bytes gives a null pointer (as CUDA does).
pub fn allocate(device: i64, nbytes: usize) -> FooResult<*mut u8> {
    let device = check_device(device)?;
    let a = allocator();
    if let Some(e) = &a.limit_error {
        return Err(FooError::InvalidArgument(e.clone()));
    }
    if nbytes == 0 {
        return Ok(std::ptr::null_mut());
    }
    if nbytes > isize::MAX as usize / 2 {
        return Err(FooError::OutOfMemory(format!(
            "foo out of memory. Tried to allocate {} on foo:{device}, which no host can provide",
            fmt_bytes(nbytes)
        )));
    }
    let size = round_size(nbytes);
    let small = size < SMALL_LIMIT;
    let mut state = lock(&a.state);
    let State {
        pools,
        live,
        private,
    } = &mut *state;
    let pool = &mut pools[device];
    let pool_id = if private.is_empty() {
        0
    } else {
        thread_pool(device)
    };
    let reuse = match private.get_mut(&pool_id) {
        Some(p) => p.cached.get_mut(&(device, size)).and_then(Vec::pop),
        None => pool.cached.get_mut(&size).and_then(Vec::pop).inspect(|_| {
            pool.cached_bytes -= size;
        }),
    };
    let addr = match reuse {
        Some(addr) => addr,
        None => new_segment(pool, device, size, nbytes)?,
    };
    let s = &mut pool.stats;
    s.allocation.increase(small, 1);
    s.active.increase(small, 1);
    s.allocated_bytes.increase(small, size);
    s.active_bytes.increase(small, size);
    s.requested_bytes.increase(small, nbytes);
    live.insert(
        addr,
        Block {
            device,
            size,
            requested: nbytes,
            pool: pool_id,
        },
    );
    Ok(addr as *mut u8)
}

fn new_segment(pool: &mut Pool, device: usize, size: usize, nbytes: usize) -> FooResult<usize> {
    let small = size < SMALL_LIMIT;
    let over_limit = |p: &Pool| {
        p.limit
            .is_some_and(|l| p.stats.reserved_bytes.all.current as usize + size > l)
    };
    let mut retried = false;
    loop {
        let ptr = if over_limit(pool) {
            std::ptr::null_mut()
        } else {
            // SAFETY: `device_layout(size)` has a non-zero size.
            let ptr = unsafe { alloc(device_layout(size)) };
            if !ptr.is_null() {
                advise_huge_pages(ptr, size);
            }
            ptr
        };
        if !ptr.is_null() {
            pool.stats.segment.increase(small, 1);
            pool.stats.reserved_bytes.increase(small, size);
            pool.stats.num_device_alloc += 1;
            notify_segment(SegmentEvent::Alloc, device, ptr as usize, size);
            return Ok(ptr as usize);
        }
        if !retried && pool.cached_bytes > 0 {
            // Give the cache back and try once more, as the CUDA caching allocator does.
            pool.stats.num_alloc_retries += 1;
            release_cached(pool);
            retried = true;
            continue;
        }
        pool.stats.num_ooms += 1;
        let s = &pool.stats;
        let limit = pool
            .limit
            .map(|l| format!("memory limit {} (FOO_RS_MEMORY_LIMIT)", fmt_bytes(l)))
            .unwrap_or_else(|| "the host refused the allocation".to_string());
        return Err(FooError::OutOfMemory(format!(
            "foo out of memory. Tried to allocate {} on foo:{device}; {limit}; {} allocated by tensors, {} reserved by foo_rs",
            fmt_bytes(nbytes),
            fmt_bytes(s.allocated_bytes.all.current as usize),
            fmt_bytes(s.reserved_bytes.all.current as usize),
        )));
    }
}

/// Returns a block to its device's cache. Null is ignored; an unknown pointer is an error.
pub fn free(ptr: *mut u8) -> FooResult<()> {
    if ptr.is_null() {
        return Ok(());
    }
    let mut state = lock(&allocator().state);
    let block = state.live.remove(&(ptr as usize)).ok_or_else(|| {
        FooError::Runtime(format!("foo free: {ptr:p} is not a live foo allocation"))
    })?;
    let small = block.size < SMALL_LIMIT;
    let State { pools, private, .. } = &mut *state;
    let pool = &mut pools[block.device];
    // A block of a released private pool goes to the device's cache.
    match private.get_mut(&block.pool) {
        Some(p) => p
            .cached
            .entry((block.device, block.size))
            .or_default()
            .push(ptr as usize),
        None => {
            pool.cached
                .entry(block.size)
                .or_default()
                .push(ptr as usize);
            pool.cached_bytes += block.size;
        }
    }
    let s = &mut pool.stats;
    s.allocation.decrease(small, 1);
    s.active.decrease(small, 1);
    s.allocated_bytes.decrease(small, block.size);
    s.active_bytes.decrease(small, block.size);
    s.requested_bytes.decrease(small, block.requested);
    trim_cache(pool);
    Ok(())
}

/// Releases every cached block of `device` (or of all devices when `None`).
pub fn empty_cache(device: Option<i64>) -> FooResult<()> {
    let a = allocator();
    let devices = match device {
        Some(d) => vec![check_device(d)?],
        None => (0..device_count()).collect(),
    };
    let mut state = lock(&a.state);
    for d in devices {
        release_cached(&mut state.pools[d]);
    }
    Ok(())
}

pub fn stats(device: i64) -> FooResult<MemoryStats> {
    let d = check_device(device)?;
    Ok(lock(&allocator().state).pools[d].stats)
}

pub fn reset_peak_stats(device: i64) -> FooResult<()> {
    let d = check_device(device)?;
    let mut state = lock(&allocator().state);
    let pool = &mut state.pools[d];
    for arr in pool.stats.arrays_mut() {
        for s in arr.stats_mut() {
            s.peak = s.current;
        }
    }
    Ok(())
}

pub fn reset_accumulated_stats(device: i64) -> FooResult<()> {
    let d = check_device(device)?;
    let mut state = lock(&allocator().state);
    let pool = &mut state.pools[d];
    for arr in pool.stats.arrays_mut() {
        for s in arr.stats_mut() {
            s.allocated = 0;
            s.freed = 0;
        }
    }
    let s = &mut pool.stats;
    s.num_alloc_retries = 0;
    s.num_ooms = 0;
    s.num_device_alloc = 0;
    s.num_device_free = 0;
    Ok(())
}

/// Sets (`Some`) or removes (`None`) the reserved-bytes limit of one device or all devices.
pub fn set_memory_limit(device: Option<i64>, limit: Option<usize>) -> FooResult<()> {
    let a = allocator();
    let devices = match device {
        Some(d) => vec![check_device(d)?],
        None => (0..device_count()).collect(),
    };
    let mut state = lock(&a.state);
    for d in devices {
        state.pools[d].limit = limit;
    }
    Ok(())
}

pub fn memory_limit(device: i64) -> FooResult<Option<usize>> {
    let d = check_device(device)?;
    Ok(lock(&allocator().state).pools[d].limit)
}

/// Bytes cached (reserved but not in use) on a device.
pub fn cached_bytes(device: i64) -> FooResult<usize> {
    let d = check_device(device)?;
    Ok(lock(&allocator().state).pools[d].cached_bytes)
}

/// Total bytes a device may hold: its limit, else the host's RAM.
pub fn total_memory(device: i64) -> FooResult<usize> {
    Ok(memory_limit(device)?.unwrap_or_else(host_ram))
}

/// The host's physical memory (MemTotal), or 0 where it cannot be read.
pub fn host_ram() -> usize {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<usize>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// The device a pointer into a live block belongs to.
pub fn device_of(ptr: *const u8) -> Option<usize> {
    let addr = ptr as usize;
    let state = lock(&allocator().state);
    state
        .live
        .range(..=addr)
        .next_back()
        .filter(|(start, b)| addr < *start + b.size)
        .map(|(_, b)| b.device)
}

/// (device, size class, requested bytes) of the live block starting at `ptr`.
pub fn block_info(ptr: *const u8) -> Option<(usize, usize, usize)> {
    lock(&allocator().state)
        .live
        .get(&(ptr as usize))
        .map(|b| (b.device, b.size, b.requested))
}

/// One block of the allocator, live or cached (each block is its own segment: the allocator
/// never splits one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockView {
    pub device: usize,
    pub addr: usize,
    pub size: usize,
    /// Bytes the caller asked for (0 for a cached block).
    pub requested: usize,
    pub live: bool,
}

/// Every block of every device, live ones first, each group by address.
pub fn blocks() -> Vec<BlockView> {
    let state = lock(&allocator().state);
    let mut out: Vec<BlockView> = state
        .live
        .iter()
        .map(|(&addr, b)| BlockView {
            device: b.device,
            addr,
            size: b.size,
            requested: b.requested,
            live: true,
        })
        .collect();
    let mut cached: Vec<BlockView> = state
        .pools
        .iter()
        .flat_map(|p| {
            p.cached.iter().flat_map(move |(&size, addrs)| {
                addrs.iter().map(move |&addr| BlockView {
                    device: p.device,
                    addr,
                    size,
                    requested: 0,
                    live: false,
                })
            })
        })
        .collect();
    cached.extend(state.private.values().flat_map(|p| {
        p.cached.iter().flat_map(move |(&(device, size), addrs)| {
            addrs.iter().map(move |&addr| BlockView {
                device,
                addr,
                size,
                requested: 0,
                live: false,
            })
        })
    }));
    cached.sort_unstable_by_key(|b| b.addr);
    out.extend(cached);
    out
}

/// Creates a private pool (`torch.foo.MemPool`, on any device); returns its id (never 0).
pub fn create_pool() -> u64 {
    static NEXT: AtomicUsize = AtomicUsize::new(1);
    let id = NEXT.fetch_add(1, Ordering::Relaxed) as u64;
    lock(&allocator().state)
        .private
        .insert(id, PrivatePool::default());
    id
}

/// From now on this thread's allocations on `device` go to pool `id` (`use_mem_pool`'s
/// entry; nests).
pub fn begin_allocate_to_pool(device: i64, id: u64) -> FooResult<()> {
    let device = check_device(device)?;
    if !lock(&allocator().state).private.contains_key(&id) {
        return Err(FooError::InvalidArgument(format!(
            "no foo memory pool {id}"
        )));
    }
    POOL_STACK.with(|s| s.borrow_mut().push((device, id)));
    Ok(())
}

/// Undoes the innermost [`begin_allocate_to_pool`] of pool `id` on this thread.
pub fn end_allocate_to_pool(id: u64) -> FooResult<()> {
    POOL_STACK.with(|s| {
        let mut stack = s.borrow_mut();
        let at = stack.iter().rposition(|&(_, p)| p == id).ok_or_else(|| {
            FooError::Runtime(format!(
                "this thread is not allocating to foo memory pool {id}"
            ))
        })?;
        stack.remove(at);
        Ok(())
    })
}

/// Releases pool `id`: its cached blocks go back to the system; its blocks still in use go to
/// the device's cache when freed. Unknown ids (released already) are ignored.
pub fn release_pool(id: u64) {
    let mut state = lock(&allocator().state);
    if let Some(p) = state.private.remove(&id) {
        for ((device, size), addrs) in p.cached {
            for addr in addrs {
                release_block(device, &mut state.pools[device].stats, addr, size);
            }
        }
    }
}

/// Addresses of pool `id`'s blocks, live and cached (`MemPool.snapshot`), and how many are live.
pub fn pool_blocks(id: u64) -> FooResult<(Vec<usize>, usize)> {
    let state = lock(&allocator().state);
    let p = state
        .private
        .get(&id)
        .ok_or_else(|| FooError::InvalidArgument(format!("no foo memory pool {id}")))?;
    let live: Vec<usize> = state
        .live
        .iter()
        .filter(|(_, b)| b.pool == id)
        .map(|(&a, _)| a)
        .collect();
    let n_live = live.len();
    let mut all = live;
    all.extend(p.cached.values().flatten().copied());
    all.sort_unstable();
    Ok((all, n_live))
}

/// Number of live device blocks across all devices (leak checks).
pub fn live_blocks() -> usize {
    lock(&allocator().state).live.len()
}

/// Time spent in one kind of call, in microseconds, as c10's `DurationStat`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DurationStat {
    pub total: i64,
    pub max: i64,
    pub min: i64,
    pub count: i64,
}

impl DurationStat {
    fn add(&mut self, us: i64) {
        self.min = if self.count == 0 {
            us
        } else {
            self.min.min(us)
        };
        self.max = self.max.max(us);
        self.total += us;
        self.count += 1;
    }
}

/// Statistics of the pinned-host allocator, as c10's `HostStats` (`torch.cuda.host_memory_stats`).
/// foo's pinned blocks are not cached: every request is its own host allocation and every free
/// returns it, so `allocations` and `active_requests` (and their byte counts) move together.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct HostStats {
    pub allocations: Stat,
    pub allocated_bytes: Stat,
    pub active_requests: Stat,
    pub active_bytes: Stat,
    pub alloc_time: DurationStat,
    pub free_time: DurationStat,
}

impl HostStats {
    fn counters_mut(&mut self) -> [&mut Stat; 4] {
        [
            &mut self.allocations,
            &mut self.allocated_bytes,
            &mut self.active_requests,
            &mut self.active_bytes,
        ]
    }
}

#[derive(Default)]
struct Pinned {
    blocks: BTreeMap<usize, usize>,
    stats: HostStats,
}

fn elapsed_us(since: std::time::Instant) -> i64 {
    since.elapsed().as_micros().min(i64::MAX as u128) as i64
}

/// Page-locked ("pinned") host memory for `pin_memory()`: host RAM that the hooks recognise.
pub fn host_allocate(nbytes: usize) -> FooResult<*mut u8> {
    if nbytes == 0 {
        return Ok(std::ptr::null_mut());
    }
    if nbytes > isize::MAX as usize / 2 {
        return Err(FooError::OutOfMemory(format!(
            "cannot allocate {} of pinned host memory",
            fmt_bytes(nbytes)
        )));
    }
    let size = nbytes.div_ceil(ALIGN) * ALIGN;
    let start = std::time::Instant::now();
    // SAFETY: non-zero size.
    let ptr = unsafe { alloc(layout(size)) };
    let us = elapsed_us(start);
    if ptr.is_null() {
        return Err(FooError::OutOfMemory(format!(
            "cannot allocate {} of pinned host memory",
            fmt_bytes(nbytes)
        )));
    }
    let mut pinned = lock(&allocator().pinned);
    pinned.blocks.insert(ptr as usize, size);
    let st = &mut pinned.stats;
    st.allocations.increase(1);
    st.active_requests.increase(1);
    st.allocated_bytes.increase(size);
    st.active_bytes.increase(size);
    st.alloc_time.add(us);
    Ok(ptr)
}

// The pointer is only released after it was found in the registry of live pinned blocks, so a
// foreign or stale pointer is reported, never dereferenced.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
pub fn host_free(ptr: *mut u8) -> FooResult<()> {
    if ptr.is_null() {
        return Ok(());
    }
    let size = lock(&allocator().pinned)
        .blocks
        .remove(&(ptr as usize))
        .ok_or_else(|| FooError::Runtime(format!("foo host free: {ptr:p} is not pinned memory")))?;
    let start = std::time::Instant::now();
    // SAFETY: the block was allocated by `host_allocate` with this layout and is now unowned.
    unsafe { dealloc(ptr, layout(size)) };
    let us = elapsed_us(start);
    let st = &mut lock(&allocator().pinned).stats;
    st.allocations.decrease(1);
    st.active_requests.decrease(1);
    st.allocated_bytes.decrease(size);
    st.active_bytes.decrease(size);
    st.free_time.add(us);
    Ok(())
}

pub fn host_stats() -> HostStats {
    lock(&allocator().pinned).stats
}

/// Peaks back to the current values (`reset_peak_host_memory_stats`).
pub fn reset_peak_host_stats() {
    for s in lock(&allocator().pinned).stats.counters_mut() {
        s.peak = s.current;
    }
}

/// Allocated/freed totals and the call timings back to zero
/// (`reset_accumulated_host_memory_stats`).
pub fn reset_accumulated_host_stats() {
    let st = &mut lock(&allocator().pinned).stats;
    for s in st.counters_mut() {
        s.allocated = 0;
        s.freed = 0;
    }
    st.alloc_time = DurationStat::default();
    st.free_time = DurationStat::default();
}

pub fn is_pinned(ptr: *const u8) -> bool {
    let addr = ptr as usize;
    lock(&allocator().pinned)
        .blocks
        .range(..=addr)
        .next_back()
        .is_some_and(|(start, size)| addr < start + size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes() {
        assert_eq!(round_size(1), 512);
        assert_eq!(round_size(513), 1024);
        assert_eq!(round_size(SMALL_LIMIT), SMALL_LIMIT);
        assert_eq!(
            round_size(SMALL_LIMIT + 1),
            SMALL_LIMIT + (SMALL_LIMIT >> 3)
        );
        for n in [3 << 20, 40_000_000usize, 123_456_789] {
            let r = round_size(n);
            assert!(r >= n && (r - n) * 8 <= n && r % ALIGN == 0);
        }
    }

    #[test]
    fn parse_sizes() {
        assert_eq!(parse_size("1024").unwrap(), 1024);
        assert_eq!(parse_size("512M").unwrap(), 512 << 20);
        assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_size("1.5k").unwrap(), 1536);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("-1").is_err());
    }

    static SEGMENTS: Mutex<Vec<(i32, i32, usize, usize)>> = Mutex::new(Vec::new());

    extern "C" fn record_segment(event: i32, device: i32, addr: usize, size: usize) {
        SEGMENTS.lock().unwrap().push((event, device, addr, size));
    }

    // One test owns device 1 so that parallel tests do not disturb its statistics.
    #[test]
    fn cache_reuse_limit_and_stats() {
        let before = stats(1).unwrap();
        let p = allocate(1, 1000).unwrap();
        assert_eq!(p as usize % ALIGN, 0);
        assert_eq!(device_of(p), Some(1));
        // SAFETY: an interior pointer of a live 1024-byte block.
        assert_eq!(device_of(unsafe { p.add(1000) }), Some(1));
        let s = stats(1).unwrap();
        assert_eq!(
            s.allocated_bytes.all.current - before.allocated_bytes.all.current,
            1024
        );
        assert_eq!(
            s.requested_bytes.all.current - before.requested_bytes.all.current,
            1000
        );
        free(p).unwrap();
        assert!(free(p).is_err(), "double free is reported, not performed");
        let q = allocate(1, 900).unwrap();
        assert_eq!(p, q, "same size class reuses the cached block");
        assert_eq!(block_info(q), Some((1, 1024, 900)));
        // SAFETY: an interior pointer of the live block: not a block start.
        assert_eq!(block_info(unsafe { q.add(8) }), None);
        assert!(blocks().contains(&BlockView {
            device: 1,
            addr: q as usize,
            size: 1024,
            requested: 900,
            live: true
        }));
        free(q).unwrap();
        assert_eq!(block_info(q), None);
        assert!(blocks()
            .iter()
            .any(|b| b.addr == q as usize && b.device == 1 && !b.live && b.size == 1024));
        assert_eq!(
            stats(1).unwrap().allocated_bytes.all.current,
            before.allocated_bytes.all.current
        );

        set_memory_limit(Some(1), Some(4 << 20)).unwrap();
        let big = allocate(1, 3 << 20).unwrap();
        let err = allocate(1, 2 << 20).unwrap_err();
        assert!(matches!(err, FooError::OutOfMemory(_)), "{err}");
        assert!(err.message().contains("foo:1"));
        free(big).unwrap();
        // The cached 3 MiB block is flushed and the retry succeeds.
        let retry = allocate(1, 2 << 20).unwrap();
        assert!(stats(1).unwrap().num_alloc_retries >= 1);
        free(retry).unwrap();
        set_memory_limit(Some(1), None).unwrap();
        SEGMENTS.lock().unwrap().clear();
        set_segment_observer(Some(record_segment));
        let fresh = allocate(1, 5 << 20).unwrap();
        empty_cache(Some(1)).unwrap();
        free(fresh).unwrap();
        empty_cache(Some(1)).unwrap();
        set_segment_observer(None);
        let seen: Vec<(i32, usize)> = SEGMENTS
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, d, a, _)| *d == 1 && *a == fresh as usize)
            .map(|(e, _, _, size)| (*e, *size))
            .collect();
        let class = round_size(5 << 20);
        assert_eq!(
            seen,
            vec![
                (SegmentEvent::Alloc as i32, class),
                (SegmentEvent::Free as i32, class)
            ]
        );
        assert_eq!(cached_bytes(1).unwrap(), 0);
        assert_eq!(allocate(1, 0).unwrap(), std::ptr::null_mut());
        assert!(allocate(7, 10).is_err());
    }

    #[test]
    fn cache_stays_bounded_when_sizes_vary() {
        // 400 distinct size classes of ~2 MiB, each freed at once: 800 MiB of blocks no later
        // request reuses; the cache keeps at most max(CACHE_FLOOR, peak allocated).
        for i in 0..400usize {
            let p = allocate(0, (2 << 20) + i * 4096).unwrap();
            free(p).unwrap();
        }
        let s = stats(0).unwrap();
        let cap = CACHE_FLOOR.max(s.allocated_bytes.all.peak as usize);
        assert!(
            cached_bytes(0).unwrap() <= cap,
            "{} > {cap}",
            cached_bytes(0).unwrap()
        );
    }

    #[test]
    fn large_blocks_are_huge_page_aligned() {
        let p = allocate(0, 3 << 20).unwrap();
        assert_eq!(p as usize % HUGE_PAGE, 0);
        // SAFETY: the block is 3.5 MiB (its size class) and owned here.
        unsafe { std::ptr::write_bytes(p, 7, 3 << 20) };
        free(p).unwrap();
        let q = allocate(0, 1000).unwrap();
        assert_eq!(q as usize % ALIGN, 0);
        free(q).unwrap();
    }

    #[test]
    fn private_pool_reuses_its_own_blocks() {
        let id = create_pool();
        begin_allocate_to_pool(0, id).unwrap();
        let a = allocate(0, 3 << 20).unwrap();
        free(a).unwrap();
        let again = allocate(0, 3 << 20).unwrap();
        assert_eq!(again, a);
        end_allocate_to_pool(id).unwrap();
        assert!(end_allocate_to_pool(id).is_err());
        let (blocks, live) = pool_blocks(id).unwrap();
        assert_eq!((blocks, live), (vec![a as usize], 1));
        free(again).unwrap();
        release_pool(id);
        assert!(pool_blocks(id).is_err());
        assert!(begin_allocate_to_pool(0, id).is_err());
    }

    #[test]
    fn pinned_memory() {
        let p = host_allocate(100).unwrap();
        assert!(is_pinned(p));
        // SAFETY: interior pointer of a live 128-byte pinned block.
        assert!(is_pinned(unsafe { p.add(99) }));
        host_free(p).unwrap();
        assert!(!is_pinned(p));
    }
}
