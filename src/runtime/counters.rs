//! Which ops ran natively and which went through the CPU fallback, and strict mode.
//!
//! Native kernels register their op name once (getting a slot) and bump an atomic counter per
//! call; the fallback records its op by name and learns whether this is the first time (to
//! warn once) or whether strict mode (`FOO_RS_STRICT=1`) forbids it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

#[derive(Default)]
struct Counters {
    native_names: Vec<String>,
    native_counts: Vec<&'static AtomicU64>,
    fallback: BTreeMap<String, u64>,
}

fn counters() -> MutexGuard<'static, Counters> {
    static C: OnceLock<Mutex<Counters>> = OnceLock::new();
    C.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Returns the counter for a native op (same counter for the same name).
pub fn native_slot(name: &str) -> &'static AtomicU64 {
    let mut c = counters();
    if let Some(i) = c.native_names.iter().position(|n| n == name) {
        return c.native_counts[i];
    }
    // Slots live for the whole process (one per registered op name): leaking is the point.
    let slot: &'static AtomicU64 = Box::leak(Box::new(AtomicU64::new(0)));
    c.native_names.push(name.to_string());
    c.native_counts.push(slot);
    slot
}

/// Records one fallback call; returns true if it is this op's first since the last reset.
pub fn record_fallback(name: &str) -> bool {
    let mut c = counters();
    let n = c.fallback.entry(name.to_string()).or_insert(0);
    *n += 1;
    *n == 1
}

pub fn fallback_counts() -> BTreeMap<String, u64> {
    counters().fallback.clone()
}

/// Native ops that ran at least once since the last reset, with their call counts.
pub fn native_counts() -> BTreeMap<String, u64> {
    let c = counters();
    c.native_names
        .iter()
        .zip(&c.native_counts)
        .map(|(n, k)| (n.clone(), k.load(Ordering::Relaxed)))
        .filter(|(_, k)| *k > 0)
        .collect()
}

/// Names of every op with a native kernel registered (ran or not).
pub fn native_ops() -> Vec<String> {
    let mut v = counters().native_names.clone();
    v.sort();
    v
}

pub fn reset() {
    let mut c = counters();
    c.fallback.clear();
    for k in &c.native_counts {
        k.store(0, Ordering::Relaxed);
    }
}

static STRICT_OVERRIDE: AtomicBool = AtomicBool::new(false);
static STRICT_OVERRIDE_SET: AtomicBool = AtomicBool::new(false);

/// Strict mode: `FOO_RS_STRICT=1` in the environment (read at each fallback call, so a test can
/// set it), unless overridden through `set_strict`.
pub fn strict() -> bool {
    if STRICT_OVERRIDE_SET.load(Ordering::Relaxed) {
        return STRICT_OVERRIDE.load(Ordering::Relaxed);
    }
    matches!(
        std::env::var("FOO_RS_STRICT").as_deref().map(str::trim),
        Ok("1") | Ok("true") | Ok("yes")
    )
}

/// `Some(b)` forces strict mode on/off; `None` goes back to the environment variable.
pub fn set_strict(value: Option<bool>) {
    if let Some(b) = value {
        STRICT_OVERRIDE.store(b, Ordering::Relaxed);
    }
    STRICT_OVERRIDE_SET.store(value.is_some(), Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts() {
        let a = native_slot("test_op.a");
        assert!(std::ptr::eq(a, native_slot("test_op.a")));
        a.fetch_add(2, Ordering::Relaxed);
        assert_eq!(native_counts().get("test_op.a"), Some(&2));
        assert!(record_fallback("test_fallback.x"));
        assert!(!record_fallback("test_fallback.x"));
        assert_eq!(fallback_counts().get("test_fallback.x"), Some(&2));
        set_strict(Some(true));
        assert!(strict());
        set_strict(None);
    }
}
