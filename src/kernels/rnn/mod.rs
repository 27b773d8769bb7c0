//! The fused pointwise tails of LSTM and GRU cells (`_thnn_fused_lstm_cell`,
//! `_thnn_fused_gru_cell`) and their backwards, with CUDA's math and workspace layouts
//! (aten/src/ATen/native/cuda/RNN.cu), because PyTorch's RNN loop calls these ops on every
//! device but CPU and autograd hands our own workspace back to the backward.
//!
//! Operands are `[B, k*H]` matrices (gate `g` of row `r` is columns `g*H..(g+1)*H`). Each batch
//! row is one unit of work: its segments are used in place when the storage type is its own math
//! type and columns are unit-stride (the contiguous case), and gathered into a small math-type
//! buffer otherwise (float16/bfloat16, or a strided operand). Biases may be any float dtype
//! (read once into math-type vectors). Math runs in `FloatStore::M`, as CUDA's `accscalar_t`;
//! stored values (outputs, workspace) round to the storage type, and backward reads them back.
//!
//! Bias gradients are column sums of the gate gradients over the batch: CUDA takes
//! `grad_gates.sum(0)` afterwards; here each fixed block of rows adds its rows into its own
//! partial sums while it computes them, and the blocks are added in order, so the result does
//! not depend on the thread count.

mod cell_avx512;
mod layer;
mod panels_avx512;
pub use layer::{lstm_layer, lstm_layer_backward, projects_input};

use crate::dtype::DType;
use crate::error::FooResult;
use crate::kernels::core::element::Element;
use crate::kernels::core::float::{FloatStore, Math};
use crate::kernels::core::io::{read_vec, write_vec};
use crate::kernels::core::layout::GRAIN;
use crate::kernels::core::parallel::{parallel_for, SendPtr};
use crate::kernels::core::simd::Isa;
use crate::tensor::{TensorMut, TensorRef};
use crate::{invalid_arg, multiversion, not_implemented};
use num_traits::{One, Zero};

/// Blocks of rows for the bias-gradient column sums (a fixed count: results do not depend on
/// the thread count).
const COL_BLOCKS: usize = 64;

/// Relative cost of one gate element against one elementwise op (the transcendentals dominate),
/// to size parallel chunks.
const GATE_COST: usize = 4;

/// A `[rows, cols]` operand of storage type `F` with any strides (in elements). Only
/// non-empty operands are read through one: an empty tensor's data pointer may be null, and a
/// slice made from it would be undefined behaviour.
#[derive(Clone, Copy)]
struct Mat {
    p: SendPtr<u8>,
    s0: isize,
    s1: isize,
}

/// Checks that operand `what` is `[rows, cols]` of the kernel's dtype `want` (a [`Mat`] reads
/// exactly that many elements of that size).
fn check_mat(
    what: &str,
    shape: &[usize],
    dtype: DType,
    rows: usize,
    cols: usize,
    want: DType,
) -> FooResult<()> {
    if shape != [rows, cols] {
        return invalid_arg!(
            "rnn cell kernel: {what} has shape {shape:?}, expected [{rows}, {cols}]"
        );
    }
    if dtype != want {
        return invalid_arg!(
            "rnn cell kernel: {what} has dtype {}, expected {}",
            dtype.name(),
            want.name()
        );
    }
    Ok(())
}

impl Mat {
    fn of_ref<F: Element>(t: &TensorRef, rows: usize, cols: usize, what: &str) -> FooResult<Self> {
        check_mat(what, &t.shape, t.dtype, rows, cols, F::DTYPE)?;
        Ok(Mat {
            p: SendPtr::of(t.ptr),
            s0: t.strides[0],
            s1: t.strides[1],
        })
    }

    fn of_mut<F: Element>(t: &TensorMut, rows: usize, cols: usize, what: &str) -> FooResult<Self> {
        check_mat(what, &t.shape, t.dtype, rows, cols, F::DTYPE)?;
        Ok(Mat {
            p: SendPtr::of(t.ptr),
            s0: t.strides[0],
            s1: t.strides[1],
        })
    }

    /// Whether row segments can be used in place as math-type slices.
    #[inline(always)]
    fn direct<F: FloatStore>(&self) -> bool {
        self.s1 == 1 && F::as_math(&[]).is_some()
    }

    /// Scratch length a row segment of `len` elements needs (none when used in place).
    #[inline(always)]
    fn scratch<F: FloatStore>(&self, len: usize) -> usize {
        if self.direct::<F>() {
            0
        } else {
            len
        }
    }

    /// # Safety
    /// `(r, c)` must be inside the described matrix.
    #[inline(always)]
    unsafe fn at<F>(&self, r: usize, c: usize) -> *mut F {
        self.p
            .cast::<F>()
            .at(r as isize * self.s0 + c as isize * self.s1)
    }

    /// Row `r`, columns `c..c + len`, in math type: in place when [`Mat::direct`], else
    /// converted into `buf` (which then has at least `len` elements).
    ///
    /// # Safety
    /// The segment must be inside the matrix and not written meanwhile.
    #[inline(always)]
    unsafe fn get<'a, F: FloatStore>(
        &self,
        r: usize,
        c: usize,
        len: usize,
        buf: &'a mut [F::M],
    ) -> &'a [F::M] {
        if self.s1 == 1 {
            // SAFETY: unit-stride segment inside the matrix (caller's contract).
            let s: &'a [F] = unsafe { std::slice::from_raw_parts(self.at::<F>(r, c), len) };
            if let Some(m) = F::as_math(s) {
                return m;
            }
            for (b, &v) in buf[..len].iter_mut().zip(s) {
                *b = v.load();
            }
        } else {
            for (k, b) in buf[..len].iter_mut().enumerate() {
                // SAFETY: element (r, c + k) is inside the matrix (caller's contract).
                *b = unsafe { *self.at::<F>(r, c + k) }.load();
            }
        }
        &buf[..len]
    }

    /// Row `r`, columns `c..c + len`, to be written: in place when [`Mat::direct`], else `buf`,
    /// which [`Mat::put`] then stores.
    ///
    /// # Safety
    /// The segment must be inside the matrix and written by this caller only.
    #[inline(always)]
    unsafe fn out<'a, F: FloatStore>(
        &self,
        r: usize,
        c: usize,
        len: usize,
        buf: &'a mut [F::M],
    ) -> &'a mut [F::M] {
        if self.s1 == 1 {
            // SAFETY: unit-stride segment inside the matrix, written by this caller only.
            let s: &'a mut [F] = unsafe { std::slice::from_raw_parts_mut(self.at::<F>(r, c), len) };
            if let Some(m) = F::as_math_mut(s) {
                return m;
            }
        }
        &mut buf[..len]
    }

    /// Stores `vals` (from [`Mat::out`]) into row `r` from column `c` unless they already are.
    ///
    /// # Safety
    /// As [`Mat::out`].
    #[inline(always)]
    unsafe fn put<F: FloatStore>(&self, r: usize, c: usize, vals: &[F::M]) {
        if self.direct::<F>() {
            return;
        }
        for (k, &v) in vals.iter().enumerate() {
            // SAFETY: element (r, c + k) is inside the matrix, written by this caller only.
            unsafe { *self.at::<F>(r, c + k) = F::store(v) };
        }
    }
}

/// Splits `s` into `N` consecutive pieces of `h` elements.
#[inline(always)]
fn split<const N: usize, T>(s: &[T], h: usize) -> [&[T]; N] {
    std::array::from_fn(|k| &s[k * h..(k + 1) * h])
}

/// Mutable [`split`].
#[inline(always)]
fn split_mut<const N: usize, T>(s: &mut [T], h: usize) -> [&mut [T]; N] {
    let mut rest = &mut s[..N * h];
    std::array::from_fn(|_| {
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(h);
        rest = tail;
        head
    })
}

/// A bias of `n` elements in math type (zeros when absent: CUDA adds zeros too).
fn bias_vec<M: Math>(t: Option<&TensorRef>, n: usize, what: &str) -> FooResult<Vec<M>> {
    match t {
        None => Ok(vec![M::zero(); n]),
        Some(t) => {
            let v = read_vec::<M>(t)?;
            if v.len() != n {
                return invalid_arg!(
                    "rnn cell kernel: {what} has {} elements, expected {n}",
                    v.len()
                );
            }
            Ok(v)
        }
    }
}

/// `(batch, hidden)` of `[B, gates * H]` gates.
fn gate_dims(t: &TensorRef, gates: usize, op: &str) -> FooResult<(usize, usize)> {
    match t.shape.as_slice() {
        &[b, n] if n % gates == 0 => Ok((b, n / gates)),
        s => invalid_arg!("{op}: expected [B, {gates} * H] gates, got shape {s:?}"),
    }
}

/// Blocks of rows for a backward that sums columns (`nb` blocks of `per` rows; `nb == 0`: no
/// sums, split by rows). A block is at least half a grain of work, so a small batch keeps few
/// partial sums (one block per row of a [32, 4 * 256] LSTM step cost more in allocating and
/// adding the partial sums than the rows themselves), and at most [`COL_BLOCKS`] blocks; both
/// depend on the shape only.
fn blocks(rows: usize, row_cost: usize, sums: bool) -> (usize, usize) {
    if !sums {
        return (0, 0);
    }
    let min_rows = (GRAIN / 2 / row_cost.max(1)).max(1);
    let per = rows.div_ceil(COL_BLOCKS).max(min_rows);
    (rows.div_ceil(per).max(1), per)
}

/// Runs `body(block, row_start, row_end)` over the rows, by column-sum blocks when `nb > 0`.
fn run_rows(
    rows: usize,
    row_cost: usize,
    nb: usize,
    per: usize,
    body: &(dyn Fn(usize, usize, usize) + Sync),
) {
    if nb > 0 {
        let grain = (GRAIN / (per * row_cost).max(1)).max(1);
        parallel_for(nb, grain, &|s, e| {
            for blk in s..e {
                body(blk, (blk * per).min(rows), ((blk + 1) * per).min(rows));
            }
        });
    } else {
        parallel_for(rows, (GRAIN / row_cost.max(1)).max(1), &|s, e| {
            body(0, s, e)
        });
    }
}

/// Adds the per-block partial sums (`nb` blocks of `n` columns) in block order.
fn total<M: Math>(parts: &[M], nb: usize, n: usize) -> Vec<M> {
    let mut t = vec![M::zero(); n];
    for blk in 0..nb {
        for (t, &p) in t.iter_mut().zip(&parts[blk * n..(blk + 1) * n]) {
            *t = *t + p;
        }
    }
    t
}

// ---- LSTM ------------------------------------------------------------------------------------

/// LSTM cell forward: gates `[B, 4H]` (input, forget, cell, output), `cx` `[B, H]`; writes
/// `hy`, `cy` `[B, H]` and `workspace` `[B, 4H]` (the four activated gates, for backward).
#[allow(clippy::too_many_arguments)]
pub fn lstm_cell(
    hy: &TensorMut,
    cy: &TensorMut,
    workspace: &TensorMut,
    input_gates: &TensorRef,
    hidden_gates: &TensorRef,
    cx: &TensorRef,
    input_bias: Option<&TensorRef>,
    hidden_bias: Option<&TensorRef>,
) -> FooResult<()> {
    let (b, h) = gate_dims(input_gates, 4, "_thnn_fused_lstm_cell")?;
    crate::dispatch!(float: input_gates.dtype, F => {
        type M = <F as FloatStore>::M;
        let a = LstmFwd::<M> {
            ig: Mat::of_ref::<F>(input_gates, b, 4 * h, "input_gates")?,
            hg: Mat::of_ref::<F>(hidden_gates, b, 4 * h, "hidden_gates")?,
            cx: Mat::of_ref::<F>(cx, b, h, "cx")?,
            hy: Mat::of_mut::<F>(hy, b, h, "hy")?,
            cy: Mat::of_mut::<F>(cy, b, h, "cy")?,
            ws: Mat::of_mut::<F>(workspace, b, 4 * h, "workspace")?,
            b1: bias_vec(input_bias, 4 * h, "input_bias")?,
            b2: bias_vec(hidden_bias, 4 * h, "hidden_bias")?,
            h,
        };
        if b * h > 0 {
            parallel_for(b, (GRAIN / (4 * h * GATE_COST)).max(1), &|s, e| {
                lstm_fwd_rows::<F>(&a, s, e)
            });
        }
        Ok(())
    }, _ => not_implemented!("\"_thnn_fused_lstm_cell\" not implemented for '{}'", input_gates.dtype.name()))
}

struct LstmFwd<M> {
    ig: Mat,
    hg: Mat,
    cx: Mat,
    hy: Mat,
    cy: Mat,
    ws: Mat,
    b1: Vec<M>,
    b2: Vec<M>,
    h: usize,
}

multiversion!(fn lstm_fwd_rows<F: FloatStore>(a: &LstmFwd<F::M>, s: usize, e: usize) => isa lstm_fwd_body);

#[inline(always)]
fn lstm_fwd_body<F: FloatStore>(isa: Isa, a: &LstmFwd<F::M>, s: usize, e: usize) {
    let h = a.h;
    let z = F::M::zero();
    let mut bx = vec![z; a.ig.scratch::<F>(4 * h)];
    let mut by = vec![z; a.hg.scratch::<F>(4 * h)];
    let mut bcx = vec![z; a.cx.scratch::<F>(h)];
    let mut bhy = vec![z; a.hy.scratch::<F>(h)];
    let mut bcy = vec![z; a.cy.scratch::<F>(h)];
    let mut bws = vec![z; a.ws.scratch::<F>(4 * h)];
    let [b1i, b1f, b1c, b1o] = split::<4, _>(&a.b1, h);
    let [b2i, b2f, b2c, b2o] = split::<4, _>(&a.b2, h);
    for r in s..e {
        // SAFETY: row r of each operand (the shapes were checked); output rows are written by
        // this row alone, and the outputs are fresh allocations that alias no input.
        let (x, y, cx, hy, cy, ws) = unsafe {
            (
                a.ig.get::<F>(r, 0, 4 * h, &mut bx),
                a.hg.get::<F>(r, 0, 4 * h, &mut by),
                a.cx.get::<F>(r, 0, h, &mut bcx),
                a.hy.out::<F>(r, 0, h, &mut bhy),
                a.cy.out::<F>(r, 0, h, &mut bcy),
                a.ws.out::<F>(r, 0, 4 * h, &mut bws),
            )
        };
        {
            let [xi, xf, xc, xo] = split::<4, _>(x, h);
            let [yi, yf, yc, yo] = split::<4, _>(y, h);
            let [wi, wf, wc, wo] = split_mut::<4, _>(ws, h);
            let (cx, hy, cy) = (&cx[..h], &mut hy[..h], &mut cy[..h]);
            for j in 0..h {
                let ig = (xi[j] + yi[j] + b1i[j] + b2i[j]).vsigmoid(isa);
                let fg = (xf[j] + yf[j] + b1f[j] + b2f[j]).vsigmoid(isa);
                let cg = (xc[j] + yc[j] + b1c[j] + b2c[j]).vtanh(isa);
                let og = (xo[j] + yo[j] + b1o[j] + b2o[j]).vsigmoid(isa);
                let c = fg * cx[j] + ig * cg;
                cy[j] = c;
                hy[j] = og * c.vtanh(isa);
                wi[j] = ig;
                wf[j] = fg;
                wc[j] = cg;
                wo[j] = og;
            }
        }
        // SAFETY: as above (no-ops for outputs written in place).
        unsafe {
            a.hy.put::<F>(r, 0, hy);
            a.cy.put::<F>(r, 0, cy);
            a.ws.put::<F>(r, 0, ws);
        }
    }
}

/// LSTM cell backward from the forward's `workspace` `[B, 4H]`, `cx`, `cy` `[B, H]` and the
/// gradients of `hy` and `cy` (an absent one counts as zeros). Writes `grad_gates` `[B, 4H]`
/// (the gradient of both the input and the hidden gates), `grad_cx` `[B, H]` and, when given,
/// `grad_bias` (`4H` elements: the column sums of `grad_gates`).
#[allow(clippy::too_many_arguments)]
pub fn lstm_cell_backward(
    grad_gates: &TensorMut,
    grad_cx: &TensorMut,
    grad_bias: Option<&TensorMut>,
    grad_hy: Option<&TensorRef>,
    grad_cy: Option<&TensorRef>,
    cx: &TensorRef,
    cy: &TensorRef,
    workspace: &TensorRef,
) -> FooResult<()> {
    let (b, h) = gate_dims(workspace, 4, "_thnn_fused_lstm_cell_backward_impl")?;
    crate::dispatch!(float: workspace.dtype, F => {
        type M = <F as FloatStore>::M;
        let row_cost = 4 * h * 2;
        let (nb, per) = blocks(b, row_cost, grad_bias.is_some());
        let mut parts = vec![M::zero(); nb * 4 * h];
        let a = LstmBwd {
            ws: Mat::of_ref::<F>(workspace, b, 4 * h, "workspace")?,
            cx: Mat::of_ref::<F>(cx, b, h, "cx")?,
            cy: Mat::of_ref::<F>(cy, b, h, "cy")?,
            ghy: grad_hy.map(|t| Mat::of_ref::<F>(t, b, h, "grad_hy")).transpose()?,
            gcy: grad_cy.map(|t| Mat::of_ref::<F>(t, b, h, "grad_cy")).transpose()?,
            gg: Mat::of_mut::<F>(grad_gates, b, 4 * h, "grad_gates")?,
            gcx: Mat::of_mut::<F>(grad_cx, b, h, "grad_cx")?,
            parts: SendPtr::of(parts.as_mut_ptr()),
            nb,
            h,
        };
        if b * h > 0 {
            run_rows(b, row_cost, nb, per, &|blk, s, e| lstm_bwd_rows::<F>(&a, blk, s, e));
        }
        if let Some(t) = grad_bias {
            write_vec(t, &total(&parts, nb, 4 * h))?;
        }
        Ok(())
    }, _ => not_implemented!(
        "\"_thnn_fused_lstm_cell_backward_impl\" not implemented for '{}'",
        workspace.dtype.name()
    ))
}

struct LstmBwd {
    ws: Mat,
    cx: Mat,
    cy: Mat,
    ghy: Option<Mat>,
    gcy: Option<Mat>,
    gg: Mat,
    gcx: Mat,
    /// `nb` blocks of `4H` partial bias sums in math type (`nb == 0`: none wanted).
    parts: SendPtr<u8>,
    nb: usize,
    h: usize,
}

multiversion!(fn lstm_bwd_rows<F: FloatStore>(a: &LstmBwd, blk: usize, s: usize, e: usize) => isa lstm_bwd_body);

#[inline(always)]
fn lstm_bwd_body<F: FloatStore>(isa: Isa, a: &LstmBwd, blk: usize, s: usize, e: usize) {
    let h = a.h;
    let z = F::M::zero();
    let one = F::M::one();
    let opt_scratch = |m: Option<Mat>| m.map_or(0, |m| m.scratch::<F>(h));
    let mut bws = vec![z; a.ws.scratch::<F>(4 * h)];
    let mut bcx = vec![z; a.cx.scratch::<F>(h)];
    let mut bcy = vec![z; a.cy.scratch::<F>(h)];
    let mut bgo = vec![z; opt_scratch(a.ghy)];
    let mut bgc = vec![z; opt_scratch(a.gcy)];
    let mut bgg = vec![z; a.gg.scratch::<F>(4 * h)];
    let mut bgx = vec![z; a.gcx.scratch::<F>(h)];
    let zeros = vec![
        z;
        if a.ghy.is_none() || a.gcy.is_none() {
            h
        } else {
            0
        }
    ];
    // SAFETY: this block's own 4H partial sums (blocks are disjoint), when sums are wanted.
    let mut sums: Option<&mut [F::M]> =
        (a.nb > 0).then(|| unsafe { a.parts.cast().slice_mut(blk * 4 * h, 4 * h) });
    for r in s..e {
        // SAFETY: row r of each operand (the shapes were checked); output rows are written by
        // this row alone, and the outputs are fresh allocations that alias no input.
        let (w, cx, cy, go, gc, gg, gcx) = unsafe {
            (
                a.ws.get::<F>(r, 0, 4 * h, &mut bws),
                a.cx.get::<F>(r, 0, h, &mut bcx),
                a.cy.get::<F>(r, 0, h, &mut bcy),
                match a.ghy {
                    Some(m) => m.get::<F>(r, 0, h, &mut bgo),
                    None => &zeros[..],
                },
                match a.gcy {
                    Some(m) => m.get::<F>(r, 0, h, &mut bgc),
                    None => &zeros[..],
                },
                a.gg.out::<F>(r, 0, 4 * h, &mut bgg),
                a.gcx.out::<F>(r, 0, h, &mut bgx),
            )
        };
        {
            let [wi, wf, wc, wo] = split::<4, _>(w, h);
            let [gi, gf, gcg, gog] = split_mut::<4, _>(gg, h);
            let (cx, cy, go, gc, gcx) = (&cx[..h], &cy[..h], &go[..h], &gc[..h], &mut gcx[..h]);
            for j in 0..h {
                let t = cy[j].vtanh(isa);
                let gcell = go[j] * wo[j] * (one - t * t) + gc[j];
                gi[j] = gcell * wc[j] * (one - wi[j]) * wi[j];
                gf[j] = gcell * cx[j] * (one - wf[j]) * wf[j];
                gcg[j] = gcell * wi[j] * (one - wc[j] * wc[j]);
                gog[j] = go[j] * t * (one - wo[j]) * wo[j];
                gcx[j] = gcell * wf[j];
            }
        }
        if let Some(sums) = sums.as_deref_mut() {
            // The sums add the stored (rounded) gradients, as CUDA's `grad_gates.sum(0)` does.
            for (acc, &v) in sums.iter_mut().zip(gg.iter()) {
                *acc = *acc + F::store(v).load();
            }
        }
        // SAFETY: as above (no-ops for outputs written in place).
        unsafe {
            a.gg.put::<F>(r, 0, gg);
            a.gcx.put::<F>(r, 0, gcx);
        }
    }
}

// ---- GRU -------------------------------------------------------------------------------------

/// Workspace columns per hidden unit of a GRU cell: r, z (CUDA's "i"), n, hx, and the hidden
/// n-gate plus its bias.
pub const GRU_WORKSPACE_GATES: usize = 5;

/// GRU cell forward: gates `[B, 3H]` (reset, update, new), `hx` `[B, H]`; writes `hy`
/// `[B, H]` and `workspace` `[B, 5H]` (r, z, n, hx, hidden n-gate + hidden n-bias).
#[allow(clippy::too_many_arguments)]
pub fn gru_cell(
    hy: &TensorMut,
    workspace: &TensorMut,
    input_gates: &TensorRef,
    hidden_gates: &TensorRef,
    hx: &TensorRef,
    input_bias: Option<&TensorRef>,
    hidden_bias: Option<&TensorRef>,
) -> FooResult<()> {
    let (b, h) = gate_dims(input_gates, 3, "_thnn_fused_gru_cell")?;
    crate::dispatch!(float: input_gates.dtype, F => {
        type M = <F as FloatStore>::M;
        let a = GruFwd::<M> {
            ig: Mat::of_ref::<F>(input_gates, b, 3 * h, "input_gates")?,
            hg: Mat::of_ref::<F>(hidden_gates, b, 3 * h, "hidden_gates")?,
            hx: Mat::of_ref::<F>(hx, b, h, "hx")?,
            hy: Mat::of_mut::<F>(hy, b, h, "hy")?,
            ws: Mat::of_mut::<F>(workspace, b, GRU_WORKSPACE_GATES * h, "workspace")?,
            b1: bias_vec(input_bias, 3 * h, "input_bias")?,
            b2: bias_vec(hidden_bias, 3 * h, "hidden_bias")?,
            h,
        };
        if b * h > 0 {
            parallel_for(b, (GRAIN / (3 * h * GATE_COST)).max(1), &|s, e| {
                gru_fwd_rows::<F>(&a, s, e)
            });
        }
        Ok(())
    }, _ => not_implemented!("\"_thnn_fused_gru_cell\" not implemented for '{}'", input_gates.dtype.name()))
}

struct GruFwd<M> {
    ig: Mat,
    hg: Mat,
    hx: Mat,
    hy: Mat,
    ws: Mat,
    b1: Vec<M>,
    b2: Vec<M>,
    h: usize,
}

multiversion!(fn gru_fwd_rows<F: FloatStore>(a: &GruFwd<F::M>, s: usize, e: usize) => isa gru_fwd_body);

#[inline(always)]
fn gru_fwd_body<F: FloatStore>(isa: Isa, a: &GruFwd<F::M>, s: usize, e: usize) {
    let h = a.h;
    let z = F::M::zero();
    let wn = GRU_WORKSPACE_GATES * h;
    let mut bx = vec![z; a.ig.scratch::<F>(3 * h)];
    let mut by = vec![z; a.hg.scratch::<F>(3 * h)];
    let mut bhx = vec![z; a.hx.scratch::<F>(h)];
    let mut bhy = vec![z; a.hy.scratch::<F>(h)];
    let mut bws = vec![z; a.ws.scratch::<F>(wn)];
    let [b1r, b1z, b1n] = split::<3, _>(&a.b1, h);
    let [b2r, b2z, b2n] = split::<3, _>(&a.b2, h);
    for r in s..e {
        // SAFETY: row r of each operand (the shapes were checked); output rows are written by
        // this row alone, and the outputs are fresh allocations that alias no input.
        let (x, y, hx, hy, ws) = unsafe {
            (
                a.ig.get::<F>(r, 0, 3 * h, &mut bx),
                a.hg.get::<F>(r, 0, 3 * h, &mut by),
                a.hx.get::<F>(r, 0, h, &mut bhx),
                a.hy.out::<F>(r, 0, h, &mut bhy),
                a.ws.out::<F>(r, 0, wn, &mut bws),
            )
        };
        {
            let [xr, xz, xn] = split::<3, _>(x, h);
            let [yr, yz, yn] = split::<3, _>(y, h);
            let [wr, wz, wng, whx, whn] = split_mut::<5, _>(ws, h);
            let (hx, hy) = (&hx[..h], &mut hy[..h]);
            for j in 0..h {
                let rg = (xr[j] + yr[j] + b1r[j] + b2r[j]).vsigmoid(isa);
                let zg = (xz[j] + yz[j] + b1z[j] + b2z[j]).vsigmoid(isa);
                let hn = yn[j] + b2n[j];
                let ng = (xn[j] + b1n[j] + rg * hn).vtanh(isa);
                hy[j] = ng + zg * (hx[j] - ng);
                wr[j] = rg;
                wz[j] = zg;
                wng[j] = ng;
                whx[j] = hx[j];
                whn[j] = hn;
            }
        }
        // SAFETY: as above (no-ops for outputs written in place).
        unsafe {
            a.hy.put::<F>(r, 0, hy);
            a.ws.put::<F>(r, 0, ws);
        }
    }
}

/// GRU cell backward from `grad_hy` `[B, H]` and the forward's `workspace` `[B, 5H]`. Writes
/// `grad_input_gates`, `grad_hidden_gates` `[B, 3H]`, `grad_hx` `[B, H]` and, when given, the
/// bias gradients (`3H` elements each: column sums of the gate gradients).
#[allow(clippy::too_many_arguments)]
pub fn gru_cell_backward(
    grad_input_gates: &TensorMut,
    grad_hidden_gates: &TensorMut,
    grad_hx: &TensorMut,
    grad_input_bias: Option<&TensorMut>,
    grad_hidden_bias: Option<&TensorMut>,
    grad_hy: &TensorRef,
    workspace: &TensorRef,
) -> FooResult<()> {
    let (b, h) = gate_dims(
        workspace,
        GRU_WORKSPACE_GATES,
        "_thnn_fused_gru_cell_backward",
    )?;
    crate::dispatch!(float: workspace.dtype, F => {
        type M = <F as FloatStore>::M;
        let row_cost = 3 * h * 2;
        let (nb, per) = blocks(b, row_cost, grad_input_bias.is_some() || grad_hidden_bias.is_some());
        // Per block: the sums of r, z, n input-gate gradients, then of the hidden n-gate
        // gradient (the hidden r and z gradients equal the input ones).
        let mut parts = vec![M::zero(); nb * 4 * h];
        let a = GruBwd {
            ws: Mat::of_ref::<F>(workspace, b, GRU_WORKSPACE_GATES * h, "workspace")?,
            go: Mat::of_ref::<F>(grad_hy, b, h, "grad_hy")?,
            gi: Mat::of_mut::<F>(grad_input_gates, b, 3 * h, "grad_input_gates")?,
            gh: Mat::of_mut::<F>(grad_hidden_gates, b, 3 * h, "grad_hidden_gates")?,
            ghx: Mat::of_mut::<F>(grad_hx, b, h, "grad_hx")?,
            parts: SendPtr::of(parts.as_mut_ptr()),
            nb,
            h,
        };
        if b * h > 0 {
            run_rows(b, row_cost, nb, per, &|blk, s, e| gru_bwd_rows::<F>(&a, blk, s, e));
        }
        let t = total(&parts, nb, 4 * h);
        if let Some(g) = grad_input_bias {
            write_vec(g, &t[..3 * h])?;
        }
        if let Some(g) = grad_hidden_bias {
            let hidden: Vec<M> = t[..2 * h].iter().chain(&t[3 * h..]).copied().collect();
            write_vec(g, &hidden)?;
        }
        Ok(())
    }, _ => not_implemented!(
        "\"_thnn_fused_gru_cell_backward\" not implemented for '{}'",
        workspace.dtype.name()
    ))
}

struct GruBwd {
    ws: Mat,
    go: Mat,
    gi: Mat,
    gh: Mat,
    ghx: Mat,
    /// `nb` blocks of `4H` partial bias sums in math type (`nb == 0`: none wanted).
    parts: SendPtr<u8>,
    nb: usize,
    h: usize,
}

multiversion!(fn gru_bwd_rows<F: FloatStore>(a: &GruBwd, blk: usize, s: usize, e: usize) => gru_bwd_body);

#[inline(always)]
fn gru_bwd_body<F: FloatStore>(a: &GruBwd, blk: usize, s: usize, e: usize) {
    let h = a.h;
    let z = F::M::zero();
    let one = F::M::one();
    let wn = GRU_WORKSPACE_GATES * h;
    let mut bws = vec![z; a.ws.scratch::<F>(wn)];
    let mut bgo = vec![z; a.go.scratch::<F>(h)];
    let mut bgi = vec![z; a.gi.scratch::<F>(3 * h)];
    let mut bgh = vec![z; a.gh.scratch::<F>(3 * h)];
    let mut bgx = vec![z; a.ghx.scratch::<F>(h)];
    // SAFETY: this block's own 4H partial sums (blocks are disjoint), when sums are wanted.
    let mut sums: Option<&mut [F::M]> =
        (a.nb > 0).then(|| unsafe { a.parts.cast().slice_mut(blk * 4 * h, 4 * h) });
    for r in s..e {
        // SAFETY: row r of each operand (the shapes were checked); output rows are written by
        // this row alone, and the outputs are fresh allocations that alias no input.
        let (w, go, gi, gh, ghx) = unsafe {
            (
                a.ws.get::<F>(r, 0, wn, &mut bws),
                a.go.get::<F>(r, 0, h, &mut bgo),
                a.gi.out::<F>(r, 0, 3 * h, &mut bgi),
                a.gh.out::<F>(r, 0, 3 * h, &mut bgh),
                a.ghx.out::<F>(r, 0, h, &mut bgx),
            )
        };
        {
            let [rg, zg, ng, hx, hn] = split::<5, _>(w, h);
            let [gir, giz, gin] = split_mut::<3, _>(gi, h);
            let [ghr, ghz, ghn] = split_mut::<3, _>(gh, h);
            let (go, ghx) = (&go[..h], &mut ghx[..h]);
            for j in 0..h {
                let g = go[j];
                let dz = g * (hx[j] - ng[j]) * (one - zg[j]) * zg[j];
                let dn = g * (one - zg[j]) * (one - ng[j] * ng[j]);
                let dr = dn * hn[j] * (one - rg[j]) * rg[j];
                gir[j] = dr;
                giz[j] = dz;
                gin[j] = dn;
                ghr[j] = dr;
                ghz[j] = dz;
                ghn[j] = dn * rg[j];
                ghx[j] = g * zg[j];
            }
        }
        if let Some(sums) = sums.as_deref_mut() {
            // The sums add the stored (rounded) gradients, as CUDA's `.sum(0)` does.
            let (si, sh) = sums.split_at_mut(3 * h);
            for (acc, &v) in si.iter_mut().zip(gi.iter()) {
                *acc = *acc + F::store(v).load();
            }
            for (acc, &v) in sh.iter_mut().zip(&gh[2 * h..]) {
                *acc = *acc + F::store(v).load();
            }
        }
        // SAFETY: as above (no-ops for outputs written in place).
        unsafe {
            a.gi.put::<F>(r, 0, gi);
            a.gh.put::<F>(r, 0, gh);
            a.ghx.put::<F>(r, 0, ghx);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::core::map::testing::Owned;
    use half::f16;

    /// Deterministic values in about [-2, 2].
    fn vals(n: usize, seed: u64) -> Vec<f64> {
        crate::kernels::core::map::testing::uniform(n, seed, -2.0, 2.0)
    }

    /// `[rows, cols]` view of `data` stored column-major (a transposed, non-contiguous operand).
    fn transposed(data: &[f64], rows: usize, cols: usize) -> (Vec<f64>, TensorRef) {
        let mut t = vec![0.0; rows * cols];
        for r in 0..rows {
            for c in 0..cols {
                t[c * rows + r] = data[r * cols + c];
            }
        }
        let v = TensorRef {
            ptr: t.as_ptr() as *const u8,
            shape: [rows, cols].as_slice().into(),
            strides: [1isize, rows as isize].as_slice().into(),
            dtype: crate::dtype::DType::F64,
        };
        (t, v)
    }

    struct Lstm {
        hy: Vec<f64>,
        cy: Vec<f64>,
        ws: Vec<f64>,
    }

    fn lstm(
        b: usize,
        h: usize,
        ig: &[f64],
        hg: &[f64],
        cx: &[f64],
        bias: Option<(&[f64], &[f64])>,
    ) -> Lstm {
        let (ig, hg, cx) = (
            Owned::new(ig.to_vec(), &[b, 4 * h]),
            Owned::new(hg.to_vec(), &[b, 4 * h]),
            Owned::new(cx.to_vec(), &[b, h]),
        );
        let b1 = bias.map(|(x, _)| Owned::new(x.to_vec(), &[4 * h]));
        let b2 = bias.map(|(_, y)| Owned::new(y.to_vec(), &[4 * h]));
        let mut hy = Owned::<f64>::zeros(&[b, h]);
        let mut cy = Owned::<f64>::zeros(&[b, h]);
        let mut ws = Owned::<f64>::zeros(&[b, 4 * h]);
        lstm_cell(
            &hy.m(),
            &cy.m(),
            &ws.m(),
            &ig.r(),
            &hg.r(),
            &cx.r(),
            b1.as_ref().map(|t| t.r()).as_ref(),
            b2.as_ref().map(|t| t.r()).as_ref(),
        )
        .unwrap();
        Lstm {
            hy: hy.data,
            cy: cy.data,
            ws: ws.data,
        }
    }

    fn close(a: &[f64], b: &[f64], tol: f64) {
        assert_eq!(a.len(), b.len());
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (x - y).abs() <= tol * (1.0 + y.abs()),
                "element {i}: {x} vs {y}"
            );
        }
    }

    #[test]
    fn lstm_forward_formula_and_backward_matches_finite_differences() {
        let (b, h) = (3, 5);
        let (ig, hg, cx) = (vals(b * 4 * h, 1), vals(b * 4 * h, 2), vals(b * h, 3));
        let (b1, b2) = (vals(4 * h, 4), vals(4 * h, 5));
        let f = lstm(b, h, &ig, &hg, &cx, Some((&b1, &b2)));
        let sig = |x: f64| 1.0 / (1.0 + (-x).exp());
        for r in 0..b {
            for j in 0..h {
                let pre = |g: usize| {
                    let k = r * 4 * h + g * h + j;
                    ig[k] + hg[k] + b1[g * h + j] + b2[g * h + j]
                };
                let (i, fg, c, o) = (sig(pre(0)), sig(pre(1)), pre(2).tanh(), sig(pre(3)));
                let cy = fg * cx[r * h + j] + i * c;
                close(
                    &[f.cy[r * h + j], f.hy[r * h + j]],
                    &[cy, o * cy.tanh()],
                    1e-14,
                );
                close(&[f.ws[r * 4 * h + 2 * h + j]], &[c], 1e-14);
            }
        }

        // loss = sum(hy * ghy + cy * gcy): its gradient wrt the pre-activations is grad_gates.
        let (ghy, gcy) = (vals(b * h, 6), vals(b * h, 7));
        let loss = |ig: &[f64], cx: &[f64]| {
            let f = lstm(b, h, ig, &hg, cx, Some((&b1, &b2)));
            (0..b * h)
                .map(|k| f.hy[k] * ghy[k] + f.cy[k] * gcy[k])
                .sum::<f64>()
        };
        let mut gg = Owned::<f64>::zeros(&[b, 4 * h]);
        let mut gcx = Owned::<f64>::zeros(&[b, h]);
        let mut gb = Owned::<f64>::zeros(&[4 * h]);
        let (o_cx, o_cy, o_ws) = (
            Owned::new(cx.clone(), &[b, h]),
            Owned::new(f.cy.clone(), &[b, h]),
            Owned::new(f.ws.clone(), &[b, 4 * h]),
        );
        let (o_ghy, o_gcy) = (
            Owned::new(ghy.clone(), &[b, h]),
            Owned::new(gcy.clone(), &[b, h]),
        );
        lstm_cell_backward(
            &gg.m(),
            &gcx.m(),
            Some(&gb.m()),
            Some(&o_ghy.r()),
            Some(&o_gcy.r()),
            &o_cx.r(),
            &o_cy.r(),
            &o_ws.r(),
        )
        .unwrap();
        let eps = 1e-6;
        let num = |x: &[f64], k: usize, f: &dyn Fn(&[f64]) -> f64| {
            let (mut p, mut m) = (x.to_vec(), x.to_vec());
            p[k] += eps;
            m[k] -= eps;
            (f(&p) - f(&m)) / (2.0 * eps)
        };
        for k in 0..b * 4 * h {
            close(&[gg.data[k]], &[num(&ig, k, &|x| loss(x, &cx))], 1e-7);
        }
        for k in 0..b * h {
            close(&[gcx.data[k]], &[num(&cx, k, &|x| loss(&ig, x))], 1e-7);
        }
        for c in 0..4 * h {
            let s: f64 = (0..b).map(|r| gg.data[r * 4 * h + c]).sum();
            close(&[gb.data[c]], &[s], 1e-14);
        }

        // Without grad_cy (autograd passes none when cy is unused) it counts as zeros.
        let zero = Owned::new(vec![0.0; b * h], &[b, h]);
        let mut gg0 = Owned::<f64>::zeros(&[b, 4 * h]);
        let mut gg1 = Owned::<f64>::zeros(&[b, 4 * h]);
        for (gcy, out) in [(None, &mut gg0), (Some(zero.r()), &mut gg1)] {
            let mut gcx = Owned::<f64>::zeros(&[b, h]);
            lstm_cell_backward(
                &out.m(),
                &gcx.m(),
                None,
                Some(&o_ghy.r()),
                gcy.as_ref(),
                &o_cx.r(),
                &o_cy.r(),
                &o_ws.r(),
            )
            .unwrap();
        }
        assert_eq!(gg0.data, gg1.data);
    }

    #[test]
    fn lstm_strided_and_half_operands() {
        let (b, h) = (4, 3);
        let (ig, hg, cx) = (vals(b * 4 * h, 11), vals(b * 4 * h, 12), vals(b * h, 13));
        let want = lstm(b, h, &ig, &hg, &cx, None);
        // Transposed gates: the strided gather path.
        let (_ti, vi) = transposed(&ig, b, 4 * h);
        let (_th, vh) = transposed(&hg, b, 4 * h);
        let ocx = Owned::new(cx.clone(), &[b, h]);
        let mut hy = Owned::<f64>::zeros(&[b, h]);
        let mut cy = Owned::<f64>::zeros(&[b, h]);
        let mut ws = Owned::<f64>::zeros(&[b, 4 * h]);
        lstm_cell(&hy.m(), &cy.m(), &ws.m(), &vi, &vh, &ocx.r(), None, None).unwrap();
        assert_eq!(
            (hy.data, cy.data, ws.data),
            (want.hy, want.cy.clone(), want.ws)
        );
        // float16 storage, float32 math.
        let half = |v: &[f64], shape: &[usize]| {
            Owned::new(v.iter().map(|&x| f16::from_f64(x)).collect(), shape)
        };
        let (hi, hh, hc) = (
            half(&ig, &[b, 4 * h]),
            half(&hg, &[b, 4 * h]),
            half(&cx, &[b, h]),
        );
        let mut hy = Owned::<f16>::zeros(&[b, h]);
        let mut cy = Owned::<f16>::zeros(&[b, h]);
        let mut ws = Owned::<f16>::zeros(&[b, 4 * h]);
        lstm_cell(
            &hy.m(),
            &cy.m(),
            &ws.m(),
            &hi.r(),
            &hh.r(),
            &hc.r(),
            None,
            None,
        )
        .unwrap();
        let got: Vec<f64> = cy.data.iter().map(|v| v.to_f64()).collect();
        close(&got, &want.cy, 1e-2);
        // A dtype mismatch is an error, not a misread.
        let mut bad = Owned::<f32>::zeros(&[b, h]);
        let o32 = Owned::<f64>::zeros(&[b, h]);
        let mut ws64 = Owned::<f64>::zeros(&[b, 4 * h]);
        let (oi, oh) = (
            Owned::new(ig.clone(), &[b, 4 * h]),
            Owned::new(hg.clone(), &[b, 4 * h]),
        );
        let mut cy64 = Owned::<f64>::zeros(&[b, h]);
        assert!(lstm_cell(
            &bad.m(),
            &cy64.m(),
            &ws64.m(),
            &oi.r(),
            &oh.r(),
            &o32.r(),
            None,
            None
        )
        .is_err());
    }

    fn gru(
        b: usize,
        h: usize,
        ig: &[f64],
        hg: &[f64],
        hx: &[f64],
        b1: &[f64],
        b2: &[f64],
    ) -> (Vec<f64>, Vec<f64>) {
        let (ig, hg, hx) = (
            Owned::new(ig.to_vec(), &[b, 3 * h]),
            Owned::new(hg.to_vec(), &[b, 3 * h]),
            Owned::new(hx.to_vec(), &[b, h]),
        );
        let (b1, b2) = (
            Owned::new(b1.to_vec(), &[3 * h]),
            Owned::new(b2.to_vec(), &[3 * h]),
        );
        let mut hy = Owned::<f64>::zeros(&[b, h]);
        let mut ws = Owned::<f64>::zeros(&[b, 5 * h]);
        gru_cell(
            &hy.m(),
            &ws.m(),
            &ig.r(),
            &hg.r(),
            &hx.r(),
            Some(&b1.r()),
            Some(&b2.r()),
        )
        .unwrap();
        (hy.data, ws.data)
    }

    #[test]
    fn gru_backward_matches_finite_differences() {
        let (b, h) = (3, 4);
        let (ig, hg, hx) = (vals(b * 3 * h, 21), vals(b * 3 * h, 22), vals(b * h, 23));
        let (b1, b2) = (vals(3 * h, 24), vals(3 * h, 25));
        let (_, ws) = gru(b, h, &ig, &hg, &hx, &b1, &b2);
        let ghy = vals(b * h, 26);
        let loss = |ig: &[f64], hg: &[f64], hx: &[f64], b1: &[f64], b2: &[f64]| {
            let (hy, _) = gru(b, h, ig, hg, hx, b1, b2);
            hy.iter().zip(&ghy).map(|(y, g)| y * g).sum::<f64>()
        };
        let mut gi = Owned::<f64>::zeros(&[b, 3 * h]);
        let mut gh = Owned::<f64>::zeros(&[b, 3 * h]);
        let mut ghx = Owned::<f64>::zeros(&[b, h]);
        let mut gb1 = Owned::<f64>::zeros(&[3 * h]);
        let mut gb2 = Owned::<f64>::zeros(&[3 * h]);
        let (og, ow) = (
            Owned::new(ghy.clone(), &[b, h]),
            Owned::new(ws, &[b, 5 * h]),
        );
        gru_cell_backward(
            &gi.m(),
            &gh.m(),
            &ghx.m(),
            Some(&gb1.m()),
            Some(&gb2.m()),
            &og.r(),
            &ow.r(),
        )
        .unwrap();
        let eps = 1e-6;
        let num = |x: &[f64], k: usize, f: &dyn Fn(&[f64]) -> f64| {
            let (mut p, mut m) = (x.to_vec(), x.to_vec());
            p[k] += eps;
            m[k] -= eps;
            (f(&p) - f(&m)) / (2.0 * eps)
        };
        for k in 0..b * 3 * h {
            close(
                &[gi.data[k]],
                &[num(&ig, k, &|x| loss(x, &hg, &hx, &b1, &b2))],
                1e-7,
            );
            close(
                &[gh.data[k]],
                &[num(&hg, k, &|x| loss(&ig, x, &hx, &b1, &b2))],
                1e-7,
            );
        }
        for k in 0..b * h {
            close(
                &[ghx.data[k]],
                &[num(&hx, k, &|x| loss(&ig, &hg, x, &b1, &b2))],
                1e-7,
            );
        }
        for k in 0..3 * h {
            close(
                &[gb1.data[k]],
                &[num(&b1, k, &|x| loss(&ig, &hg, &hx, x, &b2))],
                1e-7,
            );
            close(
                &[gb2.data[k]],
                &[num(&b2, k, &|x| loss(&ig, &hg, &hx, &b1, x))],
                1e-7,
            );
        }
    }

    #[test]
    fn bias_sums_over_several_row_blocks() {
        // 200 rows of 4 * 64 gates: blocks of 32 rows, the last one partial.
        let (b, h) = (200, 64);
        assert_eq!(blocks(b, 4 * h * 2, true), (7, 32));
        let (ig, hg, cx) = (vals(b * 4 * h, 31), vals(b * 4 * h, 32), vals(b * h, 33));
        let f = lstm(b, h, &ig, &hg, &cx, None);
        let (o_cx, o_cy, o_ws) = (
            Owned::new(cx, &[b, h]),
            Owned::new(f.cy, &[b, h]),
            Owned::new(f.ws, &[b, 4 * h]),
        );
        let ghy = Owned::new(vals(b * h, 34), &[b, h]);
        let mut runs = Vec::new();
        for sums in [false, true] {
            let mut gg = Owned::<f64>::zeros(&[b, 4 * h]);
            let mut gcx = Owned::<f64>::zeros(&[b, h]);
            let mut gb = Owned::<f64>::zeros(&[4 * h]);
            lstm_cell_backward(
                &gg.m(),
                &gcx.m(),
                sums.then(|| gb.m()).as_ref(),
                Some(&ghy.r()),
                None,
                &o_cx.r(),
                &o_cy.r(),
                &o_ws.r(),
            )
            .unwrap();
            runs.push((gg.data, gcx.data, gb.data));
        }
        assert_eq!((&runs[0].0, &runs[0].1), (&runs[1].0, &runs[1].1));
        let gg = &runs[1].0;
        let want: Vec<f64> = (0..4 * h)
            .map(|c| (0..b).map(|r| gg[r * 4 * h + c]).sum())
            .collect();
        close(&runs[1].2, &want, 1e-12);
    }

    #[test]
    fn empty_batch_gives_zero_bias_gradients() {
        let h = 2;
        let ws = Owned::<f32>::zeros(&[0, 5 * h]);
        let go = Owned::<f32>::zeros(&[0, h]);
        let mut gi = Owned::<f32>::zeros(&[0, 3 * h]);
        let mut gh = Owned::<f32>::zeros(&[0, 3 * h]);
        let mut ghx = Owned::<f32>::zeros(&[0, h]);
        let mut gb1 = Owned::new(vec![1.0f32; 3 * h], &[3 * h]);
        let mut gb2 = Owned::new(vec![1.0f32; 3 * h], &[3 * h]);
        gru_cell_backward(
            &gi.m(),
            &gh.m(),
            &ghx.m(),
            Some(&gb1.m()),
            Some(&gb2.m()),
            &go.r(),
            &ws.r(),
        )
        .unwrap();
        assert!(gb1.data.iter().chain(&gb2.data).all(|&v| v == 0.0));
    }
}
