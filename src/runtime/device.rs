//! Devices: how many there are (`FOO_RS_DEVICE_COUNT`, default 2) and the calling thread's
//! current device, like CUDA's per-thread current device.

use crate::error::{FooError, FooResult};
use std::cell::Cell;
use std::sync::OnceLock;

pub const DEFAULT_DEVICE_COUNT: usize = 2;
/// c10::DeviceIndex is an int8; stay well inside it.
pub const MAX_DEVICE_COUNT: usize = 64;

static DEVICE_COUNT: OnceLock<usize> = OnceLock::new();

thread_local! {
    static CURRENT: Cell<usize> = const { Cell::new(0) };
}

/// Parses `FOO_RS_DEVICE_COUNT`; an unusable value falls back to the default (reported by
/// `python -m foo_rs info`, never a crash at import).
pub fn parse_device_count(value: Option<&str>) -> usize {
    match value.map(str::trim).and_then(|v| v.parse::<usize>().ok()) {
        Some(n) if n <= MAX_DEVICE_COUNT => n,
        _ => DEFAULT_DEVICE_COUNT,
    }
}

pub fn device_count() -> usize {
    *DEVICE_COUNT
        .get_or_init(|| parse_device_count(std::env::var("FOO_RS_DEVICE_COUNT").ok().as_deref()))
}

pub fn check_device(index: i64) -> FooResult<usize> {
    let n = device_count();
    if index < 0 || index as usize >= n {
        return Err(FooError::InvalidDevice(format!(
            "Invalid device index {index}: foo has {n} device(s) (foo:0 .. foo:{}); set FOO_RS_DEVICE_COUNT to change",
            n as i64 - 1
        )));
    }
    Ok(index as usize)
}

pub fn current_device() -> usize {
    CURRENT.with(|c| c.get())
}

pub fn set_device(index: i64) -> FooResult<()> {
    let d = check_device(index)?;
    CURRENT.with(|c| c.set(d));
    Ok(())
}

/// Sets the current device and returns the previous one.
pub fn exchange_device(index: i64) -> FooResult<usize> {
    let d = check_device(index)?;
    Ok(CURRENT.with(|c| c.replace(d)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_count() {
        assert_eq!(parse_device_count(None), 2);
        assert_eq!(parse_device_count(Some("4")), 4);
        assert_eq!(parse_device_count(Some(" 1 ")), 1);
        assert_eq!(parse_device_count(Some("lots")), 2);
        assert_eq!(parse_device_count(Some("1000")), 2);
    }

    #[test]
    fn current_device_is_per_thread() {
        set_device(1).unwrap();
        assert_eq!(current_device(), 1);
        std::thread::spawn(|| assert_eq!(current_device(), 0))
            .join()
            .unwrap();
        assert_eq!(exchange_device(0).unwrap(), 1);
        assert!(set_device(99).is_err());
        assert!(set_device(-1).is_err());
    }
}
