//! Iteration helpers of the index family: index bounds checking and deterministic error
//! reporting from parallel chunks (layouts with any number of operands are
//! [`crate::kernels::core::layout::DynLayout`]).

use crate::error::{FooError, FooResult};
use std::sync::Mutex;

/// The out-of-range modes the glue passes as `mode` to `foo_index_gather`/`foo_index_scatter`:
/// `allow_negative | style << 1` (`Bounds::from_code`), each with ATen's CPU message.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoundsMode {
    /// Negatives are errors; "index 5 is out of bounds for dimension 0 with size 3" (gather,
    /// scatter, index_add, index_copy).
    Strict = 0,
    /// Negatives wrap; the same message as `Strict`.
    Index = 1,
    /// Negatives are errors; "index out of range in self" (index_select).
    Select = 2,
    /// Negatives wrap; "out of range: tried to access index 15 on a tensor of 12 elements." (take)
    Take = 5,
}

/// How out-of-range indices are treated and reported (encoded across the C ABI as
/// `allow_negative | style << 1`, named by [`BoundsMode`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Negative indices count from the end (Python style); otherwise they are errors.
    pub allow_negative: bool,
    pub style: Style,
}

/// The wording of an out-of-range error (each matches an ATen CPU message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// "index 5 is out of bounds for dimension 0 with size 3"
    Dim = 0,
    /// "index out of range in self" (index_select)
    Select = 1,
    /// "out of range: tried to access index 15 on a tensor of 12 elements." (take)
    Take = 2,
}

impl Bounds {
    pub fn from_code(code: i32) -> FooResult<Bounds> {
        let style = match code >> 1 {
            0 => Style::Dim,
            1 => Style::Select,
            2 => Style::Take,
            _ => return crate::invalid_arg!("unknown index bounds mode {code}"),
        };
        Ok(Bounds {
            allow_negative: code & 1 != 0,
            style,
        })
    }

    /// The in-range, non-negative form of index `v` into a dim of `size`, or the error message.
    #[inline(always)]
    pub fn normalize(self, v: i64, size: i64, dim: i64) -> Result<i64, String> {
        if v >= 0 && v < size {
            return Ok(v);
        }
        if self.allow_negative && v < 0 && v >= -size {
            return Ok(v + size);
        }
        Err(self.message(v, size, dim))
    }

    #[cold]
    fn message(self, v: i64, size: i64, dim: i64) -> String {
        match self.style {
            Style::Dim => {
                format!("index {v} is out of bounds for dimension {dim} with size {size}")
            }
            Style::Select => "index out of range in self".to_string(),
            Style::Take => {
                format!("out of range: tried to access index {v} on a tensor of {size} elements.")
            }
        }
    }
}

/// The first error of a parallel kernel by linear position (deterministic whatever the
/// chunking): each chunk stops at its first error and the smallest position wins.
#[derive(Default)]
pub struct FirstError(Mutex<Option<(usize, String)>>);

impl FirstError {
    pub fn record(&self, pos: usize, msg: String) {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let earlier = match g.as_ref() {
            None => true,
            Some((p, _)) => pos < *p,
        };
        if earlier {
            *g = Some((pos, msg));
        }
    }

    pub fn into_result(self) -> FooResult<()> {
        match self.0.into_inner().unwrap_or_else(|e| e.into_inner()) {
            None => Ok(()),
            Some((_, msg)) => Err(FooError::InvalidArgument(msg)),
        }
    }
}

/// Multi-index of row-major linear position `p` in `shape`, written into `coords`.
pub fn unravel(mut p: usize, shape: &[usize], coords: &mut [i64]) {
    for d in (0..shape.len()).rev() {
        let n = shape[d].max(1);
        coords[d] = (p % n) as i64;
        p /= n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_modes_decode() {
        for (mode, style, neg) in [
            (BoundsMode::Strict, Style::Dim, false),
            (BoundsMode::Index, Style::Dim, true),
            (BoundsMode::Select, Style::Select, false),
            (BoundsMode::Take, Style::Take, true),
        ] {
            let b = Bounds::from_code(mode as i32).unwrap();
            assert_eq!((b.style, b.allow_negative), (style, neg), "{mode:?}");
        }
    }

    #[test]
    fn bounds_messages() {
        let b = Bounds::from_code(1).unwrap();
        assert_eq!(b.normalize(-1, 3, 0), Ok(2));
        assert_eq!(
            b.normalize(5, 3, 1).unwrap_err(),
            "index 5 is out of bounds for dimension 1 with size 3"
        );
        let s = Bounds::from_code(2).unwrap();
        assert_eq!(
            s.normalize(-1, 3, 0).unwrap_err(),
            "index out of range in self"
        );
    }

    #[test]
    fn first_error_is_smallest() {
        let e = FirstError::default();
        e.record(10, "b".into());
        e.record(3, "a".into());
        e.record(7, "c".into());
        assert_eq!(e.into_result(), Err(FooError::InvalidArgument("a".into())));
    }
}
