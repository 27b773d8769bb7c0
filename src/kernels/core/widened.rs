//! The elementwise engine's float loops over dense runs in float32 blocks: a run is widened into
//! a stack block ([`FloatStore::load_run`]), the op runs over the block as it does over float32,
//! and the block is narrowed into the output ([`FloatStore::store_run`]).
//!
//! For float16, whose widening and narrowing LLVM can only vectorize as integer selects (a
//! [256, 1024] float16 product took 3.4x the CPU's time, most of it converting), the runs go
//! through `vcvtph2ps`/`vcvtps2ph`, 16 elements an instruction with AVX-512, 8 with F16C. The results are the
//! per-element loop's: each element is widened exactly, computed in float32 and rounded once.
//! Other layouts (strided, transposed, broadcast inside a row) and other storage types take
//! [`map1_isa`]/[`map2_isa`] with the per-element conversions.

use super::float::{FloatStore, LANES};
use super::layout::coalesce;
use super::map::{drive_dense_rows, map1_isa, map2_isa};
use super::parallel::SendPtr;
use super::simd::{level, Isa};
use crate::error::FooResult;
use crate::tensor::{TensorMut, TensorRef};
use num_traits::Zero;

/// Elements per block: three float32 blocks (12 KiB) stay in L1 with the rows they come from.
const BLOCK: usize = 1024;

/// How the loops run an op over a dense run: [`Blocks`] or [`Vectors`].
pub trait Strategy: 'static {
    const VECTORS: bool;
}

/// A block widened into a float32 stack buffer, the op run over the buffer as over a float32
/// run (LLVM's loop vectorizer, any op), the buffer narrowed: three passes through L1.
pub struct Blocks;

/// A vector's worth (8 elements) widened, the op applied to its lanes, narrowed: one pass,
/// in registers, for ops whose lanes LLVM's SLP vectorizer turns into vector instructions
/// (arithmetic: add, mul, neg, abs). It left the lanes of `relu`'s and `maximum`'s NaN arms,
/// and branchy math such as `tanh`, scalar (relu: 30x the CPU's time), so those take
/// [`Blocks`]. A float16 add of [256, 1024]: 2.5x the CPU's time in blocks, 1.0 in vectors.
pub struct Vectors;

impl Strategy for Blocks {
    const VECTORS: bool = false;
}

impl Strategy for Vectors {
    const VECTORS: bool = true;
}

/// `out[i] = store(g(load(a[i])))`.
pub fn map1_float<F: FloatStore, S: Strategy>(
    out: &TensorMut,
    a: &TensorRef,
    g: impl Fn(F::M, Isa) -> F::M + Sync + Send,
) -> FooResult<()> {
    if widens::<F>(out, &[a]) {
        let l = coalesce(&out.shape, [&out.strides, &a.strides]);
        let (po, pa) = (SendPtr::<F>::of(out.ptr), SendPtr::<F>::of(a.ptr));
        let dense_input = l.strides[1].last() == Some(&1);
        let dense = dense_input
            && drive_dense_rows(&l, &|off, rows, len, outer| {
                let (o, x) = (po.at(off[0]), pa.at(off[1]) as *const F);
                // SAFETY: rows of dense elements of the operands, in bounds by their shapes and
                // strides; the output's rows are written by this chunk only and overlap the
                // input's only elementwise (the glue's contract).
                unsafe { rows1::<F, S, _>(o, x, rows, len, [outer[0], outer[1]], &g) };
            });
        if dense {
            return Ok(());
        }
    }
    // Always inlined, as `g` (see binary.rs's `m!`).
    map1_isa(
        out,
        a,
        #[inline(always)]
        move |v: F, isa| F::store(g(v.load(), isa)),
    )
}

/// `out[i] = store(g(load(a[i]), load(b[i])))`.
pub fn map2_float<F: FloatStore, S: Strategy>(
    out: &TensorMut,
    a: &TensorRef,
    b: &TensorRef,
    g: impl Fn(F::M, F::M, Isa) -> F::M + Sync + Send,
) -> FooResult<()> {
    if widens::<F>(out, &[a, b]) {
        let l = coalesce(&out.shape, [&out.strides, &a.strides, &b.strides]);
        let inner = |k: usize| l.strides[k].last().copied().unwrap_or(0);
        let (sa, sb) = (inner(1), inner(2));
        let (po, pa, pb) = (
            SendPtr::<F>::of(out.ptr),
            SendPtr::<F>::of(a.ptr),
            SendPtr::<F>::of(b.ptr),
        );
        // One input constant along the rows (a scalar, a per-row scale) is read once per row.
        let dense = match (sa, sb) {
            (1, 1) => drive_dense_rows(&l, &|off, rows, len, outer| {
                let (o, x, y) = (po.at(off[0]), pa.at(off[1]), pb.at(off[2]));
                // SAFETY: as in map1_float, for both inputs.
                unsafe { rows2::<F, S, _>(o, x as *const F, y as *const F, rows, len, outer, &g) };
            }),
            (1, 0) | (0, 1) => drive_dense_rows(&l, &|off, rows, len, outer| {
                // The dense input, and the constant one: its element of the chunk's first
                // row at `off`, of row r at `off + r * outer`.
                let (x, c, swap) = if sa == 1 {
                    (pa.at(off[1]), pb.at(off[2]), false)
                } else {
                    (pb.at(off[2]), pa.at(off[1]), true)
                };
                let cs = if sa == 1 { outer[2] } else { outer[1] };
                let dense_outer = if sa == 1 { outer[1] } else { outer[2] };
                // SAFETY: as in map1_float; the constant operand has an element per row.
                unsafe {
                    rows_const::<F, S, _>(
                        po.at(off[0]),
                        x as *const F,
                        c as *const F,
                        rows,
                        len,
                        [outer[0], dense_outer, cs],
                        swap,
                        &g,
                    )
                };
            }),
            _ => false,
        };
        if dense {
            return Ok(());
        }
    }
    map2_isa(
        out,
        a,
        b,
        #[inline(always)]
        move |u: F, v: F, isa| F::store(g(u.load(), v.load(), isa)),
    )
}

/// Whether the block loops apply: a storage type that widens in blocks on a CPU whose copy
/// has the instructions for it, and operands of the output's dtype and shape (anything else
/// goes to `map*_isa`, which reports it).
fn widens<F: FloatStore>(out: &TensorMut, inputs: &[&TensorRef]) -> bool {
    F::WIDENS_IN_BLOCKS
        && level() >= 2
        && out.dtype == F::DTYPE
        && out.numel() > 0
        && inputs
            .iter()
            .all(|a| a.dtype == F::DTYPE && a.shape == out.shape)
}

/// `o[i] = store(g(load(x[i])))` over one dense run, a block at a time.
///
/// # Safety
/// `o` and `x` address `len` elements; `o` is `x` or overlaps it only elementwise.
#[inline(always)]
unsafe fn run1<F: FloatStore, S: Strategy, G: Fn(F::M, Isa) -> F::M>(
    isa: Isa,
    bufs: &mut [[F::M; BLOCK]; 2],
    o: *mut F,
    x: *const F,
    len: usize,
    g: &G,
) {
    if S::VECTORS {
        let mut i = 0;
        while i + LANES <= len {
            // SAFETY: elements i..i + LANES of both (the caller's contract), read before
            // written.
            unsafe {
                let v = F::load_lanes(isa, x.add(i));
                F::store_lanes(isa, v.map(|v| g(v, isa)), o.add(i));
            }
            i += LANES;
        }
        for i in i..len {
            // SAFETY: i < len (the caller's contract).
            unsafe { *o.add(i) = F::store(g((*x.add(i)).load(), isa)) };
        }
        return;
    }
    for s in (0..len).step_by(BLOCK) {
        let n = BLOCK.min(len - s);
        // SAFETY: elements s..s + n of both (the caller's contract); the block is read whole
        // before any of it is written, so elementwise overlap is harmless.
        unsafe {
            let [xb, ob] = bufs;
            F::load_run(isa, x.add(s), xb.as_mut_ptr(), n);
            // Into a buffer of its own: in place, an op that keeps `x` in one arm (relu) was a
            // conditional store, AVX2's microcoded `vmaskmovps` (25x the CPU's time).
            for (r, &v) in ob[..n].iter_mut().zip(&xb[..n]) {
                *r = g(v, isa);
            }
            F::store_run(isa, ob.as_ptr(), o.add(s), n);
        }
    }
}

/// [`rows1`]'s body.
///
/// # Safety
/// As [`rows1`].
#[inline(always)]
unsafe fn rows1_body<F: FloatStore, S: Strategy, G: Fn(F::M, Isa) -> F::M>(
    isa: Isa,
    o: *mut F,
    x: *const F,
    rows: usize,
    len: usize,
    outer: [isize; 2],
    g: &G,
) {
    let mut bufs = [[F::M::zero(); BLOCK]; 2];
    for r in 0..rows as isize {
        // SAFETY: the caller's contract, row r.
        unsafe {
            run1::<F, S, _>(
                isa,
                &mut bufs,
                o.offset(r * outer[0]),
                x.offset(r * outer[1]),
                len,
                g,
            )
        };
    }
}

crate::unsafe_multiversion!(
    /// `rows` dense rows of `len` elements, row r of each operand at `ptr + r * outer[k]`.
    ///
    /// # Safety
    /// Every row of both operands is in bounds; output rows overlap neither each other nor
    /// the input except elementwise.
    unsafe fn rows1<F: FloatStore, S: Strategy, G: Fn(F::M, Isa) -> F::M>(o: *mut F, x: *const F, rows: usize, len: usize, outer: [isize; 2], g: &G) => isa rows1_body
);

/// [`rows2`]'s body.
///
/// # Safety
/// As [`rows2`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn rows2_body<F: FloatStore, S: Strategy, G: Fn(F::M, F::M, Isa) -> F::M>(
    isa: Isa,
    o: *mut F,
    x: *const F,
    y: *const F,
    rows: usize,
    len: usize,
    outer: [isize; 3],
    g: &G,
) {
    let [mut xb, mut yb, mut ob] = [[F::M::zero(); BLOCK]; 3];
    for r in 0..rows as isize {
        let (o, x, y) = (
            o.wrapping_offset(r * outer[0]),
            x.wrapping_offset(r * outer[1]),
            y.wrapping_offset(r * outer[2]),
        );
        if S::VECTORS {
            let mut i = 0;
            while i + LANES <= len {
                // SAFETY: elements i..i + LANES of row r of each operand (the caller's
                // contract), read before written.
                unsafe {
                    let (a, b) = (F::load_lanes(isa, x.add(i)), F::load_lanes(isa, y.add(i)));
                    let v: [F::M; LANES] = std::array::from_fn(|k| g(a[k], b[k], isa));
                    F::store_lanes(isa, v, o.add(i));
                }
                i += LANES;
            }
            for i in i..len {
                // SAFETY: i < len (the caller's contract).
                unsafe { *o.add(i) = F::store(g((*x.add(i)).load(), (*y.add(i)).load(), isa)) };
            }
            continue;
        }
        for s in (0..len).step_by(BLOCK) {
            let n = BLOCK.min(len - s);
            // SAFETY: elements s..s + n of row r of each operand (the caller's contract); as
            // in `run1`, both blocks are read before the output's is written.
            unsafe {
                F::load_run(isa, x.add(s), xb.as_mut_ptr(), n);
                F::load_run(isa, y.add(s), yb.as_mut_ptr(), n);
                // Into a buffer of its own, as in `run1`.
                for ((r, &a), &b) in ob[..n].iter_mut().zip(&xb[..n]).zip(&yb[..n]) {
                    *r = g(a, b, isa);
                }
                F::store_run(isa, ob.as_ptr(), o.add(s), n);
            }
        }
    }
}

crate::unsafe_multiversion!(
    /// [`rows1`] with a second dense input.
    ///
    /// # Safety
    /// As [`rows1`], for both inputs.
    unsafe fn rows2<F: FloatStore, S: Strategy, G: Fn(F::M, F::M, Isa) -> F::M>(o: *mut F, x: *const F, y: *const F, rows: usize, len: usize, outer: [isize; 3], g: &G) => isa rows2_body
);

/// [`rows_const`]'s body.
///
/// # Safety
/// As [`rows_const`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn rows_const_body<F: FloatStore, S: Strategy, G: Fn(F::M, F::M, Isa) -> F::M>(
    isa: Isa,
    o: *mut F,
    x: *const F,
    c: *const F,
    rows: usize,
    len: usize,
    outer: [isize; 3],
    swap: bool,
    g: &G,
) {
    let mut bufs = [[F::M::zero(); BLOCK]; 2];
    for r in 0..rows as isize {
        // SAFETY: the caller's contract, row r; `c` has one element per row.
        unsafe {
            let (o, x) = (o.offset(r * outer[0]), x.offset(r * outer[1]));
            let k = (*c.offset(r * outer[2])).load();
            if swap {
                run1::<F, S, _>(isa, &mut bufs, o, x, len, &|v, isa| g(k, v, isa));
            } else {
                run1::<F, S, _>(isa, &mut bufs, o, x, len, &|v, isa| g(v, k, isa));
            }
        }
    }
}

crate::unsafe_multiversion!(
    /// [`rows1`] with a second input constant along each row, its row r's element at
    /// `c + r * outer[2]`: `g(x, c)`, or `g(c, x)` when `swap`.
    ///
    /// # Safety
    /// As [`rows1`], and `c + r * outer[2]` is an element for every row r.
    #[allow(clippy::too_many_arguments)]
    unsafe fn rows_const<F: FloatStore, S: Strategy, G: Fn(F::M, F::M, Isa) -> F::M>(o: *mut F, x: *const F, c: *const F, rows: usize, len: usize, outer: [isize; 3], swap: bool, g: &G) => isa rows_const_body
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::core::layout::GRAIN;
    use crate::kernels::core::map::testing::{uniform, Owned};
    use half::f16;

    fn halves(n: usize, seed: u64, scale: f64) -> Vec<f16> {
        let mut v: Vec<f16> = uniform(n, seed, -scale, scale)
            .into_iter()
            .map(f16::from_f64)
            .collect();
        // Edge values in the vector body and in the tail.
        let edges = [
            65504.0,
            -0.0,
            6.0e-8,
            f64::INFINITY,
            f64::NAN,
            1.0 + 2f64.powi(-11),
        ];
        for (i, e) in edges.into_iter().enumerate() {
            v[i] = f16::from_f64(e);
            v[n - 1 - i] = f16::from_f64(-e);
        }
        v
    }

    fn same(a: &[f16], b: &[f16]) -> bool {
        a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
    }

    #[test]
    fn float16_blocks_and_vectors_match_the_per_element_loop() {
        check::<Blocks>();
        check::<Vectors>();
    }

    fn check<S: Strategy>() {
        let g2 = |x: f32, y: f32, _: Isa| x * y - 0.25;
        let g1 = |x: f32, _: Isa| x * x * 1.5 + x;
        // One run (above a thread's grain, not a whole number of blocks or vectors) and rows
        // (a [7, 1500] product).
        for shape in [vec![2 * GRAIN + 1003], vec![7, 1500]] {
            let n: usize = shape.iter().product();
            let (x, y) = (
                Owned::new(halves(n, 1, 300.0), &shape),
                Owned::new(halves(n, 2, 9.0), &shape),
            );
            let mut o = Owned::<f16>::zeros(&shape);
            map2_float::<f16, S>(&o.m(), &x.r(), &y.r(), g2).unwrap();
            let want: Vec<f16> = (x.data.iter().zip(&y.data))
                .map(|(a, b)| f16::store(g2(a.load(), b.load(), Isa::BASELINE)))
                .collect();
            assert!(same(&o.data, &want), "binary {shape:?}");
            map1_float::<f16, S>(&o.m(), &x.r(), g1).unwrap();
            let want: Vec<f16> = x
                .data
                .iter()
                .map(|a| f16::store(g1(a.load(), Isa::BASELINE)))
                .collect();
            assert!(same(&o.data, &want), "unary {shape:?}");
        }
        // An operand constant along the rows, on either side: per row ([7, 1]) and one for all.
        let x = Owned::new(halves(7 * 1500, 3, 300.0), &[7, 1500]);
        for c in [
            Owned::new(halves(7, 4, 9.0), &[7, 1]),
            Owned::new(vec![f16::from_f64(-2.75)], &[1]),
        ] {
            let cb = c.bcast(&[7, 1500]);
            let at = |i: usize| c.data[if c.data.len() == 7 { i / 1500 } else { 0 }];
            for swap in [false, true] {
                let mut o = Owned::<f16>::zeros(&[7, 1500]);
                let (a, b) = if swap { (&cb, &x.r()) } else { (&x.r(), &cb) };
                map2_float::<f16, S>(&o.m(), a, b, g2).unwrap();
                let want: Vec<f16> = (0..x.data.len())
                    .map(|i| {
                        let (u, v) = if swap {
                            (at(i), x.data[i])
                        } else {
                            (x.data[i], at(i))
                        };
                        f16::store(g2(u.load(), v.load(), Isa::BASELINE))
                    })
                    .collect();
                assert!(same(&o.data, &want), "constant operand, swap {swap}");
            }
        }
    }
}
