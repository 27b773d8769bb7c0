//! Stride-1 convolution on the padded grid, without an im2col matrix.
//!
//! The source planes are copied once, zero-padded, into `xp` (`[cin, Dp, Hp, Wp]`). An output
//! position `(z, y, x)` is computed at grid index `t = (z * Hp + y) * Wp + x`, so the input it
//! reads for tap `(a, b, e)` is `xp[c][t + a*d0*Hp*Wp + b*d1*Wp + e*d2]`: every tap is a
//! constant shift of the flattened plane. A GEMM over the `m` grid positions therefore reads
//! its column operand straight from (shifted) planes; the grid columns `x >= OW` are computed
//! and thrown away (a `(Wp - OW) / Wp` share of the work, hence [`Grid::new`]'s limit).
//!
//! The depth and height taps are unrolled into `xe` (`[cin, kd, kh, L]`, one contiguous copy
//! per row, `kd * kh` times the input instead of im2col's `kd * kh * kw`), whose rows are then
//! equally spaced, so each width tap `e` is one GEMM over all `(c, a, b)` rows at shift
//! `e * d2`. With few rows (`cin * kd * kh` small) the width taps are unrolled too (`full`),
//! making one GEMM with a deeper reduction.

use crate::kernels::core::gemm::{gemm_raw, GemmElem, Mat};
use crate::kernels::core::parallel::{parallel_units, SendPtr};

/// Unroll the width taps too when the rows of one GEMM would be fewer than this (a shallow
/// reduction re-reads the destination once per width tap).
const FULL_BELOW_ROWS: usize = 32;

/// Fewer output channels than this leave `gemm`'s 6-wide microkernel tiles half empty; the
/// im2col form is the better shape then.
const MIN_COUT: usize = 8;

/// Weight gradients with fewer output channels than this use `gemm`'s horizontal kernels (see
/// [`Grid::multiply_weight_h`]): its vertical tiles are 64 output channels tall, and one with
/// 16 rows reads nearly one operand per multiply-add (measured: 0.49 -> 0.29 ms for the
/// [32,3,32,32]x[16,3,3,3] weight gradient, one thread; 0.55 -> 0.70 ms, worse, with 32
/// output channels and 48 rows).
const HORIZONTAL_BELOW_COUT: usize = 32;

/// Geometry of one stride-1 convolution on the padded grid (one group, one sample).
#[derive(Debug, Clone)]
pub(super) struct Grid {
    /// Channels read (per group) and channels written.
    pub cin: usize,
    pub cout: usize,
    /// Source spatial dims.
    src: [usize; 3],
    /// Zero rows/columns before the source in each dim (negative: the source is cropped).
    lo: [isize; 3],
    /// Padded dims `osp + (k - 1) * dil`.
    psp: [usize; 3],
    pub osp: [usize; 3],
    ksp: [usize; 3],
    dil: [usize; 3],
    /// Grid positions computed: up to the last real output, inclusive, rounded up.
    pub m: usize,
    /// Zeros after the last padded plane, read by the rounded-up positions.
    slack: usize,
    /// Width taps unrolled into the rows (one GEMM) rather than one GEMM per width tap.
    full: bool,
}

impl Grid {
    /// `None` when the grid would waste too much work on its padding columns (or is empty).
    pub fn new(
        cin: usize,
        cout: usize,
        src: [usize; 3],
        lo: [isize; 3],
        osp: [usize; 3],
        ksp: [usize; 3],
        dil: [usize; 3],
    ) -> Option<Self> {
        if osp.contains(&0) || ksp.contains(&0) || cin == 0 || cout == 0 {
            return None;
        }
        let psp = [0, 1, 2].map(|i| osp[i] + (ksp[i] - 1) * dil[i]);
        // At most a quarter of the computed grid may be padding columns.
        if (psp[2] - osp[2]) * 4 > psp[2] {
            return None;
        }
        if cout < MIN_COUT {
            return None;
        }
        let last = ((osp[0] - 1) * psp[1] + osp[1] - 1) * psp[2] + osp[2];
        // `gemm` copies a whole operand whose contiguous dim is not a multiple of its vector
        // length (16 f32), so round up and compute a few more throwaway positions.
        let m = last.next_multiple_of(16);
        let full = cin * ksp[0] * ksp[1] < FULL_BELOW_ROWS;
        Some(Grid {
            cin,
            cout,
            src,
            lo,
            psp,
            osp,
            ksp,
            dil,
            m,
            slack: m - last,
            full,
        })
    }

    /// Elements of one padded channel plane.
    fn plane(&self) -> usize {
        self.psp.iter().product()
    }

    /// Rows of the reduction of one GEMM.
    pub fn rows(&self) -> usize {
        let r = self.cin * self.ksp[0] * self.ksp[1];
        if self.full {
            r * self.ksp[2]
        } else {
            r
        }
    }

    /// GEMMs per (sample, group): one per width tap, or one.
    pub fn gemms(&self) -> usize {
        if self.full {
            1
        } else {
            self.ksp[2]
        }
    }

    /// Whether the rows are the padded planes themselves (nothing to unroll).
    fn rows_are_planes(&self) -> bool {
        !self.full && self.ksp[0] * self.ksp[1] == 1
    }

    /// Length of one unrolled row: the grid plus the widest width shift read from it.
    fn row_len(&self) -> usize {
        if self.full {
            self.m
        } else {
            self.m + (self.ksp[2] - 1) * self.dil[2]
        }
    }

    /// Element distance between consecutive rows of the column operand.
    pub fn row_stride(&self) -> usize {
        if self.rows_are_planes() {
            self.plane()
        } else {
            self.row_len()
        }
    }

    /// Shift of GEMM `e`'s columns within the rows.
    pub fn shift(&self, e: usize) -> usize {
        if self.full {
            0
        } else {
            e * self.dil[2]
        }
    }

    /// Weights packed per GEMM: `[gemms, cout, rows]`, row `r` in the order of the column
    /// operand. `w(o, c, a, b, e)` gives the weight of output channel `o`, input channel `c`
    /// and tap `(a, b, e)`.
    pub fn pack_weight<T: Copy>(
        &self,
        w: impl Fn(usize, usize, usize, usize, usize) -> T,
    ) -> Vec<T> {
        let [kd, kh, kw] = self.ksp;
        let mut out = Vec::with_capacity(self.gemms() * self.cout * self.rows());
        for g in 0..self.gemms() {
            for o in 0..self.cout {
                for c in 0..self.cin {
                    for a in 0..kd {
                        for b in 0..kh {
                            if self.full {
                                out.extend((0..kw).map(|e| w(o, c, a, b, e)));
                            } else {
                                out.push(w(o, c, a, b, g));
                            }
                        }
                    }
                }
            }
        }
        out
    }

    /// Index into the `[c, kd, kh, kw]` taps of (`row`, GEMM `g`): inverse of the packing.
    pub fn tap_index(&self, row: usize, g: usize) -> usize {
        if self.full {
            row
        } else {
            row * self.ksp[2] + g
        }
    }

    /// Fills `cols` with the column operand of the `cin` channels at `src` (element strides
    /// `ss` for C, D, H, W) and returns it: the zero-padded planes, and their rows unrolled
    /// unless they are the planes themselves (then `cols` is unused).
    ///
    /// # Safety
    /// `src` with strides `ss` must address `cin` readable channels of the source dims.
    pub unsafe fn columns<'a, T: GemmElem>(
        &self,
        src: SendPtr<T>,
        ss: [isize; 4],
        xp: &'a mut Vec<T>,
        cols: &'a mut Vec<T>,
    ) -> &'a [T] {
        let plane = self.plane();
        let [dp, hp, wp] = self.psp;
        xp.resize(self.cin * plane + self.slack, T::ZERO);
        xp[self.cin * plane..].fill(T::ZERO);
        for c in 0..self.cin {
            for z in 0..dp {
                let sz = z as isize - self.lo[0];
                for y in 0..hp {
                    let row = &mut xp[c * plane + (z * hp + y) * wp..][..wp];
                    let sy = y as isize - self.lo[1];
                    if sz < 0 || sz >= self.src[0] as isize || sy < 0 || sy >= self.src[1] as isize
                    {
                        row.fill(T::ZERO);
                        continue;
                    }
                    // Padded columns x0..x1 hold source columns x0 - lo .. x1 - lo.
                    let x0 = self.lo[2].clamp(0, wp as isize) as usize;
                    let x1 = (self.lo[2] + self.src[2] as isize).clamp(x0 as isize, wp as isize)
                        as usize;
                    row[..x0].fill(T::ZERO);
                    row[x1..].fill(T::ZERO);
                    let base = c as isize * ss[0]
                        + sz * ss[1]
                        + sy * ss[2]
                        + (x0 as isize - self.lo[2]) * ss[3];
                    if ss[3] == 1 {
                        // SAFETY: source columns x0 - lo .. x1 - lo of an in-range (c, z, y)
                        // row, dense (caller's contract).
                        let s = unsafe {
                            std::slice::from_raw_parts(src.at(base) as *const T, x1 - x0)
                        };
                        row[x0..x1].copy_from_slice(s);
                    } else {
                        for (i, v) in row[x0..x1].iter_mut().enumerate() {
                            // SAFETY: as above, element by element.
                            *v = unsafe { *src.at(base + i as isize * ss[3]) };
                        }
                    }
                }
            }
        }
        if self.rows_are_planes() {
            return xp;
        }
        let [kd, kh, kw] = self.ksp;
        let len = self.row_len();
        cols.resize(self.rows() * len, T::ZERO);
        let mut dst = cols.chunks_exact_mut(len);
        for c in 0..self.cin {
            for a in 0..kd {
                for b in 0..kh {
                    let off = c * plane + a * self.dil[0] * hp * wp + b * self.dil[1] * wp;
                    for e in 0..if self.full { kw } else { 1 } {
                        let o = off + e * self.dil[2];
                        // Up to the last real position this stays inside channel c (the
                        // largest shift lands on the plane's last element); the rounded-up
                        // positions read on into the next plane or the slack.
                        dst.next().expect("rows").copy_from_slice(&xp[o..o + len]);
                    }
                }
            }
        }
        cols
    }

    /// `acc[cout, m] = wpk @ cols` over every GEMM (see [`Grid::columns`]); `parallel` as in
    /// [`gemm_raw`].
    pub fn multiply<T: GemmElem>(&self, wpk: &[T], cols: &[T], acc: &mut Vec<T>, parallel: bool) {
        let (rows, rs) = (self.rows(), self.row_stride());
        assert!(wpk.len() >= self.gemms() * self.cout * rows);
        assert!(cols.len() >= (rows - 1) * rs + self.shift(self.gemms() - 1) + self.m);
        acc.resize(self.cout * self.m, T::ZERO);
        for g in 0..self.gemms() {
            let lhs = Mat {
                ptr: wpk[g * self.cout * rows..].as_ptr(),
                rs: rows as isize,
                cs: 1,
            };
            let rhs = Mat {
                ptr: cols[self.shift(g)..].as_ptr(),
                rs: rs as isize,
                cs: 1,
            };
            // SAFETY: acc is an owned [cout, m] matrix; lhs is [cout, rows] inside wpk and
            // rhs [rows, m] inside cols (asserted above).
            unsafe {
                gemm_raw(
                    self.cout,
                    self.m,
                    rows,
                    acc.as_mut_ptr(),
                    self.m as isize,
                    1,
                    g > 0,
                    lhs,
                    rhs,
                    T::ONE,
                    parallel,
                )
            };
        }
    }

    /// Copies the real outputs of `acc` (`[cout, m]` on the grid) into the contiguous
    /// `out` (`[cout, od, oh, ow]`), plus `bias[o]` when given.
    pub fn write_out<T: GemmElem>(&self, acc: &[T], out: &mut [T], bias: Option<&[T]>) {
        let [od, oh, ow] = self.osp;
        let [_, hp, wp] = self.psp;
        let op = od * oh * ow;
        for o in 0..self.cout {
            let b = bias.map(|b| b[o]);
            let (src, dst) = (&acc[o * self.m..][..self.m], &mut out[o * op..][..op]);
            for z in 0..od {
                for y in 0..oh {
                    let s = &src[(z * hp + y) * wp..][..ow];
                    let d = &mut dst[(z * oh + y) * ow..][..ow];
                    match b {
                        Some(b) => d.iter_mut().zip(s).for_each(|(d, &s)| *d = s + b),
                        None => d.copy_from_slice(s),
                    }
                }
            }
        }
    }

    /// Scatters the contiguous `go` (`[cout, od, oh, ow]`, the outputs' gradient) into
    /// `got` transposed onto the grid (`[m, cout]`); grid padding columns hold zeros.
    pub fn gather_transposed<T: GemmElem>(&self, go: &[T], got: &mut Vec<T>) {
        let [od, oh, ow] = self.osp;
        let [_, hp, wp] = self.psp;
        let op = od * oh * ow;
        let co = self.cout;
        if got.len() != self.m * co {
            // Padding columns are never written below, so zero them once.
            got.clear();
            got.resize(self.m * co, T::ZERO);
        }
        for z in 0..od {
            for y in 0..oh {
                let (t0, s0) = ((z * hp + y) * wp, (z * oh + y) * ow);
                let dst = &mut got[t0 * co..(t0 + ow) * co];
                for o in 0..co {
                    let src = &go[o * op + s0..][..ow];
                    for (x, &v) in src.iter().enumerate() {
                        dst[x * co + o] = v;
                    }
                }
            }
        }
    }

    /// `acc += got^T @ cols^T` per GEMM: `acc` is `[gemms, rows, cout]` (the weight gradient
    /// per GEMM, column-major), `got` the `[m, cout]` gradient from
    /// [`Grid::gather_transposed`]. `overwrite` replaces `acc` instead.
    pub fn multiply_weight<T: GemmElem>(
        &self,
        got: &[T],
        cols: &[T],
        acc: &mut [T],
        overwrite: bool,
        parallel: bool,
    ) {
        let (rows, rs, co) = (self.rows(), self.row_stride(), self.cout);
        assert!(got.len() >= self.m * co && acc.len() >= self.gemms() * rows * co);
        assert!(cols.len() >= (rows - 1) * rs + self.shift(self.gemms() - 1) + self.m);
        for g in 0..self.gemms() {
            // Both operands have the reduction (grid positions) contiguous in `cols`; with a
            // column-major destination `gemm` reads them without a strided gather (see
            // `backward_weight_impl`).
            let lhs = Mat {
                ptr: got.as_ptr(),
                rs: 1,
                cs: co as isize,
            };
            let rhs = Mat {
                ptr: cols[self.shift(g)..].as_ptr(),
                rs: 1,
                cs: rs as isize,
            };
            // SAFETY: acc's block g is an owned column-major [cout, rows] matrix; lhs is
            // [cout, m] inside got and rhs [m, rows] inside cols (asserted above).
            unsafe {
                gemm_raw(
                    co,
                    rows,
                    self.m,
                    acc[g * rows * co..].as_mut_ptr(),
                    1,
                    co as isize,
                    !overwrite,
                    lhs,
                    rhs,
                    T::ONE,
                    parallel,
                )
            };
        }
    }

    /// Whether the weight gradient takes [`Grid::multiply_weight_h`].
    pub fn horizontal_weight(&self) -> bool {
        self.cout < HORIZONTAL_BELOW_COUT
    }

    /// Copies the contiguous `go` (`[cout, od, oh, ow]`) onto the grid (`[cout, m]`); grid
    /// padding positions hold zeros.
    pub fn gather<T: GemmElem>(&self, go: &[T], gg: &mut Vec<T>) {
        let [od, oh, ow] = self.osp;
        let [_, hp, wp] = self.psp;
        let op = od * oh * ow;
        if gg.len() != self.m * self.cout {
            // Padding positions are never written below, so zero them once.
            gg.clear();
            gg.resize(self.m * self.cout, T::ZERO);
        }
        for (o, dst) in gg.chunks_exact_mut(self.m).enumerate() {
            let src = &go[o * op..][..op];
            for z in 0..od {
                for y in 0..oh {
                    dst[(z * hp + y) * wp..][..ow].copy_from_slice(&src[(z * oh + y) * ow..][..ow]);
                }
            }
        }
    }

    /// As [`Grid::multiply_weight`] with `gg` from [`Grid::gather`]: both operands have the
    /// reduction contiguous, and output blocks of at most 16 x 16 make `gemm` use its
    /// horizontal (dot-product) kernels, which read them as they are.
    pub fn multiply_weight_h<T: GemmElem>(
        &self,
        gg: &[T],
        cols: &[T],
        acc: &mut [T],
        overwrite: bool,
        parallel: bool,
    ) {
        let (rows, rs, co, m) = (self.rows(), self.row_stride(), self.cout, self.m);
        assert!(gg.len() >= m * co && acc.len() >= self.gemms() * rows * co);
        assert!(cols.len() >= (rows - 1) * rs + self.shift(self.gemms() - 1) + m);
        const B: usize = 16;
        let (ob, rb) = (co.div_ceil(B), rows.div_ceil(B));
        let jobs = self.gemms() * ob * rb;
        let dst = SendPtr::of(acc.as_mut_ptr());
        let block = |job: usize| {
            let (g, o0, r0) = (job / (ob * rb), job / rb % ob * B, job % rb * B);
            let (mb, nb) = (B.min(co - o0), B.min(rows - r0));
            let lhs = Mat {
                ptr: gg[o0 * m..].as_ptr(),
                rs: m as isize,
                cs: 1,
            };
            let rhs = Mat {
                ptr: cols[r0 * rs + self.shift(g)..].as_ptr(),
                rs: 1,
                cs: rs as isize,
            };
            // SAFETY: block (o0, r0) of acc's column-major [cout, rows] block g (disjoint
            // between jobs); lhs rows o0.. of gg and rhs rows r0.. of cols, inside them
            // (asserted above).
            unsafe {
                gemm_raw(
                    mb,
                    nb,
                    m,
                    dst.at((g * rows * co + r0 * co + o0) as isize),
                    1,
                    co as isize,
                    !overwrite,
                    lhs,
                    rhs,
                    T::ONE,
                    false,
                )
            };
        };
        if parallel {
            parallel_units(jobs, &|s, e| (s..e).for_each(&block));
        } else {
            (0..jobs).for_each(&block);
        }
    }
}
