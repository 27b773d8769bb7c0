//! The reduction driver: splits the input's dims into kept and reduced ones, coalesces each
//! group, and walks them in one of three patterns:
//!
//! * **inner** (the input's innermost dim is reduced): every output folds contiguous rows
//!   (vectorized, pairwise for sums); parallel over outputs, or over fixed-size chunks of the
//!   reduction when there are few outputs (full reductions), merged in chunk order.
//! * **outer** (the input's innermost dim is kept): rows of the input are folded column-wise
//!   into a block of accumulators (vectorized across columns); parallel over column blocks,
//!   or over fixed-size chunks of the reduction when there are few blocks.
//! * **general** strided inputs use the inner pattern's walk with strided rows.
//!
//! Chunk sizes depend on the shape only, never on the thread count, so results are
//! bit-identical with any number of threads. Only [`Reducer`] methods are monomorphized per
//! op and dtype; the planning is shared.

use crate::error::FooResult;
use crate::invalid_arg;
use crate::kernels::core::element::Element;
use crate::kernels::core::layout::{coalesce, for_each_row, Layout, GRAIN};
use crate::kernels::core::parallel::{par_chunks_mut, parallel_for, SendPtr};
use crate::tensor::{TensorMut, TensorRef};

/// Elements of the reduction handled by one task when a reduction is split across threads.
pub const SPLIT: usize = 1 << 15;
/// Inputs below this many elements run on the calling thread: a pool hand-off costs several
/// microseconds. Measured on 2 threads (Xeon, session 51), 1 << 19 -> 1 << 17: a linear
/// layer's bias gradient `[520, 768].sum(0)` 18.8 -> 11.4 us (CPU 14.7), `[520, 768].sum(1)`
/// 18-22 -> 10 us (CPU 13-14), `amax(1)` 33-35 -> 19-21 us (CPU 21); from 1 << 15, inputs of
/// 64K-128K elements gained nothing consistent.
pub const PAR_MIN: usize = 1 << 17;

/// `f(0, n)` on the calling thread for small work (`total` input elements), else
/// [`parallel_for`] with `grain`.
pub fn par(total: usize, n: usize, grain: usize, f: &(dyn Fn(usize, usize) + Sync)) {
    parallel_for(n, par_grain(total, grain), f);
}

/// The grain that makes [`parallel_for`] behave as [`par`]: no split below [`PAR_MIN`] input
/// elements.
fn par_grain(total: usize, grain: usize) -> usize {
    if total < PAR_MIN {
        usize::MAX
    } else {
        grain
    }
}
/// Columns per task in the outer pattern (the accumulator block stays in L1).
const COLS: usize = 1024;
/// Rows folded into a temporary block before it is merged (a two-level cascade for accuracy).
pub const CASCADE: usize = 128;

/// One reduction op over one element type.
pub trait Reducer: Sync {
    type In: Element;
    type Acc: Copy + Send + Sync;
    fn init(&self) -> Self::Acc;
    /// Folds `len` elements at `p`, `p + s`, ... into `acc`; `idx` is the reduction index of
    /// the first one (the position along the reduced dim, for arg reductions).
    ///
    /// # Safety
    /// All `len` elements must be readable.
    unsafe fn row(&self, acc: &mut Self::Acc, p: *const Self::In, len: usize, s: isize, idx: usize);
    /// `accs[j]` folds `p[j]` for every j (one input row, contiguous), at reduction index `idx`.
    ///
    /// # Safety
    /// `p[0..accs.len()]` must be readable.
    unsafe fn cols(&self, accs: &mut [Self::Acc], p: *const Self::In, idx: usize);
    /// Input rows folded into a temporary block of `cols` accumulators before it is merged
    /// (see [`CASCADE`]) when rows are `rs` elements apart. A reducer that folds several short
    /// rows into one accumulator each takes proportionally more.
    fn cascade_rows(&self, cols: usize, rs: isize) -> usize {
        let _ = (cols, rs);
        CASCADE
    }
    /// [`Reducer::cols`] over `rows` input rows, row k at `p + k * rs` (reduction index
    /// `idx + k`). Reducers override it to keep a block of accumulators in registers across
    /// the rows instead of loading and storing `accs` once per row.
    ///
    /// # Safety
    /// `p + k * rs + [0..accs.len()]` must be readable for every `k < rows`.
    #[inline(always)]
    unsafe fn cols_rows(
        &self,
        accs: &mut [Self::Acc],
        p: *const Self::In,
        rows: usize,
        rs: isize,
        idx: usize,
    ) {
        for k in 0..rows {
            // SAFETY: caller's contract.
            unsafe { self.cols(accs, p.offset(k as isize * rs), idx + k) };
        }
    }
    /// Combines `a` with `b`, which covers later reduction indices.
    fn merge(&self, a: Self::Acc, b: Self::Acc) -> Self::Acc;
    /// Writes the result of `n` folded elements at element offsets `o1` (first output) and
    /// `o2` (second output, when the op has one).
    ///
    /// # Safety
    /// The offsets must address elements of the outputs the reducer was built with.
    unsafe fn finish(&self, acc: Self::Acc, n: usize, o1: isize, o2: isize);
}

/// The dims of a reduction, split and coalesced.
#[derive(Debug)]
pub struct Plan {
    /// Kept dims; operands: input, output 1, output 2 (ordered by the input's strides).
    pub kept: Layout<3>,
    /// Reduced dims; operand: input.
    pub red: Layout<1>,
    /// Number of outputs and of elements folded into each.
    pub n: usize,
    pub m: usize,
}

/// Plans reducing `input` into `out` (and `out2`), which have the input's rank with size 1 at
/// reduced dims (the glue restrides keepdim=False outputs so).
pub fn plan(input: &TensorRef, out: &TensorMut, out2: Option<&TensorMut>) -> FooResult<Plan> {
    let nd = input.ndim();
    if out.ndim() != nd || out2.is_some_and(|o| o.shape != out.shape) {
        return invalid_arg!(
            "reduce: output shape {:?} does not match the input rank {nd}",
            out.shape
        );
    }
    let s2 = out2.map_or(&out.strides, |o| &o.strides);
    let (mut ks, mut ki, mut ko1, mut ko2) = (vec![], vec![], vec![], vec![]);
    let (mut rs, mut ri) = (vec![], vec![]);
    for (d, (&n, &o)) in input.shape.iter().zip(&out.shape).enumerate() {
        if o == n {
            ks.push(n);
            ki.push(input.strides[d]);
            ko1.push(out.strides[d]);
            ko2.push(s2[d]);
        } else if o == 1 {
            rs.push(n);
            ri.push(input.strides[d]);
        } else {
            return invalid_arg!(
                "reduce: output shape {:?} is not a reduction of {:?}",
                out.shape,
                input.shape
            );
        }
    }
    let kept = coalesce(&ks, [&ki, &ko1, &ko2]);
    let red = coalesce(&rs, [&ri]);
    Ok(Plan {
        n: kept.numel(),
        m: red.numel(),
        kept,
        red,
    })
}

fn inner<const N: usize>(l: &Layout<N>) -> [isize; N] {
    std::array::from_fn(|k| l.strides[k].last().copied().unwrap_or(0))
}

/// Offsets of kept element `i` (input, out1, out2).
fn kept_offsets(l: &Layout<3>, i: usize) -> [isize; 3] {
    let mut r = [0isize; 3];
    for_each_row(l, i, i + 1, &mut |off, _| r = off);
    r
}

/// Folds a row; long strided rows are gathered into a dense buffer first, so they take the
/// reducer's vectorized (and, for sums, pairwise) dense path.
///
/// # Safety
/// As [`Reducer::row`].
unsafe fn row_dense<R: Reducer>(
    r: &R,
    acc: &mut R::Acc,
    p: *const R::In,
    len: usize,
    s: isize,
    idx: usize,
) {
    const GATHER: usize = 1024;
    if s == 1 || len < 64 {
        // SAFETY: caller's contract.
        unsafe { r.row(acc, p, len, s, idx) };
        return;
    }
    let mut buf = [R::In::default(); GATHER];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(GATHER);
        for (k, b) in buf[..n].iter_mut().enumerate() {
            // SAFETY: element done + k < len of the row (caller's contract).
            *b = unsafe { *p.offset((done + k) as isize * s) };
        }
        // SAFETY: the buffer holds n dense elements.
        unsafe { r.row(acc, buf.as_ptr(), n, 1, idx + done) };
        done += n;
    }
}

crate::unsafe_multiversion!(
    /// [`Reducer::cols_rows`] compiled for AVX-512 / AVX2 where the CPU has them (the
    /// reducers' `cols` are `#[inline(always)]` so they inherit the features).
    ///
    /// # Safety
    /// As [`Reducer::cols_rows`].
    unsafe fn cols_fast<R: Reducer>(
        r: &R,
        accs: &mut [R::Acc],
        p: *const R::In,
        rows: usize,
        rs: isize,
        idx: usize,
    ) {
        // SAFETY: caller's contract.
        unsafe { r.cols_rows(accs, p, rows, rs, idx) }
    }
);

/// Dense rows of a reduction: row j starts at input element `j * strides[0]` and has `m`
/// contiguous elements; its results go to output offsets `j * strides[1]`, `j * strides[2]`.
struct Rows<T> {
    base: SendPtr<T>,
    m: usize,
    strides: [isize; 3],
}

crate::unsafe_multiversion!(
    /// Reduces dense rows `s..e`, compiled for AVX-512 / AVX2 where the CPU has them, so the
    /// per-row folds inline instead of dispatching once per row (1000 rows of 1000: a tenth of
    /// the time).
    ///
    /// # Safety
    /// The rows must lie inside the input, the offsets inside the reducer's outputs.
    unsafe fn rows_fast<R: Reducer>(r: &R, rows: &Rows<R::In>, s: usize, e: usize) {
        let [ki, ko1, ko2] = rows.strides;
        for j in s as isize..e as isize {
            let mut acc = r.init();
            let p = rows.base.at(j * ki) as *const R::In;
            // SAFETY: caller's contract.
            unsafe {
                r.row(&mut acc, p, rows.m, 1, 0);
                r.finish(acc, rows.m, j * ko1, j * ko2);
            }
        }
    }
);

/// Runs `r` over the plan; `input` is the address of input element 0.
pub fn run<R: Reducer>(r: &R, p: &Plan, input: *const u8) {
    if p.n == 0 {
        return;
    }
    let base = SendPtr::<R::In>::of(input);
    let at = move |off: isize| base.at(off) as *const R::In;
    let rs = inner(&p.red)[0];
    let one_dim = p.red.shape.len() <= 1;
    let fold = |acc: &mut R::Acc, io: isize, r0: usize, r1: usize| {
        if one_dim {
            // One reduced dim (or none): a single row, no index bookkeeping.
            if r0 < r1 {
                // SAFETY: elements r0..r1 of the reduced dim lie inside the input.
                unsafe { row_dense(r, acc, at(io + r0 as isize * rs), r1 - r0, rs, r0) };
            }
            return;
        }
        let mut pos = r0;
        for_each_row(&p.red, r0, r1, &mut |off, len| {
            // SAFETY: the row lies inside the input (offsets come from its shape/strides).
            unsafe { row_dense(r, acc, at(io + off[0]), len, rs, pos) };
            pos += len;
        });
    };
    let [ki, ko1, ko2] = inner(&p.kept);
    let l = p.kept.shape.last().copied().unwrap_or(1);
    let outer = !p.kept.shape.is_empty() && ki == 1 && rs != 1 && p.m > 1 && l >= 8;
    if outer {
        run_outer(r, p, at, rs);
        return;
    }
    if p.m < SPLIT || p.n >= 64 {
        let grain = (GRAIN / p.m.max(1)).max(1);
        if one_dim && rs == 1 && p.kept.shape.len() == 1 {
            // Dense rows (sum(dim=-1) of a matrix): one dispatched call per chunk of rows.
            let rows = Rows {
                base,
                m: p.m,
                strides: [ki, ko1, ko2],
            };
            par(p.n * p.m, p.n, grain, &|s, e| {
                // SAFETY: rows s..e of the plan's input and outputs.
                unsafe { rows_fast(r, &rows, s, e) }
            });
            return;
        }
        par(p.n * p.m, p.n, grain, &|s, e| {
            for_each_row(&p.kept, s, e, &mut |off, len| {
                for j in 0..len as isize {
                    let mut acc = r.init();
                    fold(&mut acc, off[0] + j * ki, 0, p.m);
                    // SAFETY: output offsets come from the outputs' shape/strides.
                    unsafe { r.finish(acc, p.m, off[1] + j * ko1, off[2] + j * ko2) };
                }
            })
        });
        return;
    }
    // Few outputs, long reductions: fixed-size chunks of the reduction, merged in order.
    let chunks = p.m.div_ceil(SPLIT);
    let offs: Vec<[isize; 3]> = (0..p.n).map(|i| kept_offsets(&p.kept, i)).collect();
    let mut parts: Vec<R::Acc> = vec![r.init(); p.n * chunks];
    par_chunks_mut(&mut parts, par_grain(p.n * p.m, 1), &|s, slots| {
        for (t, slot) in (s..).zip(slots) {
            let (o, c) = (t / chunks, t % chunks);
            let mut acc = r.init();
            fold(&mut acc, offs[o][0], c * SPLIT, ((c + 1) * SPLIT).min(p.m));
            *slot = acc;
        }
    });
    for (o, off) in offs.iter().enumerate() {
        let ps = &parts[o * chunks..(o + 1) * chunks];
        let acc = ps[1..].iter().fold(ps[0], |a, &b| r.merge(a, b));
        // SAFETY: output offsets come from the outputs' shape/strides.
        unsafe { r.finish(acc, p.m, off[1], off[2]) };
    }
}

fn run_outer<R: Reducer>(r: &R, p: &Plan, at: impl Fn(isize) -> *const R::In + Sync, rs: isize) {
    let l = *p.kept.shape.last().unwrap();
    let [_, ko1, ko2] = inner(&p.kept);
    let rows = p.n / l;
    let blocks = l.div_ceil(COLS);
    let tasks = rows * blocks;
    let splits = if tasks < 8 && p.m * l >= 4 * GRAIN {
        (p.m * l / (2 * GRAIN)).clamp(1, 64).min(p.m)
    } else {
        1
    };
    let per = p.m.div_ceil(splits);
    let cascade = r.cascade_rows(l.min(COLS), rs);
    // Folds reduction indices r0..r1 of kept row `row`, columns c0..c1, into `accs` (freshly
    // initialised), through `tmp` when the range needs more than one cascade.
    let work = |row: usize,
                c0: usize,
                r0: usize,
                r1: usize,
                accs: &mut [R::Acc],
                tmp: &mut Vec<R::Acc>| {
        let io = kept_offsets(&p.kept, row * l)[0] + c0 as isize;
        if r1 - r0 <= cascade {
            // One cascade: fold straight into `accs`, which start at the identity (a short
            // reduction, [4, 250000].sum(0), spent most of its time on the temporary block).
            let mut pos = r0;
            for_each_row(&p.red, r0, r1, &mut |off, len| {
                // SAFETY: len input rows of `accs.len()` contiguous kept elements, `rs` apart.
                unsafe { cols_fast(r, accs, at(io + off[0]), len, rs, pos) };
                pos += len;
            });
            return;
        }
        tmp.clear();
        tmp.resize(accs.len(), r.init());
        let mut count = 0;
        let mut pos = r0;
        for_each_row(&p.red, r0, r1, &mut |off, len| {
            let mut k = 0;
            while k < len {
                let n = (len - k).min(cascade - count);
                let row = at(io + off[0] + k as isize * rs);
                // SAFETY: n input rows of `accs.len()` contiguous kept elements, `rs` apart.
                unsafe { cols_fast(r, tmp, row, n, rs, pos + k) };
                count += n;
                k += n;
                if count == cascade {
                    for (a, t) in accs.iter_mut().zip(tmp.iter_mut()) {
                        *a = r.merge(*a, *t);
                        *t = r.init();
                    }
                    count = 0;
                }
            }
            pos += len;
        });
        if count > 0 {
            for (a, t) in accs.iter_mut().zip(tmp.iter()) {
                *a = r.merge(*a, *t);
            }
        }
    };
    let total = p.n * p.m;
    if splits == 1 {
        par(total, tasks, 1, &|s, e| {
            let (mut accs, mut tmp) = (Vec::with_capacity(COLS), Vec::with_capacity(COLS));
            for t in s..e {
                let (row, b) = (t / blocks, t % blocks);
                let (c0, c1) = (b * COLS, ((b + 1) * COLS).min(l));
                accs.clear();
                accs.resize(c1 - c0, r.init());
                work(row, c0, 0, p.m, &mut accs, &mut tmp);
                let o = kept_offsets(&p.kept, row * l);
                for (j, &a) in (c0..c1).zip(&accs) {
                    let j = j as isize;
                    // SAFETY: output offsets come from the outputs' shape/strides.
                    unsafe { r.finish(a, p.m, o[1] + j * ko1, o[2] + j * ko2) };
                }
            }
        });
        return;
    }
    // Few column blocks, long reductions: split the reduction in fixed chunks, merge in order.
    let mut parts: Vec<R::Acc> = vec![r.init(); rows * splits * l];
    let parts_ptr = SendPtr::new(parts.as_mut_ptr());
    par(total, tasks * splits, 1, &|s, e| {
        let pp = parts_ptr;
        let mut tmp = Vec::with_capacity(COLS);
        for t in s..e {
            let (rb, sp) = (t / splits, t % splits);
            let (row, b) = (rb / blocks, rb % blocks);
            let (c0, c1) = (b * COLS, ((b + 1) * COLS).min(l));
            let start = (row * splits + sp) * l + c0;
            // SAFETY: each (row, split, block) owns columns c0..c1 of its part row.
            let accs = unsafe { pp.slice_mut(start, c1 - c0) };
            work(row, c0, sp * per, ((sp + 1) * per).min(p.m), accs, &mut tmp);
        }
    });
    // Merge split by split over whole rows (contiguous, same order per column as one column at
    // a time: a strided walk over the splits made this serial tail cost as much as the
    // parallel part on 2 threads).
    for row in 0..rows {
        let o = kept_offsets(&p.kept, row * l);
        let (first, rest) = parts[row * splits * l..(row + 1) * splits * l].split_at_mut(l);
        for part in rest.chunks_exact(l) {
            for (a, &b) in first.iter_mut().zip(part) {
                *a = r.merge(*a, b);
            }
        }
        for (j, &acc) in first.iter().enumerate() {
            let jj = j as isize;
            // SAFETY: output offsets come from the outputs' shape/strides.
            unsafe { r.finish(acc, p.m, o[1] + jj * ko1, o[2] + jj * ko2) };
        }
    }
}
