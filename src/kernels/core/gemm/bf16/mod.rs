//! Native bfloat16 matrix product for CPUs with AVX512-BF16 (`vdpbf16ps`): bfloat16 operands,
//! float32 accumulation, one rounding into the bfloat16 output, as the CPU backend's oneDNN
//! kernel does. Elsewhere [`available`] is false and `linalg` keeps widening to float32; where
//! it is true but the instruction is slow ([`native_pays`]), `linalg` widens with its semantics.
//!
//! Two drivers around one microkernel ([`microkernel::tile`]), both writing through [`store`],
//! which scales, adds `beta * c` and rounds:
//! - A row-major with an even `k` (activations): [`rows`] reads A's pairs where they lie and
//!   cuts the output into one block per thread, each packing its own columns of B.
//! - Any other strides (a transposed A, as a weight gradient's): BLIS-style, both operands
//!   packed once into the microkernel's `k`-pair layout ([`pack`]) and the output cut into
//!   `MC x NC` blocks, one task each, that walk `k` in [`depth_pairs`] steps and accumulate in
//!   a float32 block. Operands may have any strides (transposed, broadcast batch).
//!
//! `vdpbf16ps` treats subnormal bfloat16 inputs as zero and flushes subnormal float32 partial
//! results (whatever MXCSR says), as the CPU backend's oneDNN kernel on this hardware does; the
//! widening path keeps them. Normal-range results are unaffected.

#[cfg(target_arch = "x86_64")]
mod microkernel;
#[cfg(target_arch = "x86_64")]
mod pack;
#[cfg(target_arch = "x86_64")]
mod rate;
#[cfg(target_arch = "x86_64")]
mod rows;
#[cfg(target_arch = "x86_64")]
mod store;
#[cfg(all(test, target_arch = "x86_64"))]
mod tests;

use crate::error::FooResult;
use crate::tensor::{Scalar, TensorMut, TensorRef};

/// Whether this CPU runs the native kernel (checked once; the answer is cached by std).
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512bf16")
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vl")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the native kernel beats widening to float32 on this CPU (where it is [`available`]):
/// `vdpbf16ps` must do at least 0.85x the multiply-adds per second of float32 FMAs (the
/// widening route also converts every operand and the result). Measured once, ~0.1 ms; see
/// [`rate`].
pub fn native_pays() -> bool {
    static PAYS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PAYS.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            available() && rate::dot_over_fma() >= 0.85
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
}

/// `out = beta * c + alpha * (a @ b)` over bfloat16 3-D operands `[B, M, K] x [B, K, N]`,
/// already checked by `linalg::matmul` (shapes, dtypes, non-empty output). `c` is ignored when
/// `beta == 0`. Call only when [`available`].
pub fn matmul(
    out: &TensorMut,
    a: &TensorRef,
    b: &TensorRef,
    c: Option<&TensorRef>,
    beta: &Scalar,
    alpha: &Scalar,
) -> FooResult<()> {
    #[cfg(target_arch = "x86_64")]
    {
        assert!(available(), "core::gemm::bf16::matmul without AVX512-BF16");
        imp::matmul(out, a, b, c, beta, alpha);
        Ok(())
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (out, a, b, c, beta, alpha);
        crate::not_implemented!("native bfloat16 matmul needs x86-64 AVX512-BF16")
    }
}

/// `k`-pairs per pass of the microkernel's tiles over a panel of B: on Intel 128, so that the
/// `128 x NR` slice of the panel (32 KiB) stays in L1 while every tile of a block of rows reads
/// it, the tiles resuming their sums between passes (storing and reloading a float32 is exact:
/// the same bits); on AMD ([`cpu::amd`]) the whole depth, as a Zen 4 streams the panel from L2
/// at the rate of `vdpbf16ps` (2 threads, against 128: 1024^3 5.61 -> 5.43 ms, 2048^3 43.4 ->
/// 41.4, 256 x 4096 x 1024 5.90 -> 5.74).
#[cfg(target_arch = "x86_64")]
fn depth_pairs(pairs: usize) -> usize {
    match crate::runtime::cpu::amd() {
        true => pairs.max(1),
        false => 128,
    }
}

#[cfg(target_arch = "x86_64")]
mod imp {
    use super::microkernel::{self, MR, NR};
    use super::{depth_pairs, pack, store};
    use crate::kernels::core::element::Element;
    use crate::kernels::core::gemm::GEMM_PARALLEL_FLOPS;
    use crate::kernels::core::parallel::{par_rows_mut, parallel_for, SendPtr};
    use crate::kernels::core::scratch::{with_scratch, KeptBuffer};
    use crate::tensor::{Scalar, TensorMut, TensorRef};

    /// Output rows per task (an `MC x KC` block of packed A is 48 KiB, L2).
    const MC: usize = MR * 16;
    /// Output columns per task.
    const NC: usize = NR * 4;
    /// `k`-pairs per task when lines are packed pair by pair ([`pack::line_pair`]).
    const PAIR_RUN: usize = 32;

    /// One operand packed whole: `batches x panels` panels of `pairs x L` u32, in a buffer kept
    /// by the calling thread between products (a fresh `vec!` of a [1024, 256] operand was
    /// page faults and a zeroing on every call: 9% of a 256 x 256 x 1024 linear layer).
    struct Packed {
        buf: KeptBuffer,
        len: usize,
        panels: usize,
        pairs: usize,
    }

    impl Packed {
        fn data(&mut self) -> &mut [u32] {
            // SAFETY: the buffer holds at least `len` u32 (4-byte aligned in its 8-byte words),
            // initialized (KeptBuffer's words), and every bit pattern is a valid u32.
            unsafe { std::slice::from_raw_parts_mut(self.buf.as_mut_ptr().cast(), self.len) }
        }

        /// Panel `p` of batch `q`, starting at `k`-pair `p0`.
        fn at<const L: usize>(&self, q: usize, panel: usize, p0: usize) -> *const u32 {
            let i = ((q * self.panels + panel) * self.pairs + p0) * L;
            assert!(i <= self.len, "bf16 gemm: panel past its operand");
            self.buf.as_ptr().cast::<u32>().wrapping_add(i)
        }
    }

    /// Packs `batches` matrices of `lines x k` (line stride `ls`, `k` stride `ks`, batch stride
    /// `bs`) into panels of `L` lines, in parallel over panels.
    #[allow(clippy::too_many_arguments)]
    fn pack_all<const L: usize>(
        ptr: *const u16,
        bs: isize,
        ls: isize,
        ks: isize,
        batches: usize,
        lines: usize,
        k: usize,
        parallel: bool,
    ) -> Packed {
        let (panels, pairs) = (lines.div_ceil(L), k.div_ceil(2));
        let len = pairs * L;
        let total_len = batches * panels * len;
        let mut packed = Packed {
            buf: KeptBuffer::new(4 * total_len),
            len: total_len,
            panels,
            pairs,
        };
        let src = SendPtr::of(ptr);
        if ls == 1 && panels > 1 {
            // Lines contiguous: pair by pair over all panels (see pack::line_pair), in
            // parallel over runs of pairs. Every element is written, padding included.
            let dst = SendPtr::new(packed.data().as_mut_ptr());
            let runs = pairs.div_ceil(PAIR_RUN);
            parallel_for(
                batches * runs,
                if parallel { 1 } else { batches * runs },
                &|s, e| {
                    for t in s..e {
                        let (q, r) = (t / runs, t % runs);
                        for p in r * PAIR_RUN..((r + 1) * PAIR_RUN).min(pairs) {
                            let lo = src.at(q as isize * bs + (2 * p) as isize * ks) as *const u16;
                            let hi = (2 * p + 1 < k).then(|| lo.wrapping_offset(ks));
                            for panel in 0..panels {
                                let first = panel * L;
                                let d = dst.at((((q * panels + panel) * pairs + p) * L) as isize);
                                // SAFETY: lines first..first + n of rows 2p (and 2p + 1) of batch
                                // q: inside the operand (shape checked by the caller); pair p of
                                // panel (q, panel) is this task's alone; `available()` was checked.
                                unsafe {
                                    pack::line_pair::<L>(
                                        lo.wrapping_add(first),
                                        hi.map(|h| h.wrapping_add(first)),
                                        (lines - first).min(L),
                                        d,
                                    )
                                };
                            }
                        }
                    }
                },
            );
            return packed;
        }
        let total = batches * panels;
        // Every element is written: pack::panel fills its whole panel, padding included.
        par_rows_mut(
            packed.data(),
            len,
            if parallel { 1 } else { total },
            &|s, chunk| {
                for (t, out) in (s..).zip(chunk.chunks_mut(len)) {
                    let (q, panel) = (t / panels, t % panels);
                    let first = panel * L;
                    let base = src.at(q as isize * bs + first as isize * ls) as *const u16;
                    // SAFETY: lines first..first + n of batch q, elements 0..k: inside the operand
                    // (shape checked by the caller); `available()` was checked.
                    unsafe { pack::panel::<L>(base, ls, ks, (lines - first).min(L), k, out) };
                }
            },
        );
        packed
    }

    pub fn matmul(
        out: &TensorMut,
        a: &TensorRef,
        b: &TensorRef,
        c: Option<&TensorRef>,
        beta: &Scalar,
        alpha: &Scalar,
    ) {
        let (batches, m, k, n) = (a.shape[0], a.shape[1], a.shape[2], b.shape[2]);
        let (alpha, beta) = (f32::from_scalar(alpha), f32::from_scalar(beta));
        let c = c.filter(|_| beta != 0.0);
        let parallel = batches * m * n * k.max(1) >= GEMM_PARALLEL_FLOPS;
        if super::rows::takes(a) {
            // A read in place or interleaved per block, B packed per block (rows.rs).
            let kc = depth_pairs(k.div_ceil(2));
            return super::rows::matmul(out, a, b, c, (alpha, beta), parallel, kc);
        }
        packed(out, a, b, c, (alpha, beta), parallel);
    }

    /// [`matmul`] with both operands packed whole, for any strides (`alpha`, `beta` as floats,
    /// `c` `None` when `beta` is 0).
    pub(super) fn packed(
        out: &TensorMut,
        a: &TensorRef,
        b: &TensorRef,
        c: Option<&TensorRef>,
        (alpha, beta): (f32, f32),
        parallel: bool,
    ) {
        let (batches, m, k, n) = (a.shape[0], a.shape[1], a.shape[2], b.shape[2]);
        let (sa, sb) = (&a.strides, &b.strides);
        // A's lines are its rows; B's lines are its columns (so its k stride is the row stride).
        let pa = pack_all::<MR>(a.ptr as _, sa[0], sa[1], sa[2], batches, m, k, parallel);
        let pb = pack_all::<NR>(b.ptr as _, sb[0], sb[2], sb[1], batches, n, k, parallel);
        let (mc, nc) = block_shape(batches, m, n, parallel);
        let (mb, nb) = (m.div_ceil(mc), n.div_ceil(nc));
        let tasks = batches * mb * nb;
        let o = SendPtr::<u16>::of(out.ptr);
        let cp = SendPtr::<u16>::of(c.map_or(std::ptr::null(), |c| c.ptr));
        let (os, cs) = (&out.strides, c.map(|c| &c.strides));
        parallel_for(tasks, if parallel { 1 } else { tasks }, &|s, e| {
            // Each block's rows and columns are written (`block`) before `store` reads them.
            with_scratch::<f32, _>(MC * NC, |acc| {
                for t in s..e {
                    let (q, i0, j0) = (t / (mb * nb), (t / nb) % mb * mc, t % nb * nc);
                    let (rows, cols) = ((m - i0).min(mc), (n - j0).min(nc));
                    block(&pa, &pb, q, i0, j0, rows, cols, acc);
                    for i in 0..rows {
                        let (qi, ii) = (q as isize, (i0 + i) as isize);
                        let dst = o.at(qi * os[0] + ii * os[1] + j0 as isize * os[2]);
                        let src = cs.map(|cs| {
                            let p =
                                cp.at(qi * cs[0] + ii * cs[1] + j0 as isize * cs[2]) as *const u16;
                            (p, cs[2])
                        });
                        let row = &acc[i * NC..i * NC + cols];
                        // SAFETY: row i0 + i, columns j0..j0 + cols of batch q lie in the output
                        // (and in `c`); this task is the only writer of its block.
                        unsafe { store::row(row, dst, os[2], src, alpha, beta) };
                    }
                }
            });
        });
    }

    /// Rows and columns of a task's block: `MC x NC`, made smaller (down to two register
    /// tiles by one) while a parallel product has fewer than four tasks per thread, so that
    /// mid-sized products (a 256 x 256 mm is one column of three blocks) keep every thread busy.
    fn block_shape(batches: usize, m: usize, n: usize, parallel: bool) -> (usize, usize) {
        let (mut mc, mut nc) = (MC, NC);
        let want = 4 * crate::runtime::pool::num_threads();
        let tasks = |mc: usize, nc: usize| batches * m.div_ceil(mc) * n.div_ceil(nc);
        while parallel && tasks(mc, nc) < want {
            if mc > 2 * MR && (mc >= nc / 2 || nc == NR) {
                mc = (mc / 2).div_ceil(MR) * MR;
            } else if nc > NR {
                nc /= 2;
            } else {
                break;
            }
        }
        (mc, nc)
    }

    /// The float32 product of the block at rows `i0..`, columns `j0..` of batch `q` into `acc`
    /// (row stride `NC`), over all of `k`.
    #[allow(clippy::too_many_arguments)]
    fn block(
        pa: &Packed,
        pb: &Packed,
        q: usize,
        i0: usize,
        j0: usize,
        rows: usize,
        cols: usize,
        acc: &mut [f32],
    ) {
        let pairs = pa.pairs;
        let kcp = depth_pairs(pairs);
        if pairs == 0 {
            acc.fill(0.0);
            return;
        }
        let (ips, jps) = (rows.div_ceil(MR), cols.div_ceil(NR));
        for p0 in (0..pairs).step_by(kcp) {
            let kc = (pairs - p0).min(kcp);
            for jp in 0..jps {
                let bp = pb.at::<NR>(q, j0 / NR + jp, p0);
                for ip in 0..ips {
                    let ap = pa.at::<MR>(q, i0 / MR + ip, p0);
                    let rows = std::array::from_fn(|r| ap.wrapping_add(r));
                    let tile = acc[ip * MR * NC + jp * NR..].as_mut_ptr();
                    // SAFETY: the panels hold `kc` pairs from `p0` (they hold `pairs`); the
                    // tile's MR rows of NR floats at stride NC lie in `acc` (MC x NC);
                    // `available()` was checked.
                    unsafe { microkernel::tile(kc, &rows, MR, bp, tile, NC, p0 == 0) };
                }
            }
        }
    }
}
