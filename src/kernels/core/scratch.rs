//! Host scratch buffers kept by each thread between kernels. A kernel's temporary matrix (an
//! im2col column matrix, a transposed operand, a weight-gradient accumulator) allocated afresh
//! on every call costs more than it looks: a buffer above glibc's mmap threshold comes back as
//! fresh pages, one fault and one zeroing per 4 KiB (~0.25 us each), and `vec![0; n]` zeroes it
//! again. resnet18's training step spent 6% of its time there. Buffers up to [`KEEP_BYTES`]
//! each, [`KEEP_TOTAL`] in all, stay with their thread for the next call.
//!
//! A buffer's contents on entry are whatever its last user left: callers write every element
//! before they read it.

use super::gemm::GemmElem;
use std::cell::RefCell;

/// Buffers larger than this are freed after use.
pub const KEEP_BYTES: usize = 16 << 20;
/// At most this many bytes of kept buffers per thread.
const KEEP_TOTAL: usize = 48 << 20;

thread_local! {
    static KEPT: RefCell<Vec<Vec<u64>>> = const { RefCell::new(Vec::new()) };
}

/// A buffer of at least `words` 8-byte words: the smallest kept one that is large enough, else
/// a new one.
fn take(words: usize) -> Vec<u64> {
    let kept = KEPT.with(|k| {
        let mut k = k.borrow_mut();
        let best = (0..k.len())
            .filter(|&i| k[i].len() >= words)
            .min_by_key(|&i| k[i].len());
        best.map(|i| k.swap_remove(i))
    });
    kept.unwrap_or_else(|| vec![0u64; words])
}

/// Keeps `buf` for the next call on this thread if it is small enough, dropping the smallest
/// kept buffers when the total would pass [`KEEP_TOTAL`].
fn give_back(buf: Vec<u64>) {
    if buf.len() * 8 > KEEP_BYTES {
        return;
    }
    KEPT.with(|k| {
        let mut k = k.borrow_mut();
        k.push(buf);
        k.sort_by_key(|b| std::cmp::Reverse(b.len()));
        let mut total = 0;
        k.retain(|b| {
            total += b.len() * 8;
            total <= KEEP_TOTAL
        });
    });
}

/// Calls `f` with a scratch slice of `len` elements of `T` (contents unspecified: see the
/// module's notes). Nested calls get buffers of their own.
pub fn with_scratch<T: GemmElem, R>(len: usize, f: impl FnOnce(&mut [T]) -> R) -> R {
    const { assert!(std::mem::align_of::<T>() <= 8) };
    let words = (len * std::mem::size_of::<T>()).div_ceil(8);
    let mut buf = take(words);
    // SAFETY: `buf` holds at least `len` elements of T (8-byte words, T aligned to at most 8);
    // its bytes are initialized (u64s), and every bit pattern is a valid T (GemmElem: real
    // and complex floats).
    let s = unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr() as *mut T, len) };
    let out = f(s);
    give_back(buf);
    out
}

/// [`with_scratch`] with two buffers.
pub fn with_scratch2<A: GemmElem, B: GemmElem, R>(
    a: usize,
    b: usize,
    f: impl FnOnce(&mut [A], &mut [B]) -> R,
) -> R {
    with_scratch(a, |x| with_scratch(b, |y| f(x, y)))
}

/// A scratch buffer owned by a value rather than a closure (a temporary tensor that a function
/// returns with its view), given back to its thread's kept buffers when dropped. Drop it on the
/// thread that made it (a kept buffer on another thread's list is only a misplaced one).
pub struct KeptBuffer(Vec<u64>);

impl KeptBuffer {
    /// At least `bytes` bytes, contents unspecified (see the module's notes).
    pub fn new(bytes: usize) -> Self {
        KeptBuffer(take(bytes.div_ceil(8)))
    }

    /// No buffer (nothing to give back).
    pub fn none() -> Self {
        KeptBuffer(Vec::new())
    }

    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.0.as_mut_ptr().cast()
    }

    pub fn as_ptr(&self) -> *const u8 {
        self.0.as_ptr().cast()
    }
}

impl Drop for KeptBuffer {
    fn drop(&mut self) {
        if !self.0.is_empty() {
            give_back(std::mem::take(&mut self.0));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_reused_and_nested_calls_get_their_own() {
        let p1 = with_scratch::<f32, _>(1000, |s| {
            s.fill(1.0);
            s.as_ptr() as usize
        });
        // The same thread gets the kept buffer back.
        let p2 = with_scratch::<f32, _>(500, |s| s.as_ptr() as usize);
        assert_eq!(p1, p2);
        with_scratch2::<f64, f32, _>(300, 7, |a, b| {
            a.fill(2.0);
            b.fill(3.0);
            assert!(a.iter().all(|&v| v == 2.0) && b.iter().all(|&v| v == 3.0));
            assert_ne!(a.as_ptr() as usize, b.as_ptr() as usize);
        });
    }

    #[test]
    fn kept_buffers_come_back_when_dropped() {
        let mut a = KeptBuffer::new(4000);
        let p = a.as_mut_ptr() as usize;
        drop(a);
        let p2 = with_scratch::<f64, _>(375, |s| s.as_ptr() as usize);
        assert_eq!(p, p2);
    }

    #[test]
    fn large_buffers_are_not_kept() {
        let words = KEEP_BYTES / 8 + 1;
        with_scratch::<f64, _>(words, |s| s[words - 1] = 1.0);
        KEPT.with(|k| assert!(k.borrow().iter().all(|b| b.len() * 8 <= KEEP_BYTES)));
    }
}
