//! The bfloat16 product when A's rows or A's columns hold their elements adjacent: the output
//! is cut into blocks (columns first, as `gemm::linear` cuts a float32 linear layer), each run
//! by one thread, which packs its own columns of B and reads A
//! - in place when its rows are dense and `k` is even (A row-major, as activations are): each
//!   pair of a row is already the u32 that the microkernel broadcasts;
//! - else, when its lines are adjacent (a transposed A: the weight gradient's `x.t()`), from
//!   its own copy of the block's rows, interleaved pair by pair (`[pairs][rows]` u32, one
//!   vectorized run per pair).
//!
//! No packed operand is shared between threads. Why: with A and B packed whole by all threads
//! and every block reading them ([`super::imp`]), a thread's tiles read panels the other core
//! had written, and the next product's packing wrote lines the other core held. On a Zen 4 (2
//! threads), its microkernel ran 6.5% slower than on one thread, and where the host placed the
//! two vCPUs far apart, packing B took a fifth of a 520 x 768 x 256 product (a tenth of its
//! one-thread cost per byte). A transposed A, packed into 6-line panels one call per pair and
//! panel, had its packing at a fifth of a 1024 x 256 x 256 product.

use super::microkernel::{self, MR, NR};
use super::{pack, store};
use crate::kernels::core::parallel::{parallel_for, SendPtr};
use crate::kernels::core::scratch::{with_scratch, with_scratch2};
use crate::runtime::pool;
use crate::tensor::{TensorMut, TensorRef};

/// Bytes of A's rows that one pass over a block's panels reads, so that they stay in L2
/// (`gemm::linear`'s `ROWS_BYTES`).
const ROWS_BYTES: usize = 256 << 10;

/// Whether [`matmul`] takes a product with this A (`[batch, m, k]`): `k > 0`, and either its
/// rows dense with `k` even or its lines (the `m` elements of one `k`) adjacent.
pub(super) fn takes(a: &TensorRef) -> bool {
    let k = a.shape[2];
    k > 0 && (in_place(a) || a.strides[1] == 1)
}

/// Whether A's pairs are read where they lie.
fn in_place(a: &TensorRef) -> bool {
    a.strides[2] == 1 && a.shape[2] % 2 == 0
}

/// `out = alpha * (a @ b) + beta * c` for [`super::imp::matmul`]'s operands, where [`takes`]
/// holds for `a`, the tiles passing over `kc` pairs of the depth at a time ([`super::depth_pairs`]
/// gives the CPU's); `c` is `None` when `beta` is 0.
pub(super) fn matmul(
    out: &TensorMut,
    a: &TensorRef,
    b: &TensorRef,
    c: Option<&TensorRef>,
    (alpha, beta): (f32, f32),
    parallel: bool,
    kc: usize,
) {
    let (batches, m, k, n) = (a.shape[0], a.shape[1], a.shape[2], b.shape[2]);
    debug_assert!(takes(a));
    let panels = n.div_ceil(NR);
    let parts = match parallel {
        true => pool::num_threads(),
        false => 1,
    };
    // Columns first: a block packs only its own columns of B. Rows too when there are fewer
    // panels than parts, or many more rows than columns (each block packs B's columns again).
    let col_blocks = match 8 * n >= m {
        true => parts.min(panels),
        false => 1,
    };
    let row_blocks = (parts / col_blocks).clamp(1, m.div_ceil(MR));
    let panels_per = panels.div_ceil(col_blocks);
    let col_blocks = panels.div_ceil(panels_per);
    let rows_per = m.div_ceil(row_blocks).next_multiple_of(MR);
    let row_blocks = m.div_ceil(rows_per);
    let per_batch = row_blocks * col_blocks;
    let tasks = batches * per_batch;
    let op = Operands {
        out: SendPtr::<u16>::of(out.ptr),
        os: [out.strides[0], out.strides[1], out.strides[2]],
        a: SendPtr::<u16>::of(a.ptr),
        sa: [a.strides[0], a.strides[1], a.strides[2]],
        a_in_place: in_place(a),
        b: SendPtr::<u16>::of(b.ptr),
        sb: [b.strides[0], b.strides[1], b.strides[2]],
        c: c.map(|c| {
            let s = &c.strides;
            (SendPtr::<u16>::of(c.ptr), [s[0], s[1], s[2]])
        }),
        k,
        n,
        kc: kc.max(1),
        alpha,
        beta,
    };
    parallel_for(tasks, if parallel { 1 } else { tasks }, &|s, e| {
        for t in s..e {
            let (q, blk) = (t / per_batch, t % per_batch);
            let (bi, bj) = (blk / col_blocks, blk % col_blocks);
            let rows = bi * rows_per..((bi + 1) * rows_per).min(m);
            let first = bj * panels_per;
            block(&op, q, rows, first..(first + panels_per).min(panels));
        }
    });
}

/// The product's operands: pointers and strides in elements (`[batch, row, column]`).
struct Operands {
    out: SendPtr<u16>,
    os: [isize; 3],
    a: SendPtr<u16>,
    sa: [isize; 3],
    /// A's pairs read where they lie ([`in_place`]); else interleaved per block.
    a_in_place: bool,
    b: SendPtr<u16>,
    sb: [isize; 3],
    c: Option<(SendPtr<u16>, [isize; 3])>,
    k: usize,
    n: usize,
    /// `k`-pairs per pass of the tiles over a panel ([`super::depth_pairs`]).
    kc: usize,
    alpha: f32,
    beta: f32,
}

/// Rows `rows` of batch `q`'s output at the columns of panels `panels`, on the calling thread.
fn block(op: &Operands, q: usize, rows: std::ops::Range<usize>, panels: std::ops::Range<usize>) {
    let pairs = op.k.div_ceil(2);
    let qi = q as isize;
    let block_rows = (ROWS_BYTES / (4 * pairs)).max(1).next_multiple_of(MR);
    let acc_rows = block_rows.min(rows.len().next_multiple_of(MR));
    let kc = op.kc;
    // The interleaved A's pairs are `stride` u32 apart, an odd number of cache lines, so that a
    // tile's lines (one per pair) spread over all the sets of L1 (1 KiB apart, 128 pairs fell
    // in 4 sets of 8 ways, and a 256 x 256 x 1024 product on 1 thread took 9% longer).
    let mut stride = rows.len().next_multiple_of(16);
    if stride / 16 % 2 == 0 {
        stride += 16;
    }
    let a_len = if op.a_in_place { 0 } else { pairs * stride };
    with_scratch2::<f32, f32, _>(panels.len() * pairs * NR, a_len, |buf, a_buf| {
        // SAFETY: u32 and f32 have one size and alignment; every bit pattern is a valid u32.
        let packed: &mut [u32] =
            unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast(), buf.len()) };
        pack_b(op, q, &panels, packed);
        // SAFETY: as above.
        let a_pairs: &mut [u32] =
            unsafe { std::slice::from_raw_parts_mut(a_buf.as_mut_ptr().cast(), a_buf.len()) };
        if !op.a_in_place {
            interleave_a(op, q, &rows, stride, a_pairs);
        }
        // Row `i` of A (within the product) and the u32s between its pairs.
        let (a_rows, step) = match op.a_in_place {
            true => (op.a.at(qi * op.sa[0]) as *const u16, 1),
            false => (a_pairs.as_ptr() as *const u16, stride),
        };
        let row = |i: usize| match op.a_in_place {
            true => a_rows.wrapping_offset(i as isize * op.sa[1]) as *const u32,
            false => (a_rows as *const u32).wrapping_add(i - rows.start),
        };
        with_scratch::<f32, _>(acc_rows * NR, |acc| {
            for r0 in rows.clone().step_by(block_rows) {
                let r1 = (r0 + block_rows).min(rows.end);
                for (i, panel) in packed.chunks_exact(pairs * NR).enumerate() {
                    for p0 in (0..pairs).step_by(kc) {
                        let depth = kc.min(pairs - p0);
                        for (ti, t) in (r0..r1).step_by(MR).enumerate() {
                            // Rows past the block's end read its last row; their sums are dropped.
                            let at: [*const u32; MR] = std::array::from_fn(|j| {
                                row((t + j).min(r1 - 1)).wrapping_add(p0 * step)
                            });
                            let tile = acc[ti * MR * NR..].as_mut_ptr();
                            // SAFETY: each row's pairs p0..p0 + depth are u32s `step` apart (in
                            // place: k even, adjacent; interleaved: the block's copy); the panel
                            // holds `pairs * NR` u32; the tile's MR rows of NR floats lie in
                            // `acc` (acc_rows is a multiple of MR that covers r0..r1); the
                            // caller routed here only with AVX512-BF16.
                            unsafe {
                                microkernel::tile(
                                    depth,
                                    &at,
                                    step,
                                    panel[p0 * NR..].as_ptr(),
                                    tile,
                                    NR,
                                    p0 == 0,
                                )
                            };
                        }
                    }
                    let c0 = (panels.start + i) * NR;
                    let cols = NR.min(op.n - c0);
                    for r in r0..r1 {
                        let ri = r as isize;
                        let c0i = c0 as isize;
                        let dst = op.out.at(qi * op.os[0] + ri * op.os[1] + c0i * op.os[2]);
                        let src = op.c.as_ref().map(|(p, s)| {
                            (p.at(qi * s[0] + ri * s[1] + c0i * s[2]) as *const u16, s[2])
                        });
                        let sums = &acc[(r - r0) * NR..(r - r0) * NR + cols];
                        // SAFETY: row r, columns c0..c0 + cols of batch q lie in the output (and
                        // in `c`); this block is their only writer.
                        unsafe { store::row(sums, dst, op.os[2], src, op.alpha, op.beta) };
                    }
                }
            }
        });
    });
}

/// Batch `q`'s A at rows `rows` (its lines adjacent: `sa[1] == 1`) interleaved into `out`:
/// `out[p * stride + i] = a[rows.start + i][2p] | a[..][2p + 1] << 16`, the high half zero past
/// `k`.
fn interleave_a(
    op: &Operands,
    q: usize,
    rows: &std::ops::Range<usize>,
    stride: usize,
    out: &mut [u32],
) {
    let (k, ks) = (op.k, op.sa[2]);
    let first = op.a.at(q as isize * op.sa[0] + rows.start as isize) as *const u16;
    for p in 0..k.div_ceil(2) {
        let lo = first.wrapping_offset(2 * p as isize * ks);
        let hi = (2 * p + 1 < k).then(|| lo.wrapping_offset(ks));
        // SAFETY: elements 2p (and 2p + 1) of the block's rows, adjacent (sa[1] == 1); pair p's
        // run of `out` holds rows.len() <= stride u32; the CPU has AVX512-BF16 (so F/BW).
        unsafe { pack::pair_run(lo, hi, rows.len(), out[p * stride..].as_mut_ptr()) };
    }
}

/// Batch `q`'s columns of `panels` of B, all `k`, into `packed` (panel after panel, each
/// `pairs x NR` u32, zeros past the last column).
fn pack_b(op: &Operands, q: usize, panels: &std::ops::Range<usize>, packed: &mut [u32]) {
    let (k, pairs) = (op.k, op.k.div_ceil(2));
    let [bs, ks, ls] = op.sb;
    let base = |p: usize, line: usize| {
        op.b.at(q as isize * bs + p as isize * ks + line as isize * ls) as *const u16
    };
    if ls == 1 {
        // Columns adjacent (B row-major): pair by pair over the block's panels, so that each
        // of B's rows is read from start to end once (see pack::line_pair).
        for p in 0..pairs {
            for (i, panel) in panels.clone().enumerate() {
                let first = panel * NR;
                let lo = base(2 * p, first);
                let hi = (2 * p + 1 < k).then(|| lo.wrapping_offset(ks));
                let dst = packed[(i * pairs + p) * NR..].as_mut_ptr();
                // SAFETY: rows 2p (and 2p + 1 < k) of batch q hold columns first..first + lines;
                // pair p of panel i lies in `packed`; the CPU has AVX512-BF16 (so F/BW).
                unsafe { pack::line_pair::<NR>(lo, hi, (op.n - first).min(NR), dst) };
            }
        }
        return;
    }
    for (i, panel) in panels.clone().enumerate() {
        let first = panel * NR;
        let out = &mut packed[i * pairs * NR..(i + 1) * pairs * NR];
        // SAFETY: columns first..first + lines of batch q, elements 0..k, lie in B; the CPU
        // has AVX512-BF16 (so F/BW).
        unsafe { pack::panel::<NR>(base(0, first), ls, ks, (op.n - first).min(NR), k, out) };
    }
}
