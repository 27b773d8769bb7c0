//! The C ABI the C++ glue calls. The glue's C header (`foo_ffi.h`) is generated from these
//! declarations and the `#[repr(C)]` types they use by cbindgen at build time (build.rs,
//! cbindgen.toml): the `///` comments here are the header's comments.
//!
//! Every fallible function returns a status code (`error::Status`) and leaves a message for
//! `foo_last_error()`. No panic crosses this boundary: each body runs under `catch_unwind` and
//! a panic becomes `Status::Panic` with its message, leaving the process usable.

use self::args::{TensorIn, TensorOut};
use crate::error::{FooError, FooResult, Status};
use crate::kernels;
use crate::runtime::{counters, device, memory, rng};
use crate::tensor::{FooTensor, Scalar, TensorMut, TensorRef};
use std::cell::RefCell;
use std::ffi::{c_char, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};

mod amp;
mod args;
mod attention;
mod conv;
mod elementwise;
mod index;
mod linalg;
mod nn;
mod optim;
mod pool;
mod random;
mod reduce;
mod rnn;
mod team;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(msg: &str) {
    let c = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_string()
    }
}

/// Runs `f`, turning errors and panics into a status code plus `foo_last_error()`.
pub(crate) fn guard(f: impl FnOnce() -> FooResult<()>) -> i32 {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => Status::Ok as i32,
        Ok(Err(e)) => {
            set_last_error(e.message());
            e.status() as i32
        }
        Err(payload) => {
            set_last_error(&format!(
                "Rust panic in foo_rs: {}",
                panic_message(payload.as_ref())
            ));
            Status::Panic as i32
        }
    }
}

pub(crate) fn out<T>(ptr: *mut T, value: T) -> FooResult<()> {
    if ptr.is_null() {
        return Err(FooError::InvalidArgument("null output pointer".into()));
    }
    // SAFETY: non-null output pointer provided by the caller for exactly this value.
    unsafe { ptr.write(value) };
    Ok(())
}

/// # Safety (for every function taking `*const FooTensor`)
/// The descriptor and the memory it describes must stay valid for the call.
pub(crate) unsafe fn tensor_ref(t: *const FooTensor) -> FooResult<TensorRef> {
    // SAFETY: caller's contract; null is checked.
    let t = unsafe { t.as_ref() }
        .ok_or_else(|| FooError::InvalidArgument("null tensor descriptor".into()))?;
    // SAFETY: caller's contract.
    unsafe { TensorRef::from_ffi(t) }
}

/// # Safety
/// As [`tensor_ref`], and the memory must be writable.
pub(crate) unsafe fn tensor_mut(t: *const FooTensor) -> FooResult<TensorMut> {
    // SAFETY: caller's contract; null is checked.
    let t = unsafe { t.as_ref() }
        .ok_or_else(|| FooError::InvalidArgument("null tensor descriptor".into()))?;
    // SAFETY: caller's contract.
    unsafe { TensorMut::from_ffi(t) }
}

/// The message of the last failed call on this thread (valid until the next failing call).
#[no_mangle]
pub extern "C" fn foo_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// The c10::ScalarType codes foo's kernels support, as bits (`1 << code`): src/dtype.rs's list.
#[no_mangle]
pub extern "C" fn foo_supported_dtype_mask() -> u64 {
    crate::dtype::DType::supported_mask()
}

// ---- devices -------------------------------------------------------------------------------

#[no_mangle]
pub extern "C" fn foo_device_count() -> i32 {
    catch_unwind(device::device_count)
        .map(|n| n as i32)
        .unwrap_or(0)
}

#[no_mangle]
pub extern "C" fn foo_current_device() -> i32 {
    device::current_device() as i32
}

#[no_mangle]
pub extern "C" fn foo_set_device(index: i32) -> i32 {
    guard(|| device::set_device(index as i64))
}

#[no_mangle]
pub extern "C" fn foo_exchange_device(index: i32, previous: *mut i32) -> i32 {
    guard(|| out(previous, device::exchange_device(index as i64)? as i32))
}

// ---- memory --------------------------------------------------------------------------------

#[no_mangle]
pub extern "C" fn foo_alloc(device: i32, nbytes: usize, ptr: *mut *mut c_void) -> i32 {
    guard(|| out(ptr, memory::allocate(device as i64, nbytes)? as *mut c_void))
}

#[no_mangle]
pub extern "C" fn foo_free(ptr: *mut c_void) -> i32 {
    guard(|| memory::free(ptr as *mut u8))
}

/// Device of a pointer into a live block, or -1.
#[no_mangle]
pub extern "C" fn foo_device_of_ptr(ptr: *const c_void) -> i32 {
    catch_unwind(|| {
        memory::device_of(ptr as *const u8)
            .map(|d| d as i32)
            .unwrap_or(-1)
    })
    .unwrap_or(-1)
}

/// Releases cached blocks of `device`, or of every device when `device < 0`.
#[no_mangle]
pub extern "C" fn foo_empty_cache(device: i32) -> i32 {
    guard(|| memory::empty_cache((device >= 0).then_some(device as i64)))
}

#[no_mangle]
pub extern "C" fn foo_memory_stats(device: i32, stats: *mut memory::MemoryStats) -> i32 {
    guard(|| out(stats, memory::stats(device as i64)?))
}

#[no_mangle]
pub extern "C" fn foo_reset_peak_stats(device: i32) -> i32 {
    guard(|| memory::reset_peak_stats(device as i64))
}

#[no_mangle]
pub extern "C" fn foo_reset_accumulated_stats(device: i32) -> i32 {
    guard(|| memory::reset_accumulated_stats(device as i64))
}

#[no_mangle]
pub extern "C" fn foo_memory_info(
    device: i32,
    free_bytes: *mut usize,
    total_bytes: *mut usize,
) -> i32 {
    guard(|| {
        let total = memory::total_memory(device as i64)?;
        let used = memory::stats(device as i64)?.reserved_bytes.all.current as usize;
        out(free_bytes, total.saturating_sub(used))?;
        out(total_bytes, total)
    })
}

/// (device, size class, requested bytes) of the live block that starts at `ptr`; an error
/// for any other pointer.
#[no_mangle]
pub extern "C" fn foo_block_info(
    ptr: *const c_void,
    device: *mut i32,
    size: *mut usize,
    requested: *mut usize,
) -> i32 {
    guard(|| {
        let (d, s, r) = memory::block_info(ptr as *const u8).ok_or_else(|| {
            FooError::InvalidArgument(format!("{ptr:p} is not the start of a live foo block"))
        })?;
        out(device, d as i32)?;
        out(size, s)?;
        out(requested, r)
    })
}

/// Told about every segment the allocator obtains or releases: `event` is a `FooSegmentEvent`
/// code (0: obtained from the system, 1: released to it), then the device, address and size.
/// It runs under the allocator's lock and must not call back into the allocator.
pub type FooSegmentObserver =
    Option<extern "C" fn(event: i32, device: i32, addr: usize, size: usize)>;

/// Installs (non-null) or removes (null) the segment observer.
#[no_mangle]
pub extern "C" fn foo_set_segment_observer(observer: FooSegmentObserver) {
    memory::set_segment_observer(observer);
}

/// One block as `foo_memory_blocks` reports it.
#[repr(C)]
pub struct FooBlock {
    pub device: i32,
    /// In use (not cached).
    pub live: bool,
    pub addr: usize,
    /// The size class (rounded) bytes.
    pub size: usize,
    /// The bytes the caller asked for.
    pub requested: usize,
}

/// The visitor `foo_memory_blocks` calls with its `ctx` and each block.
pub type FooBlockVisitor = Option<extern "C" fn(ctx: *mut c_void, block: *const FooBlock)>;

/// Calls `visit(ctx, block)` for every block of every device (live ones first). The visitor
/// runs after the allocator's lock is released, so it may allocate.
#[no_mangle]
pub extern "C" fn foo_memory_blocks(visit: FooBlockVisitor, ctx: *mut c_void) -> i32 {
    guard(|| {
        let visit = visit.ok_or_else(|| FooError::InvalidArgument("null block visitor".into()))?;
        for b in memory::blocks() {
            let block = FooBlock {
                device: b.device as i32,
                live: b.live,
                addr: b.addr,
                size: b.size,
                requested: b.requested,
            };
            visit(ctx, &block);
        }
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn foo_host_alloc(nbytes: usize, ptr: *mut *mut c_void) -> i32 {
    guard(|| out(ptr, memory::host_allocate(nbytes)? as *mut c_void))
}

#[no_mangle]
pub extern "C" fn foo_host_free(ptr: *mut c_void) -> i32 {
    guard(|| memory::host_free(ptr as *mut u8))
}

#[no_mangle]
pub extern "C" fn foo_is_pinned(ptr: *const c_void) -> bool {
    catch_unwind(|| memory::is_pinned(ptr as *const u8)).unwrap_or(false)
}

// ---- kernels -------------------------------------------------------------------------------

/// `dst[...] = src[...]` with dtype conversion; same shapes, no overlap (the glue ensures it).
///
/// # Safety
/// Both descriptors must describe live memory (dst writable) for the duration of the call.
#[no_mangle]
pub unsafe extern "C" fn foo_copy(dst: TensorOut, src: TensorIn) -> i32 {
    guard(|| kernels::core::copy::copy(&dst.get()?, &src.get()?))
}

/// # Safety
/// `dst` must describe live writable memory; `value` must point to a scalar.
#[no_mangle]
pub unsafe extern "C" fn foo_fill(dst: TensorOut, value: *const Scalar) -> i32 {
    guard(|| {
        let d = dst.get()?;
        // SAFETY: caller's contract; null is checked.
        let v = unsafe { value.as_ref() }
            .ok_or_else(|| FooError::InvalidArgument("null scalar".into()))?;
        kernels::fill::fill(&d, v)
    })
}

/// # Safety
/// `src` must describe live memory; `value` must be writable.
#[no_mangle]
pub unsafe extern "C" fn foo_read_scalar(src: TensorIn, value: *mut Scalar) -> i32 {
    guard(|| {
        let s = src.get()?;
        out(value, kernels::core::io::read_scalar(&s)?)
    })
}

/// Makes the kernels' thread count follow `source()` (PyTorch's `at::get_num_threads`, which
/// `torch.set_num_threads` and OMP_NUM_THREADS set) unless FOO_RS_NUM_THREADS or
/// RAYON_NUM_THREADS is set; null stops following it.
#[no_mangle]
pub extern "C" fn foo_follow_thread_count(source: Option<extern "C" fn() -> i32>) {
    crate::runtime::pool::follow_thread_count(source);
}

/// Panics on purpose, to prove that a Rust panic becomes a Python exception (tests only).
#[no_mangle]
pub extern "C" fn foo_debug_panic() -> i32 {
    guard(|| panic!("deliberate panic requested by foo_rs._debug_panic"))
}

// ---- op accounting ---------------------------------------------------------------------------

/// The call counter of a native op (stable for the process), an opaque handle for
/// `foo_native_hit`.
///
/// # Safety
/// `name` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn foo_native_slot(name: *const c_char) -> *const c_void {
    // SAFETY: caller's contract.
    let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
    counters::native_slot(&name) as *const AtomicU64 as *const c_void
}

/// Bumps a counter returned by `foo_native_slot` (a relaxed add).
///
/// # Safety
/// `slot` must come from `foo_native_slot`.
#[no_mangle]
pub unsafe extern "C" fn foo_native_hit(slot: *const c_void) {
    // SAFETY: slots are leaked statics of type AtomicU64 (caller's contract).
    if let Some(s) = unsafe { (slot as *const AtomicU64).as_ref() } {
        s.fetch_add(1, Ordering::Relaxed);
    }
}

/// Records a CPU-fallback call. Returns 1 if this op's first (warn once), 0 otherwise, and
/// -1 when strict mode forbids the fallback (the glue raises NotImplementedError).
///
/// # Safety
/// `name` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn foo_fallback_hit(name: *const c_char) -> i32 {
    // SAFETY: caller's contract.
    let name = unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned();
    catch_unwind(AssertUnwindSafe(|| {
        let first = counters::record_fallback(&name);
        if counters::strict() {
            -1
        } else {
            first as i32
        }
    }))
    .unwrap_or(0)
}

// ---- generators ----------------------------------------------------------------------------

#[no_mangle]
pub extern "C" fn foo_generator_default(device: i32, id: *mut u64) -> i32 {
    guard(|| out(id, rng::default_generator(device as i64)?))
}

#[no_mangle]
pub extern "C" fn foo_generator_new(device: i32, id: *mut u64) -> i32 {
    guard(|| out(id, rng::new_generator(device as i64)?))
}

#[no_mangle]
pub extern "C" fn foo_generator_clone(id: u64, new_id: *mut u64) -> i32 {
    guard(|| out(new_id, rng::clone_generator(id)?))
}

#[no_mangle]
pub extern "C" fn foo_generator_release(id: u64) {
    let _ = catch_unwind(|| rng::release_generator(id));
}

#[no_mangle]
pub extern "C" fn foo_generator_set_seed(id: u64, seed: u64) -> i32 {
    guard(|| rng::manual_seed(id, seed))
}

#[no_mangle]
pub extern "C" fn foo_generator_get(id: u64, seed: *mut u64, offset: *mut u64) -> i32 {
    guard(|| {
        let s = rng::state(id)?;
        out(seed, s.seed)?;
        out(offset, s.offset)
    })
}

#[no_mangle]
pub extern "C" fn foo_generator_set_offset(id: u64, offset: u64) -> i32 {
    guard(|| rng::set_offset(id, offset))
}

#[no_mangle]
pub extern "C" fn foo_nondeterministic_seed() -> u64 {
    rng::nondeterministic_seed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_becomes_status() {
        assert_eq!(foo_debug_panic(), Status::Panic as i32);
        // SAFETY: foo_last_error returns a valid C string.
        let msg = unsafe { CStr::from_ptr(foo_last_error()) }
            .to_string_lossy()
            .into_owned();
        assert!(msg.contains("deliberate panic"), "{msg}");
    }

    #[test]
    fn errors_carry_messages() {
        assert_eq!(foo_set_device(99), Status::InvalidDevice as i32);
        // SAFETY: as above.
        let msg = unsafe { CStr::from_ptr(foo_last_error()) }
            .to_string_lossy()
            .into_owned();
        assert!(msg.contains("Invalid device index 99"), "{msg}");
    }
}
