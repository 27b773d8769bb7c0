//! The column matrix of a convolution whose kernel tiles its input in patches
//! ([`Geometry::patchify`]: kernel == stride, no padding or dilation): every input element lands
//! in one place at most, so the matrix is the input de-interleaved, no larger than it. Row
//! `(c, a, b, e)` (channel and tap) holds, for every output position `(zd, zh, zw)`, the element
//! `(zd * kd + a, zh * kh + b, zw * kw + e)` of channel `c`: each input row that a patch row
//! covers is split into `kw` output rows, one per tap column.

use super::Geometry;
use crate::kernels::core::gemm::GemmElem;
use crate::kernels::core::parallel::SendPtr;

/// Writes the column matrix of channels `c0..c0 + cg` of one sample at `x` (element strides
/// `xs`: channel, depth, height, width) into the first `op` columns of the rows, `ld` apart, of
/// the matrix at `col` (rows `(c, a, b, e)` in the weight's order).
///
/// # Safety
/// `g.patchify()` holds; `x` addresses a sample of `g`'s input with strides `xs`; `col + r * ld
/// .. col + r * ld + op` is writable for every row `r < ck` and accessed by no one else meanwhile.
pub(super) unsafe fn columns<T: GemmElem>(
    g: &Geometry,
    x: SendPtr<T>,
    xs: &[isize],
    c0: usize,
    col: SendPtr<T>,
    ld: usize,
) {
    let [od, oh, ow] = g.osp;
    let [kd, kh, kw] = g.ksp;
    let (steps, dims) = ([kd as isize * xs[1], kh as isize * xs[2]], [od, oh, ow]);
    for ci in 0..g.cg() {
        for a in 0..kd {
            for b in 0..kh {
                let row = ((ci * kd + a) * kh + b) * kw;
                let at = (c0 + ci) as isize * xs[0] + a as isize * xs[1] + b as isize * xs[2];
                // SAFETY: the input rows (zd * kd + a, zh * kh + b) of channel c0 + ci hold
                // the elements zw * kw + e for zw < ow, e < kw (the output's size says so), at
                // stride xs[3]; the matrix's rows row..row + kw hold these op columns (the
                // contract).
                unsafe {
                    let (src, dst) = (x.at(at) as *const T, col.at((row * ld) as isize));
                    if xs[3] == 1 {
                        split_rows(src, steps, dims, kw, dst, ld);
                    } else {
                        for r in 0..od * oh {
                            let (zd, zh) = ((r / oh) as isize, (r % oh) as isize);
                            let src = src.offset(zd * steps[0] + zh * steps[1]);
                            for e in 0..kw {
                                for zw in 0..ow {
                                    *dst.add(e * ld + r * ow + zw) =
                                        *src.offset((zw * kw + e) as isize * xs[3]);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

crate::unsafe_multiversion!(
    /// For every input row `(zd, zh)` (at `src + zd * steps[0] + zh * steps[1]`, dense) of the
    /// output's `dims` `[od, oh, ow]`: `dst[e * ld + (zd * oh + zh) * ow + zw] = row[zw * kw +
    /// e]` for `zw < ow`, `e < kw`, each row split into `kw` rows. The usual patch widths are
    /// compiled with a constant `kw`, which the compiler turns into vector loads and shuffles (a
    /// strided scalar loop took a third of the GEMM's time for 2x2 patches).
    ///
    /// # Safety
    /// Each row is readable for `ow * kw` elements; `dst + e * ld .. + od * oh * ow` writable for
    /// `e < kw`, not overlapping the rows.
    unsafe fn split_rows<T: GemmElem>(
        src: *const T,
        steps: [isize; 2],
        dims: [usize; 3],
        kw: usize,
        dst: *mut T,
        ld: usize,
    ) {
        let [od, oh, ow] = dims;
        for zd in 0..od {
            for zh in 0..oh {
                // SAFETY: forwarded from the caller, row (zd, zh).
                unsafe {
                    let src = src.offset(zd as isize * steps[0] + zh as isize * steps[1]);
                    let dst = dst.add((zd * oh + zh) * ow);
                    match kw {
                        2 => split_fixed::<T, 2>(src, dst, ld, ow),
                        3 => split_fixed::<T, 3>(src, dst, ld, ow),
                        4 => split_fixed::<T, 4>(src, dst, ld, ow),
                        8 => split_fixed::<T, 8>(src, dst, ld, ow),
                        16 => split_fixed::<T, 16>(src, dst, ld, ow),
                        _ => {
                            for e in 0..kw {
                                for zw in 0..ow {
                                    *dst.add(e * ld + zw) = *src.add(zw * kw + e);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
);

/// One row of [`split_rows`], for a constant `KW`.
///
/// # Safety
/// As [`split_rows`]'s, for one row.
#[inline(always)]
unsafe fn split_fixed<T: GemmElem, const KW: usize>(
    src: *const T,
    dst: *mut T,
    ld: usize,
    ow: usize,
) {
    // SAFETY: the caller's ranges, as slices (which tell the compiler they do not overlap).
    let (src, mut rows) = unsafe {
        (
            std::slice::from_raw_parts(src, ow * KW),
            std::array::from_fn::<_, KW, _>(|e| {
                std::slice::from_raw_parts_mut(dst.add(e * ld), ow)
            }),
        )
    };
    for zw in 0..ow {
        for (e, row) in rows.iter_mut().enumerate() {
            // SAFETY: zw < ow, each row's length, and zw * KW + e < ow * KW, the source's.
            unsafe { *row.get_unchecked_mut(zw) = *src.get_unchecked(zw * KW + e) };
        }
    }
}
