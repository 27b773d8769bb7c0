//! `foo_rs._C`: runtime services Python reaches directly (not ATen ops): devices, memory
//! statistics and limits, generator state, op accounting, build information.
//! The C++ glue linked into the same library registers the ATen kernels when it is loaded.

use crate::dtype::DType;
use crate::error::FooError;
use crate::runtime::memory::{MemoryStats, StatArray};
use crate::runtime::{counters, cpu, device, memory, pool, rng};
use pyo3::exceptions::{PyNotImplementedError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use std::collections::BTreeMap;

fn py_err(e: FooError) -> PyErr {
    match e {
        FooError::InvalidArgument(m) => PyValueError::new_err(m),
        FooError::NotImplemented(m) | FooError::Unsupported(m) => PyNotImplementedError::new_err(m),
        other => PyRuntimeError::new_err(other.message().to_string()),
    }
}

type R<T> = PyResult<T>;

#[pyfunction]
fn device_count() -> usize {
    device::device_count()
}

/// Why `FOO_RS_DEVICE_COUNT` is unusable, or None.
#[pyfunction]
fn device_count_error() -> Option<&'static str> {
    device::device_count_error()
}

#[pyfunction]
fn current_device() -> usize {
    device::current_device()
}

#[pyfunction]
fn set_device(index: i64) -> R<()> {
    device::set_device(index).map_err(py_err)
}

/// Validates a device index and returns it.
#[pyfunction]
fn check_device(index: i64) -> R<usize> {
    device::check_device(index).map_err(py_err)
}

fn flatten(out: &mut BTreeMap<String, i64>, name: &str, a: &StatArray) {
    for (pool, s) in [
        ("all", &a.all),
        ("small_pool", &a.small),
        ("large_pool", &a.large),
    ] {
        for (metric, v) in [
            ("current", s.current),
            ("peak", s.peak),
            ("allocated", s.allocated),
            ("freed", s.freed),
        ] {
            out.insert(format!("{name}.{pool}.{metric}"), v);
        }
    }
}

/// Statistics in `torch.cuda.memory_stats()`'s flat "name.pool.metric" shape.
#[pyfunction]
fn memory_stats(device: i64) -> R<BTreeMap<String, i64>> {
    let s: MemoryStats = memory::stats(device).map_err(py_err)?;
    let mut out = BTreeMap::new();
    flatten(&mut out, "allocation", &s.allocation);
    flatten(&mut out, "segment", &s.segment);
    flatten(&mut out, "active", &s.active);
    flatten(&mut out, "allocated_bytes", &s.allocated_bytes);
    flatten(&mut out, "reserved_bytes", &s.reserved_bytes);
    flatten(&mut out, "active_bytes", &s.active_bytes);
    flatten(&mut out, "requested_bytes", &s.requested_bytes);
    out.insert("num_alloc_retries".into(), s.num_alloc_retries);
    out.insert("num_ooms".into(), s.num_ooms);
    out.insert("num_device_alloc".into(), s.num_device_alloc);
    out.insert("num_device_free".into(), s.num_device_free);
    Ok(out)
}

/// The pinned-host allocator's statistics in `torch.cuda.host_memory_stats()`'s flat
/// "name.metric" shape (the counts without a metric: "num_host_alloc", "num_host_free").
#[pyfunction]
fn host_memory_stats() -> BTreeMap<String, i64> {
    let s = memory::host_stats();
    let mut out = BTreeMap::new();
    for (name, st) in [
        ("allocations", &s.allocations),
        ("allocated_bytes", &s.allocated_bytes),
        ("active_requests", &s.active_requests),
        ("active_bytes", &s.active_bytes),
    ] {
        for (metric, v) in [
            ("current", st.current),
            ("peak", st.peak),
            ("allocated", st.allocated),
            ("freed", st.freed),
        ] {
            out.insert(format!("{name}.{metric}"), v);
        }
    }
    for (name, d) in [
        ("host_alloc_time", &s.alloc_time),
        ("host_free_time", &s.free_time),
    ] {
        let avg = if d.count > 0 { d.total / d.count } else { 0 };
        for (metric, v) in [
            ("total", d.total),
            ("max", d.max),
            ("min", d.min),
            ("count", d.count),
            ("avg", avg),
        ] {
            out.insert(format!("{name}.{metric}"), v);
        }
    }
    out.insert("num_host_alloc".into(), s.allocations.allocated);
    out.insert("num_host_free".into(), s.allocations.freed);
    out
}

#[pyfunction]
fn create_mem_pool() -> u64 {
    memory::create_pool()
}

#[pyfunction]
fn begin_allocate_to_pool(device: i64, id: u64) -> R<()> {
    memory::begin_allocate_to_pool(device, id).map_err(py_err)
}

#[pyfunction]
fn end_allocate_to_pool(id: u64) -> R<()> {
    memory::end_allocate_to_pool(id).map_err(py_err)
}

#[pyfunction]
fn release_mem_pool(id: u64) {
    memory::release_pool(id)
}

/// (addresses of the pool's blocks, live and cached; how many are live).
#[pyfunction]
fn mem_pool_blocks(id: u64) -> R<(Vec<usize>, usize)> {
    memory::pool_blocks(id).map_err(py_err)
}

#[pyfunction]
fn reset_peak_host_memory_stats() {
    memory::reset_peak_host_stats()
}

#[pyfunction]
fn reset_accumulated_host_memory_stats() {
    memory::reset_accumulated_host_stats()
}

#[pyfunction]
#[pyo3(signature = (device=None))]
fn empty_cache(device: Option<i64>) -> R<()> {
    memory::empty_cache(device).map_err(py_err)
}

#[pyfunction]
fn reset_peak_memory_stats(device: i64) -> R<()> {
    memory::reset_peak_stats(device).map_err(py_err)
}

#[pyfunction]
fn reset_accumulated_memory_stats(device: i64) -> R<()> {
    memory::reset_accumulated_stats(device).map_err(py_err)
}

/// Limits the bytes a device may reserve (`None` removes the limit); all devices if `device` is None.
#[pyfunction]
#[pyo3(signature = (limit, device=None))]
fn set_memory_limit(limit: Option<usize>, device: Option<i64>) -> R<()> {
    memory::set_memory_limit(device, limit.filter(|&l| l > 0)).map_err(py_err)
}

#[pyfunction]
fn memory_limit(device: i64) -> R<Option<usize>> {
    memory::memory_limit(device).map_err(py_err)
}

#[pyfunction]
fn total_memory(device: i64) -> R<usize> {
    memory::total_memory(device).map_err(py_err)
}

/// Parses a size like "512M" or "2GiB" the way FOO_RS_MEMORY_LIMIT is parsed.
#[pyfunction]
fn parse_size(text: &str) -> R<usize> {
    memory::parse_size(text).map_err(PyValueError::new_err)
}

#[pyfunction]
fn live_blocks() -> usize {
    memory::live_blocks()
}

#[pyfunction]
fn fallback_counts() -> BTreeMap<String, u64> {
    counters::fallback_counts()
}

#[pyfunction]
fn native_counts() -> BTreeMap<String, u64> {
    counters::native_counts()
}

#[pyfunction]
fn reset_op_counts() {
    counters::reset()
}

#[pyfunction]
#[pyo3(signature = (value))]
fn set_strict(value: Option<bool>) {
    counters::set_strict(value)
}

#[pyfunction]
fn is_strict() -> bool {
    counters::strict()
}

#[pyfunction]
fn default_generator_id(device: i64) -> R<u64> {
    rng::default_generator(device).map_err(py_err)
}

#[pyfunction]
fn generator_manual_seed(id: u64, seed: u64) -> R<()> {
    rng::manual_seed(id, seed).map_err(py_err)
}

#[pyfunction]
fn generator_initial_seed(id: u64) -> R<u64> {
    Ok(rng::state(id).map_err(py_err)?.seed)
}

#[pyfunction]
fn generator_get_state<'py>(py: Python<'py>, id: u64) -> R<Bound<'py, PyBytes>> {
    let bytes = rng::get_state_bytes(id).map_err(py_err)?;
    Ok(PyBytes::new(py, &bytes))
}

#[pyfunction]
fn generator_set_state(id: u64, state: &[u8]) -> R<()> {
    rng::set_state_bytes(id, state).map_err(py_err)
}

#[pyfunction]
fn nondeterministic_seed() -> u64 {
    rng::nondeterministic_seed()
}

/// (parallel regions of compiled foo kernels run, those that got more than one thread).
#[pyfunction]
fn team_region_counts() -> (u64, u64) {
    crate::runtime::team::region_counts()
}

#[pyfunction]
fn num_threads() -> usize {
    pool::num_threads()
}

/// Why FOO_RS_NUM_THREADS / RAYON_NUM_THREADS was ignored or clamped, or None.
#[pyfunction]
fn thread_setting_note() -> Option<&'static str> {
    pool::thread_setting_note()
}

/// The host's physical memory in bytes (what a device without a limit may hold).
#[pyfunction]
fn host_memory() -> usize {
    memory::host_ram()
}

/// (name, present) for each CPU extension the kernels dispatch on.
#[pyfunction]
fn cpu_features() -> Vec<(&'static str, bool)> {
    cpu::kernel_features()
}

/// The x86-64 psABI level (1-4) the host satisfies; 0 off x86-64.
#[pyfunction]
fn x86_64_level() -> u32 {
    cpu::x86_64_level()
}

/// Whether the kernels have bfloat16 instructions (AVX512-BF16) on this host.
#[pyfunction]
fn native_bf16() -> bool {
    cpu::native_bf16()
}

#[pyfunction]
fn cpu_model_name() -> Option<String> {
    cpu::model_name()
}

extern "C" {
    /// src/glue/distributed.cpp: a new reference to the `foo_rs._C._distributed` module, or null
    /// with the Python error set.
    fn foo_glue_distributed_module() -> *mut pyo3::ffi::PyObject;
}

extern "C" {
    /// src/glue/inductor_alloc.cpp: a new reference to `_empty_strided`, a C function object,
    /// or null with the Python error set.
    fn foo_glue_empty_strided_function() -> *mut pyo3::ffi::PyObject;
}

/// `foo_rs._C._distributed` (the c10d backend, a pybind11 class made by the glue). Built on
/// first use, once torch.distributed is imported: its base class is torch's `Backend`.
#[pyfunction]
fn distributed_module(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    // SAFETY: the glue function runs with the GIL held (we hold `py`) and returns an owned
    // reference or null with an exception set, which `from_owned_ptr_or_err` takes either way.
    unsafe { Bound::from_owned_ptr_or_err(py, foo_glue_distributed_module()) }
}

#[pymodule]
#[pyo3(name = "_C")]
fn foo_rs_c(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("TORCH_BUILD_VERSION", env!("FOO_RS_TORCH_VERSION"))?;
    m.add("RNG_STATE_BYTES", rng::STATE_BYTES)?;
    m.add("DEFAULT_SEED", rng::DEFAULT_SEED)?;
    let dtype_names: Vec<&str> = DType::ALL.iter().map(|d| d.name()).collect();
    m.add("SUPPORTED_DTYPE_NAMES", PyTuple::new(m.py(), dtype_names)?)?;
    // SAFETY: the module is being initialized with the GIL held; the glue returns an owned
    // reference or null with an exception set.
    let empty_strided =
        unsafe { Bound::from_owned_ptr_or_err(m.py(), foo_glue_empty_strided_function()) }?;
    m.add("_empty_strided", empty_strided)?;
    m.add_function(wrap_pyfunction!(device_count, m)?)?;
    m.add_function(wrap_pyfunction!(device_count_error, m)?)?;
    m.add_function(wrap_pyfunction!(current_device, m)?)?;
    m.add_function(wrap_pyfunction!(set_device, m)?)?;
    m.add_function(wrap_pyfunction!(check_device, m)?)?;
    m.add_function(wrap_pyfunction!(host_memory_stats, m)?)?;
    m.add_function(wrap_pyfunction!(create_mem_pool, m)?)?;
    m.add_function(wrap_pyfunction!(begin_allocate_to_pool, m)?)?;
    m.add_function(wrap_pyfunction!(end_allocate_to_pool, m)?)?;
    m.add_function(wrap_pyfunction!(release_mem_pool, m)?)?;
    m.add_function(wrap_pyfunction!(mem_pool_blocks, m)?)?;
    m.add_function(wrap_pyfunction!(reset_peak_host_memory_stats, m)?)?;
    m.add_function(wrap_pyfunction!(reset_accumulated_host_memory_stats, m)?)?;
    m.add_function(wrap_pyfunction!(memory_stats, m)?)?;
    m.add_function(wrap_pyfunction!(empty_cache, m)?)?;
    m.add_function(wrap_pyfunction!(reset_peak_memory_stats, m)?)?;
    m.add_function(wrap_pyfunction!(reset_accumulated_memory_stats, m)?)?;
    m.add_function(wrap_pyfunction!(set_memory_limit, m)?)?;
    m.add_function(wrap_pyfunction!(memory_limit, m)?)?;
    m.add_function(wrap_pyfunction!(total_memory, m)?)?;
    m.add_function(wrap_pyfunction!(parse_size, m)?)?;
    m.add_function(wrap_pyfunction!(live_blocks, m)?)?;
    m.add_function(wrap_pyfunction!(fallback_counts, m)?)?;
    m.add_function(wrap_pyfunction!(native_counts, m)?)?;
    m.add_function(wrap_pyfunction!(reset_op_counts, m)?)?;
    m.add_function(wrap_pyfunction!(set_strict, m)?)?;
    m.add_function(wrap_pyfunction!(is_strict, m)?)?;
    m.add_function(wrap_pyfunction!(default_generator_id, m)?)?;
    m.add_function(wrap_pyfunction!(generator_manual_seed, m)?)?;
    m.add_function(wrap_pyfunction!(generator_initial_seed, m)?)?;
    m.add_function(wrap_pyfunction!(generator_get_state, m)?)?;
    m.add_function(wrap_pyfunction!(generator_set_state, m)?)?;
    m.add_function(wrap_pyfunction!(nondeterministic_seed, m)?)?;
    m.add_function(wrap_pyfunction!(num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(team_region_counts, m)?)?;
    m.add_function(wrap_pyfunction!(thread_setting_note, m)?)?;
    m.add_function(wrap_pyfunction!(host_memory, m)?)?;
    m.add_function(wrap_pyfunction!(cpu_features, m)?)?;
    m.add_function(wrap_pyfunction!(x86_64_level, m)?)?;
    m.add_function(wrap_pyfunction!(native_bf16, m)?)?;
    m.add_function(wrap_pyfunction!(cpu_model_name, m)?)?;
    m.add_function(wrap_pyfunction!(distributed_module, m)?)?;
    Ok(())
}
