//! Devices: how many there are (`FOO_RS_DEVICE_COUNT`, default 2) and the calling thread's
//! current device, like CUDA's per-thread current device.

use crate::error::{FooError, FooResult};
use std::cell::Cell;
use std::sync::OnceLock;

pub const DEFAULT_DEVICE_COUNT: usize = 2;
/// c10::DeviceIndex is an int8; stay well inside it.
pub const MAX_DEVICE_COUNT: usize = 64;

/// The parsed `FOO_RS_DEVICE_COUNT`, or why it is unusable.
static DEVICE_COUNT: OnceLock<Result<usize, String>> = OnceLock::new();

thread_local! {
    static CURRENT: Cell<usize> = const { Cell::new(0) };
}

/// Parses `FOO_RS_DEVICE_COUNT` (unset or blank: the default): a whole number up to
/// [`MAX_DEVICE_COUNT`], else the reason it is not one.
pub fn parse_device_count(value: Option<&str>) -> Result<usize, String> {
    let Some(text) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(DEFAULT_DEVICE_COUNT);
    };
    match text.parse::<usize>() {
        Ok(n) if n <= MAX_DEVICE_COUNT => Ok(n),
        _ => Err(format!(
            "FOO_RS_DEVICE_COUNT: \"{text}\" is not a device count (a whole number from 0 to \
             {MAX_DEVICE_COUNT}; unset for the default {DEFAULT_DEVICE_COUNT})"
        )),
    }
}

fn configured() -> &'static Result<usize, String> {
    DEVICE_COUNT
        .get_or_init(|| parse_device_count(std::env::var("FOO_RS_DEVICE_COUNT").ok().as_deref()))
}

/// Why `FOO_RS_DEVICE_COUNT` is unusable, if it is: every device access reports it (like a bad
/// `FOO_RS_MEMORY_LIMIT`), never a crash at import, which `import torch` reaches through the
/// backend autoload.
pub fn device_count_error() -> Option<&'static str> {
    configured().as_ref().err().map(String::as_str)
}

/// Number of devices. With an unusable `FOO_RS_DEVICE_COUNT` this is the default, so that
/// torch's own queries (the hooks interface) keep working; [`check_device`] refuses every
/// device then.
pub fn device_count() -> usize {
    configured().clone().unwrap_or(DEFAULT_DEVICE_COUNT)
}

pub fn check_device(index: i64) -> FooResult<usize> {
    if let Some(e) = device_count_error() {
        return Err(FooError::InvalidArgument(e.to_string()));
    }
    let n = device_count();
    if n == 0 {
        return Err(FooError::InvalidDevice(format!(
            "Invalid device index {index}: foo has no devices (FOO_RS_DEVICE_COUNT=0)"
        )));
    }
    if index < 0 || index as usize >= n {
        return Err(FooError::InvalidDevice(format!(
            "Invalid device index {index}: foo has {n} device(s) (foo:0 .. foo:{}); set FOO_RS_DEVICE_COUNT to change",
            n - 1
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
        assert_eq!(parse_device_count(None), Ok(2));
        assert_eq!(parse_device_count(Some("  ")), Ok(2));
        assert_eq!(parse_device_count(Some("4")), Ok(4));
        assert_eq!(parse_device_count(Some(" 1 ")), Ok(1));
        assert_eq!(parse_device_count(Some("0")), Ok(0));
        for bad in ["lots", "1000", "-1", "1.5", "65"] {
            let e = parse_device_count(Some(bad)).unwrap_err();
            assert!(e.contains(bad) && e.contains("not a device count"), "{e}");
        }
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
