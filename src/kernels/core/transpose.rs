//! A blocked out-of-place transpose (GEMM operand preparation: conv's weight gradient, the
//! linear layer's `w.t()`), in 8 x 8 blocks held in registers so that reads and writes both stay
//! within cache lines, parallel over blocks of destination rows for large matrices.

use super::parallel::{parallel_for, SendPtr};

/// `dst[j * rows + i] = src[i * ld + j]` for `i < rows`, `j < cols`: the transpose of a
/// row-major `rows x cols` matrix (rows `ld` apart) into a dense `cols x rows` one, in 8 x 8
/// blocks so that reads and writes both stay within cache lines.
///
/// # Safety
/// `src` addresses every element of the `rows x cols` matrix; `dst` holds `rows * cols`.
pub unsafe fn transpose_into<T: Copy + Default + Send + Sync>(
    src: *const T,
    ld: isize,
    rows: usize,
    cols: usize,
    dst: &mut [T],
) {
    const B: usize = 8;
    assert!(dst.len() >= rows * cols);
    let (s, d) = (SendPtr::of(src), SendPtr::new(dst.as_mut_ptr()));
    // Parallel over blocks of destination rows (source columns), 64K elements or more each.
    let grain = (1 << 16) / (rows * B).max(1) + 1;
    parallel_for(cols.div_ceil(B), grain, &|c_lo, c_hi| {
        let (src, dst) = (s.get() as *const T, d.get());
        for cb in c_lo..c_hi {
            let (c0, c1) = (cb * B, ((cb + 1) * B).min(cols));
            let mut r0 = 0;
            while r0 < rows {
                let r1 = (r0 + B).min(rows);
                if r1 - r0 == B && c1 - c0 == B {
                    let mut blk = [[T::default(); B]; B];
                    for (r, row) in blk.iter_mut().enumerate() {
                        for (cc, v) in row.iter_mut().enumerate() {
                            // SAFETY: (r0 + r, c0 + cc) lies in the source matrix.
                            *v =
                                unsafe { *src.offset((r0 + r) as isize * ld + (c0 + cc) as isize) };
                        }
                    }
                    for cc in 0..B {
                        for (r, row) in blk.iter().enumerate() {
                            // SAFETY: (c0 + cc, r0 + r) lies in dst, whose rows c0..c1 are
                            // this task's.
                            unsafe { *dst.add((c0 + cc) * rows + r0 + r) = row[cc] };
                        }
                    }
                } else {
                    for r in r0..r1 {
                        for cc in c0..c1 {
                            // SAFETY: as above.
                            unsafe {
                                *dst.add(cc * rows + r) = *src.offset(r as isize * ld + cc as isize)
                            };
                        }
                    }
                }
                r0 = r1;
            }
        }
    });
}

/// `dst[c * rows + r] = src[r * cols + c]` for a dense row-major `rows x cols` `src`.
pub fn transpose<T: Copy + Default + Send + Sync>(
    src: &[T],
    rows: usize,
    cols: usize,
    dst: &mut [T],
) {
    assert!(src.len() >= rows * cols);
    // SAFETY: src holds the rows x cols matrix (checked); transpose_into checks dst.
    unsafe { transpose_into(src.as_ptr(), cols as isize, rows, cols, dst) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose_odd_shapes_and_strides() {
        for &(r, c) in &[
            (1, 1),
            (8, 8),
            (9, 17),
            (33, 5),
            (16, 16),
            (40, 100),
            (300, 260),
        ] {
            let src: Vec<f64> = (0..r * (c + 2)).map(|i| i as f64).collect();
            let mut dst = vec![0.0; r * c];
            // SAFETY: src holds r rows of c + 2 elements.
            unsafe { transpose_into(src.as_ptr(), (c + 2) as isize, r, c, &mut dst) };
            for i in 0..r {
                for j in 0..c {
                    assert_eq!(dst[j * r + i], src[i * (c + 2) + j]);
                }
            }
            let dense: Vec<u32> = (0..(r * c) as u32).collect();
            let mut out = vec![0u32; r * c];
            transpose(&dense, r, c, &mut out);
            for i in 0..r {
                for j in 0..c {
                    assert_eq!(out[j * r + i], dense[i * c + j]);
                }
            }
        }
    }
}
