//! Elementwise ops with a transposed operand (`a + b.t()`, `b.t().contiguous()`): the row walk
//! of [`super::map`] reads such an operand one element per cache line, and a 1000-wide matrix
//! needs its whole 1000-line column set to stay in cache between rows. Here the 2-D index space
//! is cut into tiles of [`TILE_ROWS`] rows: a transposed operand's tile is first gathered into
//! a dense buffer, reading whole cache lines along its own rows, and then every row of the tile
//! is an ordinary dense row for the op's vectorized inner loop.
//!
//! The driver moves bytes by element size, so it is compiled once per operand count, not once
//! per op and dtype.

use super::layout::{Layout, GRAIN};
use super::parallel::{parallel_for, SendPtr};
#[cfg(target_arch = "x86_64")]
use super::transpose::{avx2, transpose4x4_64, transpose8x8_32};
use std::mem::MaybeUninit;

/// Rows per tile: 16 consecutive elements of a transposed 4-byte operand are one 64-byte line.
pub const TILE_ROWS: usize = 16;
/// Bytes of one operand's gathered tile: output rows, dense input rows and the tiles of a
/// binary op stay within L2 and mostly within L1.
const TILE_BYTES: usize = 16 * 1024;

#[repr(C, align(64))]
struct TileBuf([MaybeUninit<u8>; TILE_BYTES]);

/// Whether `l` should be walked in tiles: two dims, or three whose outer one is a batch of such
/// matrices (`x.contiguous(memory_format=torch.channels_last)`: `[N][HW][C]` from `[N][C][HW]`),
/// the output dense along its rows, and some input stepping further in memory along a row than
/// down a column (a transposed view).
pub fn wants_tiles<const N: usize>(l: &Layout<N>) -> bool {
    let d = l.shape.len();
    (d == 2 || d == 3)
        && l.shape[d - 2] >= TILE_ROWS / 2
        && l.strides[0][d - 1] == 1
        && (1..N).any(|k| {
            let (outer, inner) = (
                l.strides[k][d - 2].unsigned_abs(),
                l.strides[k][d - 1].unsigned_abs(),
            );
            inner > 1 && outer < inner
        })
}

/// `dst[r * cols + j] = src[r * so + j * si]` for `r < rows`, `j < cols`, moving `size`-byte
/// elements. A transposed source (`so == 1`) of 4- or 8-byte elements goes through register
/// block transposes; otherwise the row index runs innermost, so the source is still read a
/// cache line at a time.
///
/// # Safety
/// `src` must be readable at every addressed element and `dst` writable for `rows * cols`
/// elements; they must not overlap.
unsafe fn gather(
    dst: *mut u8,
    src: *const u8,
    size: usize,
    rows: usize,
    cols: usize,
    so: isize,
    si: isize,
) {
    #[cfg(target_arch = "x86_64")]
    if so == 1 && (size == 4 || size == 8) && avx2() {
        // SAFETY: AVX2 is present; the rest is the caller's contract.
        unsafe { gather_transposed_avx2(dst, src, size, rows, cols, si) };
        return;
    }
    // SAFETY: caller's contract.
    unsafe { gather_scalar(dst, src, size, 0..rows, 0..cols, cols, so, si) };
}

/// The scalar gather over the sub-block `rows` x `js` of a tile `cols` wide.
///
/// # Safety
/// As [`gather`].
#[allow(clippy::too_many_arguments)]
unsafe fn gather_scalar(
    dst: *mut u8,
    src: *const u8,
    size: usize,
    rows: std::ops::Range<usize>,
    js: std::ops::Range<usize>,
    cols: usize,
    so: isize,
    si: isize,
) {
    macro_rules! by {
        ($t:ty) => {{
            let (d, s) = (dst as *mut $t, src as *const $t);
            for j in js.clone() {
                // SAFETY: caller's contract: every (r, j) of the block is inside both tiles.
                let col = unsafe { s.offset(j as isize * si) };
                for r in rows.clone() {
                    // SAFETY: as above.
                    unsafe { *d.add(r * cols + j) = *col.offset(r as isize * so) };
                }
            }
        }};
    }
    match size {
        1 => by!(u8),
        2 => by!(u16),
        4 => by!(u32),
        8 => by!(u64),
        _ => by!(u128),
    }
}

/// [`gather`] of a source with `so == 1`: blocks of 8x8 (4-byte) or 4x4 (8-byte) elements are
/// loaded as column vectors (contiguous in the source), transposed in registers and stored as
/// row vectors; the ragged edges go through the scalar loop.
///
/// # Safety
/// As [`gather`], and the CPU supports AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn gather_transposed_avx2(
    dst: *mut u8,
    src: *const u8,
    size: usize,
    rows: usize,
    cols: usize,
    si: isize,
) {
    let b = if size == 4 { 8 } else { 4 };
    let (rb, cb) = (rows / b * b, cols / b * b);
    for r in (0..rb).step_by(b) {
        for j in (0..cb).step_by(b) {
            // SAFETY: a full b x b block inside the tile (caller's contract).
            unsafe {
                let s = src.offset((r as isize + j as isize * si) * size as isize);
                let d = dst.add((r * cols + j) * size);
                if size == 4 {
                    transpose8x8_32(s as *const f32, si, d as *mut f32, cols);
                } else {
                    transpose4x4_64(s as *const f64, si, d as *mut f64, cols);
                }
            }
        }
    }
    // SAFETY: the edges, in bounds by the caller's contract.
    unsafe {
        gather_scalar(dst, src, size, 0..rb, cb..cols, cols, 1, si);
        gather_scalar(dst, src, size, rb..rows, 0..cols, cols, 1, si);
    }
}

/// Calls `row(addresses, len)` for every row segment of `l` (2-D, or 3-D: a batch of 2-D along dim 0): `addresses[k]` is operand k's
/// address of the segment's first byte, and every operand is dense along the segment
/// (operand 0, the output, in place; inputs either in place or in a gathered tile). `bases` are
/// the operands' byte addresses of element 0 and `sizes` their element sizes.
///
/// # Safety
/// `l` must describe the operands' memory (as built by `coalesce` from their shapes and
/// strides), the output must not overlap itself or the inputs except elementwise, and `row`
/// must only access `len` elements from each address.
pub unsafe fn drive_tiles<const N: usize>(
    l: &Layout<N>,
    bases: [SendPtr<u8>; N],
    sizes: [usize; N],
    row: &(dyn Fn([*mut u8; N], usize) + Sync),
) {
    // A 3-D layout is a batch of 2-D ones (dim 0); a 2-D one a batch of one.
    let d = l.shape.len();
    let (batch, rows, cols) = match d {
        3 => (l.shape[0], l.shape[1], l.shape[2]),
        _ => (1, l.shape[0], l.shape[1]),
    };
    let stride = |k: usize, dim: usize| l.strides[k][dim + d - 2];
    let batch_stride = |k: usize| if d == 3 { l.strides[k][0] } else { 0 };
    let widest = sizes.iter().copied().max().unwrap_or(1).max(1);
    let width = (TILE_BYTES / (TILE_ROWS * widest)).clamp(1, cols.max(1));
    let tiles = rows.div_ceil(TILE_ROWS);
    let per_tile = TILE_ROWS * cols;
    let gathered: [bool; N] = std::array::from_fn(|k| k > 0 && stride(k, 1) != 1);
    parallel_for(
        batch * tiles,
        (GRAIN / per_tile.max(1)).max(1),
        &|start, end| {
            let mut bufs: [TileBuf; N] =
                std::array::from_fn(|_| TileBuf([MaybeUninit::uninit(); TILE_BYTES]));
            for u in start..end {
                let (b, t) = (u / tiles, u % tiles);
                let r0 = t * TILE_ROWS;
                let nr = TILE_ROWS.min(rows - r0);
                let mut j0 = 0;
                while j0 < cols {
                    let nc = width.min(cols - j0);
                    // Element (b, r0, j0) of each operand.
                    let corner: [*mut u8; N] = std::array::from_fn(|k| {
                        let off = b as isize * batch_stride(k)
                            + r0 as isize * stride(k, 0)
                            + j0 as isize * stride(k, 1);
                        bases[k].at(off * sizes[k] as isize)
                    });
                    for k in 0..N {
                        if gathered[k] {
                            // SAFETY: the tile's elements are in bounds (rows r0.., cols j0.. of
                            // the layout); the buffer holds TILE_ROWS * width * sizes[k] bytes.
                            unsafe {
                                gather(
                                    bufs[k].0.as_mut_ptr() as *mut u8,
                                    corner[k],
                                    sizes[k],
                                    nr,
                                    nc,
                                    stride(k, 0),
                                    stride(k, 1),
                                )
                            };
                        }
                    }
                    if nc == cols && (0..N).all(|k| gathered[k] || stride(k, 0) == cols as isize) {
                        // The tile's rows follow each other in every operand (a gathered tile
                        // is dense): one segment (channels-last copies of 3-channel images had
                        // paid a call per row of 3).
                        let addrs: [*mut u8; N] = std::array::from_fn(|k| {
                            if gathered[k] {
                                bufs[k].0.as_ptr() as *mut u8
                            } else {
                                corner[k]
                            }
                        });
                        row(addrs, nr * nc);
                        j0 += nc;
                        continue;
                    }
                    for r in 0..nr {
                        let addrs: [*mut u8; N] = std::array::from_fn(|k| {
                            if gathered[k] {
                                (bufs[k].0.as_ptr() as *mut u8).wrapping_add(r * nc * sizes[k])
                            } else {
                                let off = r as isize * stride(k, 0) * sizes[k] as isize;
                                corner[k].wrapping_offset(off)
                            }
                        });
                        row(addrs, nc);
                    }
                    j0 += nc;
                }
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::core::layout::coalesce;

    #[test]
    fn transposed_input_takes_tiles_dense_does_not() {
        let t = coalesce(&[40, 30], [&[30, 1], &[1, 40]]);
        assert!(wants_tiles(&t));
        let dense = coalesce(&[40, 30], [&[30, 1], &[30, 1]]);
        assert!(!wants_tiles(&dense));
        let bcast = coalesce(&[40, 30], [&[30, 1], &[1, 0]]);
        assert!(!wants_tiles(&bcast));
        // NCHW to channels-last: a batch of [HW][C] <- [C][HW] transposes.
        let to_cl = coalesce(&[4, 3, 8, 8], [&[192, 1, 24, 3], &[192, 64, 8, 1]]);
        assert_eq!(to_cl.shape.len(), 3);
        assert!(wants_tiles(&to_cl));
    }

    #[test]
    fn gather_every_element_size() {
        let src: Vec<u64> = (0..12).collect();
        // A 3x4 view of a 4x3 row-major matrix, transposed: strides (1, 3).
        let mut dst = [0u64; 12];
        // SAFETY: in-bounds reads of `src`, writes of 12 elements.
        unsafe {
            gather(
                dst.as_mut_ptr() as *mut u8,
                src.as_ptr() as *const u8,
                8,
                3,
                4,
                1,
                3,
            )
        };
        assert_eq!(dst, [0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11]);
        let src8: Vec<u8> = (0..12).collect();
        let mut dst8 = [0u8; 12];
        // SAFETY: as above.
        unsafe { gather(dst8.as_mut_ptr(), src8.as_ptr(), 1, 3, 4, 1, 3) };
        assert_eq!(dst8, [0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11]);
    }

    /// `gather` (block transposes where it can) against the scalar loop, for a transposed
    /// source of `T`.
    fn gathers_agree<T: Copy + Default + PartialEq + std::fmt::Debug>(
        src: &[T],
        rows: usize,
        cols: usize,
        si: isize,
    ) {
        let size = std::mem::size_of::<T>();
        let (mut fast, mut slow) = (
            vec![T::default(); rows * cols],
            vec![T::default(); rows * cols],
        );
        let s = src.as_ptr() as *const u8;
        // SAFETY: every read is below rows + cols * si <= src.len(); writes are rows * cols.
        unsafe {
            gather(fast.as_mut_ptr() as *mut u8, s, size, rows, cols, 1, si);
            let d = slow.as_mut_ptr() as *mut u8;
            gather_scalar(d, s, size, 0..rows, 0..cols, cols, 1, si);
        }
        assert_eq!(fast, slow, "{rows}x{cols}, {size}-byte elements");
    }

    /// The block-transpose path against the scalar loop, on ragged tiles of both sizes.
    #[test]
    fn block_transpose_matches_scalar() {
        for (rows, cols, si) in [
            (16, 37, 41isize),
            (8, 8, 8),
            (13, 5, 20),
            (3, 9, 3),
            (16, 256, 300),
        ] {
            let n = (rows as isize + cols as isize * si) as usize;
            let s32: Vec<u32> = (0..n as u32).map(|x| x.wrapping_mul(2654435761)).collect();
            let s64: Vec<u64> = s32.iter().map(|&x| u64::from(x) << 7).collect();
            gathers_agree(&s32, rows, cols, si);
            gathers_agree(&s64, rows, cols, si);
        }
    }
}
