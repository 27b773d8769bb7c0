//! A blocked out-of-place transpose (GEMM operand preparation: conv's weight gradient, the
//! linear layer's `w.t()`), in 8 x 8 blocks held in registers so that reads and writes both stay
//! within cache lines (AVX2 shuffles for 4- and 8-byte elements), parallel over blocks of
//! destination rows for large matrices. The register transposes also serve `tiles` (copies and
//! elementwise ops with a transposed operand).

use super::parallel::{parallel_for, SendPtr};

/// `dst[j * rows + i] = src[i * ld + j]` for `i < rows`, `j < cols`: the transpose of a
/// row-major `rows x cols` matrix (rows `ld` apart) into a dense `cols x rows` one, in 8 x 8
/// blocks so that reads and writes both stay within cache lines. `parallel`: large matrices
/// are split over the pool; false keeps the whole transpose on the calling thread (a caller that
/// is itself one of the pool's tasks).
///
/// # Safety
/// `src` addresses every element of the `rows x cols` matrix; `dst` holds `rows * cols`.
pub unsafe fn transpose_into<T: Copy + Default + Send + Sync>(
    src: *const T,
    ld: isize,
    rows: usize,
    cols: usize,
    dst: &mut [T],
    parallel: bool,
) {
    assert!(dst.len() >= rows * cols);
    // SAFETY: the caller's contract for src; dst holds the dense cols x rows result (checked).
    unsafe { transpose_strided(src, ld, rows, cols, dst.as_mut_ptr(), rows, parallel) }
}

/// [`transpose_into`] with the result's rows `dld` apart: `dst[j * dld + i] = src[i * ld + j]`
/// (a block of a wider matrix, such as a GEMM operand's packed panel).
///
/// # Safety
/// `src` addresses every element of the `rows x cols` matrix, `dst` every `j * dld + i`;
/// `dld >= rows`.
pub unsafe fn transpose_strided<T: Copy + Default + Send + Sync>(
    src: *const T,
    ld: isize,
    rows: usize,
    cols: usize,
    dst: *mut T,
    dld: usize,
    parallel: bool,
) {
    const B: usize = 8;
    let (s, d) = (SendPtr::of(src), SendPtr::new(dst));
    let size = std::mem::size_of::<T>();
    #[cfg(target_arch = "x86_64")]
    let registers = (size == 4 || size == 8) && avx2();
    #[cfg(not(target_arch = "x86_64"))]
    let registers = false;
    // Parallel over blocks of destination rows (source columns), 64K elements or more each.
    let grain = if parallel {
        (1 << 16) / (rows * B).max(1) + 1
    } else {
        usize::MAX
    };
    parallel_for(cols.div_ceil(B), grain, &|c_lo, c_hi| {
        let (src, dst) = (s.get() as *const T, d.get());
        for cb in c_lo..c_hi {
            let (c0, c1) = (cb * B, ((cb + 1) * B).min(cols));
            let mut r0 = 0;
            while r0 < rows {
                let r1 = (r0 + B).min(rows);
                let full = r1 - r0 == B && c1 - c0 == B;
                // SAFETY: the block's corners; every (r, c) of the block lies in the source
                // matrix and its (c, r) in dst, whose rows c0..c1 are this task's.
                let (sb, db) = unsafe {
                    (
                        src.offset(r0 as isize * ld + c0 as isize),
                        dst.add(c0 * dld + r0),
                    )
                };
                if full && registers {
                    // SAFETY: as above; AVX2 is present (checked), T is 4 or 8 bytes, moved as
                    // bits.
                    #[cfg(target_arch = "x86_64")]
                    unsafe {
                        if size == 4 {
                            transpose8x8_32(sb as *const f32, ld, db as *mut f32, dld);
                        } else {
                            transpose4x4_64(sb as *const f64, ld, db as *mut f64, dld);
                            transpose4x4_64(
                                sb.offset(4 * ld) as *const f64,
                                ld,
                                db.add(4) as *mut f64,
                                dld,
                            );
                            transpose4x4_64(
                                sb.add(4) as *const f64,
                                ld,
                                db.add(4 * dld) as *mut f64,
                                dld,
                            );
                            transpose4x4_64(
                                sb.offset(4 * ld + 4) as *const f64,
                                ld,
                                db.add(4 * dld + 4) as *mut f64,
                                dld,
                            );
                        }
                    }
                } else if full {
                    let mut blk = [[T::default(); B]; B];
                    for (r, row) in blk.iter_mut().enumerate() {
                        for (cc, v) in row.iter_mut().enumerate() {
                            // SAFETY: as above.
                            *v = unsafe { *sb.offset(r as isize * ld + cc as isize) };
                        }
                    }
                    for cc in 0..B {
                        for (r, row) in blk.iter().enumerate() {
                            // SAFETY: as above.
                            unsafe { *db.add(cc * dld + r) = row[cc] };
                        }
                    }
                } else {
                    for r in 0..r1 - r0 {
                        for cc in 0..c1 - c0 {
                            // SAFETY: as above.
                            unsafe {
                                *db.add(cc * dld + r) = *sb.offset(r as isize * ld + cc as isize)
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
    unsafe { transpose_into(src.as_ptr(), cols as isize, rows, cols, dst, true) }
}

#[cfg(target_arch = "x86_64")]
/// Whether the CPU has AVX2 (checked once).
pub fn avx2() -> bool {
    use std::sync::OnceLock;
    static AVX2: OnceLock<bool> = OnceLock::new();
    *AVX2.get_or_init(|| std::arch::is_x86_feature_detected!("avx2"))
}

/// `d[i * dstride + k] = s[k * sstride + i]` for an 8x8 block of 32-bit elements.
///
/// # Safety
/// Both blocks must be in bounds; AVX2 is present.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub unsafe fn transpose8x8_32(s: *const f32, sstride: isize, d: *mut f32, dstride: usize) {
    use std::arch::x86_64::*;
    // SAFETY: caller's contract (8 rows of 8 elements each side).
    unsafe {
        let mut rows = [_mm256_setzero_ps(); 8];
        for (k, r) in rows.iter_mut().enumerate() {
            *r = _mm256_loadu_ps(s.offset(k as isize * sstride));
        }
        for (i, v) in transpose8x8_regs(rows).into_iter().enumerate() {
            _mm256_storeu_ps(d.add(i * dstride), v);
        }
    }
}

/// The 8 x 8 transpose of 32-bit elements in registers: element `i` of result `k` is element
/// `k` of row `i`.
///
/// # Safety
/// AVX2 is present (the caller is compiled with it).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub unsafe fn transpose8x8_regs(
    r: [std::arch::x86_64::__m256; 8],
) -> [std::arch::x86_64::__m256; 8] {
    use std::arch::x86_64::*;
    // SAFETY: register shuffles only; the caller has AVX2.
    unsafe {
        let (t0, t1) = (
            _mm256_unpacklo_ps(r[0], r[1]),
            _mm256_unpackhi_ps(r[0], r[1]),
        );
        let (t2, t3) = (
            _mm256_unpacklo_ps(r[2], r[3]),
            _mm256_unpackhi_ps(r[2], r[3]),
        );
        let (t4, t5) = (
            _mm256_unpacklo_ps(r[4], r[5]),
            _mm256_unpackhi_ps(r[4], r[5]),
        );
        let (t6, t7) = (
            _mm256_unpacklo_ps(r[6], r[7]),
            _mm256_unpackhi_ps(r[6], r[7]),
        );
        let (s0, s1) = (
            _mm256_shuffle_ps::<0x44>(t0, t2),
            _mm256_shuffle_ps::<0xEE>(t0, t2),
        );
        let (s2, s3) = (
            _mm256_shuffle_ps::<0x44>(t1, t3),
            _mm256_shuffle_ps::<0xEE>(t1, t3),
        );
        let (s4, s5) = (
            _mm256_shuffle_ps::<0x44>(t4, t6),
            _mm256_shuffle_ps::<0xEE>(t4, t6),
        );
        let (s6, s7) = (
            _mm256_shuffle_ps::<0x44>(t5, t7),
            _mm256_shuffle_ps::<0xEE>(t5, t7),
        );
        [
            _mm256_permute2f128_ps::<0x20>(s0, s4),
            _mm256_permute2f128_ps::<0x20>(s1, s5),
            _mm256_permute2f128_ps::<0x20>(s2, s6),
            _mm256_permute2f128_ps::<0x20>(s3, s7),
            _mm256_permute2f128_ps::<0x31>(s0, s4),
            _mm256_permute2f128_ps::<0x31>(s1, s5),
            _mm256_permute2f128_ps::<0x31>(s2, s6),
            _mm256_permute2f128_ps::<0x31>(s3, s7),
        ]
    }
}

/// The 16 x 16 transpose of 32-bit elements in registers (AVX-512): element `i` of result `k`
/// is element `k` of row `i`. Four rounds of shuffles, 64 in all: pairs of rows interleaved,
/// then pairs of pairs within each 128-bit lane, then the lanes gathered in two rounds.
///
/// # Safety
/// AVX-512F is present (the caller is compiled with it).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
// The AVX-512 intrinsics are stable since Rust 1.89 (see gemm/bf16/microkernel.rs).
#[allow(clippy::incompatible_msrv)]
pub unsafe fn transpose16x16_regs(
    r: [std::arch::x86_64::__m512; 16],
) -> [std::arch::x86_64::__m512; 16] {
    use std::arch::x86_64::*;
    // SAFETY: register shuffles only; the caller has AVX-512F.
    unsafe {
        // Lane L of t[2i] / t[2i + 1]: rows 2i, 2i + 1 interleaved at columns 4L, 4L + 1 / 4L + 2, 4L + 3.
        let t: [__m512; 16] = std::array::from_fn(|k| {
            let (a, b) = (r[k & !1], r[k | 1]);
            if k & 1 == 0 {
                _mm512_unpacklo_ps(a, b)
            } else {
                _mm512_unpackhi_ps(a, b)
            }
        });
        // Lane L of u[4q + c]: rows 4q..4q + 4 at column 4L + c.
        let u: [__m512; 16] = std::array::from_fn(|k| {
            let (q, c) = (k / 4, k % 4);
            let (a, b) = (t[4 * q + c / 2], t[4 * q + 2 + c / 2]);
            if c % 2 == 0 {
                _mm512_shuffle_ps::<0x44>(a, b)
            } else {
                _mm512_shuffle_ps::<0xEE>(a, b)
            }
        });
        // v[8p + 4h + c] (p: rows 0-7 or 8-15): lanes [rows 8p..8p + 4, rows 8p + 4..8p + 8] at
        // columns 8h' + 4h + c for h' = 0, 1.
        let v: [__m512; 16] = std::array::from_fn(|k| {
            let (p, hh, c) = (k / 8, (k / 4) % 2, k % 4);
            let (a, b) = (u[8 * p + c], u[8 * p + 4 + c]);
            if hh == 0 {
                _mm512_shuffle_f32x4::<0x88>(a, b)
            } else {
                _mm512_shuffle_f32x4::<0xDD>(a, b)
            }
        });
        // Column k = 8h' + 4h + c: lanes h' of v[4h + c] and of v[8 + 4h + c].
        std::array::from_fn(|k| {
            let (hh2, rest) = (k / 8, k % 8);
            let (a, b) = (v[rest], v[8 + rest]);
            if hh2 == 0 {
                _mm512_shuffle_f32x4::<0x88>(a, b)
            } else {
                _mm512_shuffle_f32x4::<0xDD>(a, b)
            }
        })
    }
}

/// `d[i * dstride + k] = s[k * sstride + i]` for a 4x4 block of 64-bit elements.
///
/// # Safety
/// As [`transpose8x8_32`] with 4 rows.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub unsafe fn transpose4x4_64(s: *const f64, sstride: isize, d: *mut f64, dstride: usize) {
    use std::arch::x86_64::*;
    // SAFETY: caller's contract (4 rows of 4 elements each side).
    unsafe {
        let l = |k: isize| _mm256_loadu_pd(s.offset(k * sstride));
        let (r0, r1, r2, r3) = (l(0), l(1), l(2), l(3));
        let (t0, t1) = (_mm256_unpacklo_pd(r0, r1), _mm256_unpackhi_pd(r0, r1));
        let (t2, t3) = (_mm256_unpacklo_pd(r2, r3), _mm256_unpackhi_pd(r2, r3));
        let st = |i: usize, v: __m256d| _mm256_storeu_pd(d.add(i * dstride), v);
        st(0, _mm256_permute2f128_pd::<0x20>(t0, t2));
        st(1, _mm256_permute2f128_pd::<0x20>(t1, t3));
        st(2, _mm256_permute2f128_pd::<0x31>(t0, t2));
        st(3, _mm256_permute2f128_pd::<0x31>(t1, t3));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::incompatible_msrv)]
    fn transpose16x16_in_registers() {
        use std::arch::x86_64::*;
        if !std::arch::is_x86_feature_detected!("avx512f") {
            return;
        }
        let src: Vec<f32> = (0..256).map(|i| i as f32).collect();
        #[target_feature(enable = "avx512f")]
        fn run(src: &[f32]) -> Vec<f32> {
            // SAFETY: 16 rows of 16 floats read, 16 written.
            unsafe {
                let rows = std::array::from_fn(|i| _mm512_loadu_ps(src[16 * i..].as_ptr()));
                let mut out = vec![0.0f32; 256];
                for (k, v) in transpose16x16_regs(rows).into_iter().enumerate() {
                    _mm512_storeu_ps(out[16 * k..].as_mut_ptr(), v);
                }
                out
            }
        }
        // SAFETY: the CPU has AVX-512F (checked).
        let out = unsafe { run(&src) };
        for i in 0..16 {
            for k in 0..16 {
                assert_eq!(out[16 * k + i], src[16 * i + k], "row {i} column {k}");
            }
        }
    }

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
            unsafe { transpose_into(src.as_ptr(), (c + 2) as isize, r, c, &mut dst, true) };
            for i in 0..r {
                for j in 0..c {
                    assert_eq!(dst[j * r + i], src[i * (c + 2) + j]);
                }
            }
            let src32: Vec<f32> = src.iter().map(|&v| v as f32).collect();
            let mut dst32 = vec![0.0f32; r * c];
            // SAFETY: src32 holds r rows of c + 2 elements.
            unsafe { transpose_into(src32.as_ptr(), (c + 2) as isize, r, c, &mut dst32, false) };
            for (d64, d32) in dst.iter().zip(&dst32) {
                assert_eq!(*d64 as f32, *d32);
            }
            let dense: Vec<u32> = (0..(r * c) as u32).collect();
            let mut out = vec![0u32; r * c];
            transpose(&dense, r, c, &mut out);
            for i in 0..r {
                for j in 0..c {
                    assert_eq!(out[j * r + i], dense[i * c + j]);
                }
            }
            // Into a block of a wider result (rows r + 5 apart), whose other columns stay.
            let dld = r + 5;
            let mut wide = vec![-1.0f32; c * dld];
            // SAFETY: src32 holds r rows of c + 2 elements; wide holds c rows of dld.
            unsafe {
                transpose_strided(
                    src32.as_ptr(),
                    (c + 2) as isize,
                    r,
                    c,
                    wide.as_mut_ptr(),
                    dld,
                    false,
                )
            };
            for j in 0..c {
                for i in 0..dld {
                    let want = if i < r { src32[i * (c + 2) + j] } else { -1.0 };
                    assert_eq!(wide[j * dld + i], want);
                }
            }
        }
    }
}
