//! Iteration layouts, the one place dims are coalesced: drop size-1 dims, order dims by the
//! output's memory order (or keep the logical order), merge dims that are contiguous in every
//! operand (`merge_dims`), walk the result row by row (`walk_rows`); and ndarray views over
//! raw device pointers (including zero strides from broadcasting and negative strides from flips).
//! [`Layout`] has a fixed operand count (the elementwise engine, reductions, scans); [`DynLayout`]
//! any number (indexing with a list of index tensors).

use crate::tensor::{Dims, Strides};
use ndarray::{ArrayViewD, ArrayViewMutD, Axis, IxDyn, ShapeBuilder};

/// Elements below which a kernel stays on the calling thread: the rayon hand-off costs more
/// than the work (per-op latency matters as much as throughput).
pub const GRAIN: usize = 1 << 15;

/// A shape with one stride vector per operand (operand 0 is the output), after coalescing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout<const N: usize> {
    pub shape: Dims,
    pub strides: [Strides; N],
}

impl<const N: usize> Layout<N> {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// True when every operand walks memory densely in the same order (one flat loop).
    pub fn is_flat_contiguous(&self) -> bool {
        self.shape.len() <= 1
            && self
                .strides
                .iter()
                .all(|s| s.first().map_or(true, |&x| x == 1))
    }
}

/// The non-trivial dims of `shape`, outer to inner, in TensorIterator's order: by operand 0's
/// stride magnitude; a dim with a zero (broadcast) stride in an operand is ambiguous for it and
/// the next operand decides; equal strides put the smaller size inside; dims nothing orders keep
/// their logical order. The order matters beyond speed: a reduction over an expanded tensor
/// (`x.expand(114, 5).prod()`) folds each row of distinct elements in turn, as the CPU does;
/// sorting the zero-stride dim innermost multiplied each element by itself 114 times first,
/// which overflows and underflows (inf * 0 = nan) where the CPU's product is 2e-25.
fn traversal_order(shape: &[usize], strides: &[&[isize]]) -> Dims {
    // Inner to outer while sorting, as TensorIterator's insertion sort (`reorder_dimensions`).
    let mut perm: Dims = (0..shape.len()).rev().filter(|&d| shape[d] != 1).collect();
    // True when `inner` belongs outside `outer`.
    let swap = |inner: usize, outer: usize| -> Option<bool> {
        for s in strides {
            let (a, b) = (s[inner].unsigned_abs(), s[outer].unsigned_abs());
            if a == 0 || b == 0 {
                continue;
            }
            if a != b {
                return Some(a > b);
            }
            if shape[inner] > shape[outer] {
                return Some(true);
            }
        }
        None
    };
    for i in 1..perm.len() {
        let mut d1 = i;
        for d0 in (0..i).rev() {
            match swap(perm[d0], perm[d1]) {
                Some(true) => {
                    perm.swap(d0, d1);
                    d1 = d0;
                }
                Some(false) => break,
                None => {}
            }
        }
    }
    perm.reverse();
    perm
}

/// Appends the dims `dims` (outer to inner) of `shape` to `out_shape`/`out_strides` (one stride
/// vector per operand), merging each into the previous one when the pair is contiguous for every
/// operand: the step every coalescing shares.
fn merge_dims(
    shape: &[usize],
    strides: &[&[isize]],
    dims: &[usize],
    out_shape: &mut Dims,
    out_strides: &mut [Strides],
) {
    for &d in dims {
        if let Some(&last_n) = out_shape.last() {
            // Merge the previous (outer) dim into this (inner) one when contiguous for everyone.
            let k = out_shape.len() - 1;
            let mergeable = out_strides
                .iter()
                .zip(strides)
                .all(|(o, s)| o[k] == s[d] * shape[d] as isize);
            if mergeable {
                out_shape[k] = last_n * shape[d];
                for (o, s) in out_strides.iter_mut().zip(strides) {
                    o[k] = s[d];
                }
                continue;
            }
        }
        out_shape.push(shape[d]);
        for (o, s) in out_strides.iter_mut().zip(strides) {
            o.push(s[d]);
        }
    }
}

/// Coalesces `shape` for `N` operands; operand 0 decides the traversal order (the next ones
/// where operand 0 broadcasts, see [`traversal_order`]).
pub fn coalesce<const N: usize>(shape: &[usize], strides: [&[isize]; N]) -> Layout<N> {
    let dims = traversal_order(shape, &strides);
    let mut l = Layout {
        shape: Dims::new(),
        strides: std::array::from_fn(|_| Strides::new()),
    };
    merge_dims(shape, &strides, &dims, &mut l.shape, &mut l.strides);
    l
}

/// A shape with one stride vector per operand (`strides[op][dim]`, in elements), for any number
/// of operands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DynLayout {
    pub shape: Dims,
    pub strides: Vec<Strides>,
}

impl DynLayout {
    /// Coalesced as [`coalesce`] does it (traversal order decided by operand 0).
    pub fn coalesce(shape: &[usize], strides: &[&[isize]]) -> Self {
        Self::merged(shape, strides, &traversal_order(shape, strides))
    }

    /// Drops size-1 dims and merges adjacent mergeable dims, keeping the logical (row-major)
    /// order: linear position `p` of the walk is the row-major position in `shape`.
    pub fn logical(shape: &[usize], strides: &[&[isize]]) -> Self {
        let dims: Dims = (0..shape.len()).filter(|&d| shape[d] != 1).collect();
        Self::merged(shape, strides, &dims)
    }

    fn merged(shape: &[usize], strides: &[&[isize]], dims: &[usize]) -> Self {
        let mut l = DynLayout {
            shape: Dims::new(),
            strides: vec![Strides::new(); strides.len()],
        };
        merge_dims(shape, strides, dims, &mut l.shape, &mut l.strides);
        l
    }

    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn operands(&self) -> usize {
        self.strides.len()
    }

    /// Stride of operand `op` along the innermost dim (0 for a 0-dim layout).
    pub fn inner_stride(&self, op: usize) -> isize {
        self.strides[op].last().copied().unwrap_or(0)
    }

    /// Calls `row(offsets, len, pos)` for every row of the linear range `start..end`:
    /// `offsets[op]` is operand op's element offset of the row's first element, `pos` its
    /// linear position. Stops early when `row` returns false.
    pub fn for_each_row(
        &self,
        start: usize,
        end: usize,
        row: &mut dyn FnMut(&[isize], usize, usize) -> bool,
    ) {
        let mut offsets = vec![0isize; self.operands()];
        walk_rows(&self.shape, &self.strides, start, end, &mut offsets, row);
    }
}

/// Calls `row(offsets, len)` for every row of the linear range `start..end` of `l`'s index
/// space: `offsets[k]` is operand k's element offset of the row's first element, and the row
/// runs `len` elements along the innermost dim.
pub fn for_each_row<const N: usize>(
    l: &Layout<N>,
    start: usize,
    end: usize,
    row: &mut dyn FnMut([isize; N], usize),
) {
    let mut offsets = [0isize; N];
    walk_rows(
        &l.shape,
        &l.strides,
        start,
        end,
        &mut offsets,
        |off, len, _| {
            row(off.try_into().expect("N offsets"), len);
            true
        },
    );
}

/// The row walk of every layout: `row(offsets, len, pos)` for every row of the linear range
/// `start..end` of `shape`'s index space, `offsets[k]` computed from `strides[k]` (as many as
/// `offsets` holds); stops when `row` returns false. The outer dims advance as an index counter.
#[inline(always)]
fn walk_rows(
    shape: &[usize],
    strides: &[Strides],
    start: usize,
    end: usize,
    offsets: &mut [isize],
    mut row: impl FnMut(&[isize], usize, usize) -> bool,
) {
    if start >= end {
        // Nothing to visit; the index split below would also divide by a zero-size dim (a
        // reduction of a [5, 0] tensor asks for its empty range of reduced elements).
        return;
    }
    let nd = shape.len();
    if nd == 0 {
        offsets.fill(0);
        row(offsets, 1, 0);
        return;
    }
    let inner = shape[nd - 1];
    // Multi-index of `start` (outer dims) and position within the row.
    let mut idx = vec![0usize; nd];
    let mut rem = start;
    for d in (0..nd).rev() {
        idx[d] = rem % shape[d];
        rem /= shape[d];
    }
    let mut pos = start;
    while pos < end {
        let len = (inner - idx[nd - 1]).min(end - pos);
        for (o, s) in offsets.iter_mut().zip(strides) {
            *o = idx.iter().zip(s).map(|(&i, &s)| i as isize * s).sum();
        }
        if !row(offsets, len, pos) {
            return;
        }
        pos += len;
        // Advance the counter by `len` (to the next row start, or past the end).
        idx[nd - 1] += len;
        let mut d = nd - 1;
        while d > 0 && idx[d] >= shape[d] {
            idx[d] = 0;
            idx[d - 1] += 1;
            d -= 1;
        }
    }
}

fn positive_layout(
    shape: &[usize],
    strides: &[isize],
    itemsize: usize,
) -> (isize, Vec<usize>, Vec<usize>) {
    // Byte offset from element 0 to the lowest-addressed element, and the absolute strides;
    // the dims that had negative strides are inverted again on the view.
    let mut offset = 0isize;
    let mut flipped = Vec::new();
    let mut abs = Vec::with_capacity(strides.len());
    for (d, (&n, &s)) in shape.iter().zip(strides).enumerate() {
        if s < 0 && n > 0 {
            offset += (n as isize - 1) * s * itemsize as isize;
            flipped.push(d);
        }
        abs.push(s.unsigned_abs());
    }
    (offset, abs, flipped)
}

/// A read-only ndarray view of `shape`/`strides` elements at `ptr`.
///
/// # Safety
/// Every element reachable through `shape`/`strides` from `ptr` must be readable memory of type
/// `T` that outlives `'a` and is not written through another path meanwhile.
pub unsafe fn view<'a, T>(ptr: *const T, shape: &[usize], strides: &[isize]) -> ArrayViewD<'a, T> {
    let (offset, abs, flipped) = positive_layout(shape, strides, std::mem::size_of::<T>());
    // SAFETY: `offset` moves to the lowest element of the described region (caller's contract).
    let base = unsafe { (ptr as *const u8).offset(offset) as *const T };
    // SAFETY: all strides are non-negative and in bounds by the caller's contract.
    let mut v = unsafe { ArrayViewD::from_shape_ptr(IxDyn(shape).strides(IxDyn(&abs)), base) };
    for d in flipped {
        v.invert_axis(Axis(d));
    }
    v
}

/// A mutable ndarray view; see [`view`]. The region must have no internal overlap.
///
/// # Safety
/// As [`view`], plus: writable, no two indices alias, no other live reference to the region.
pub unsafe fn view_mut<'a, T>(
    ptr: *mut T,
    shape: &[usize],
    strides: &[isize],
) -> ArrayViewMutD<'a, T> {
    let (offset, abs, flipped) = positive_layout(shape, strides, std::mem::size_of::<T>());
    // SAFETY: as in `view`.
    let base = unsafe { (ptr as *mut u8).offset(offset) as *mut T };
    // SAFETY: as in `view`; uniqueness is the caller's contract.
    let mut v = unsafe { ArrayViewMutD::from_shape_ptr(IxDyn(shape).strides(IxDyn(&abs)), base) };
    for d in flipped {
        v.invert_axis(Axis(d));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_collapses_to_one_dim() {
        let l = coalesce(&[2, 3, 4], [&[12, 4, 1], &[12, 4, 1]]);
        assert_eq!(l.shape[..], [24]);
        assert!(l.is_flat_contiguous());
    }

    #[test]
    fn transposed_input_keeps_two_dims() {
        let l = coalesce(&[3, 4], [&[4, 1], &[1, 3]]);
        assert_eq!(l.shape[..], [3, 4]);
        assert_eq!(l.strides[1][..], [1, 3]);
    }

    #[test]
    fn broadcast_and_unit_dims() {
        let l = coalesce(&[1, 5, 1, 6], [&[30, 6, 6, 1], &[0, 0, 0, 1]]);
        assert_eq!(l.shape[..], [5, 6]);
        assert_eq!(l.strides[1][..], [0, 1]);
    }

    #[test]
    fn broadcast_dims_keep_their_logical_place() {
        // An expanded input reduced whole: the zero-stride dim stays outside (TensorIterator
        // leaves dims it cannot order where they are), so each row of distinct elements is
        // folded in turn.
        let l = coalesce(&[114, 5], [&[0, 1]]);
        assert_eq!(
            (l.shape[..].to_vec(), l.strides[0][..].to_vec()),
            (vec![114, 5], vec![0, 1])
        );
        let l = coalesce(&[5, 114], [&[1, 0]]);
        assert_eq!(
            (l.shape[..].to_vec(), l.strides[0][..].to_vec()),
            (vec![5, 114], vec![1, 0])
        );
        // A later operand orders what operand 0 cannot.
        let l = coalesce(&[3, 4], [&[0, 0], &[1, 4]]);
        assert_eq!(l.shape[..], [4, 3]);
    }

    #[test]
    fn output_order_drives_traversal() {
        // Output is column-major: traversal goes along dim 0 innermost.
        let l = coalesce(&[3, 4], [&[1, 3], &[4, 1]]);
        assert_eq!(l.shape[..], [4, 3]);
        assert_eq!(l.strides[0][..], [3, 1]);
        assert_eq!(l.strides[1][..], [1, 4]);
    }

    #[test]
    fn logical_keeps_order() {
        // A transposed operand must not reorder the walk.
        let l = DynLayout::logical(&[2, 3], &[&[1, 2]]);
        assert_eq!(l.shape[..], [2, 3]);
        let mut seen = vec![];
        l.for_each_row(0, 6, &mut |o, len, _| {
            for t in 0..len as isize {
                seen.push(o[0] + t * l.inner_stride(0));
            }
            true
        });
        assert_eq!(seen, vec![0, 2, 4, 1, 3, 5]);
    }

    #[test]
    fn empty_range_of_an_empty_layout() {
        let l = Layout::<1> {
            shape: smallvec::smallvec![5, 0],
            strides: [smallvec::smallvec![0, 1]],
        };
        let mut rows = 0;
        for_each_row(&l, 0, 0, &mut |_, _| rows += 1);
        assert_eq!(rows, 0);
    }

    #[test]
    fn negative_strides_view() {
        let data = [0i32, 1, 2, 3, 4, 5];
        // A flipped 2x3 view: element [i][j] = data[5 - (3i + j)].
        // SAFETY: all indices stay within `data`.
        let v = unsafe { view(data.as_ptr().add(5), &[2, 3], &[-3, -1]) };
        assert_eq!(
            v.iter().copied().collect::<Vec<_>>(),
            vec![5, 4, 3, 2, 1, 0]
        );
    }
}
