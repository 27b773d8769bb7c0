//! A whole LSTM layer's recurrence in one call, for `nn.LSTM` (src/glue/rnn_layer.cpp), float32
//! and float64. Called step by step, each time step costs a matrix product handed to the pool,
//! a cell kernel handed to it again, and the glue's dispatch around both: on a [32, 256] batch
//! that was about 170 us a step against 82 us of multiply-adds at the FMA peak of 2 cores.
//!
//! Here one team of threads runs every step (`runtime::team`). Member `m` owns a slice of the
//! hidden units. In float32 on AVX-512 it first projects the whole input onto its units' gates
//! (`x @ w_ih.t()`, into a layout of its own: [`MemberGates`]); then each step is
//! 1. the product of the previous `h` with the member's own rows of the recurrent weight (its
//!    units' four gates, packed once into its own panels, where its cache keeps them across
//!    steps, and multiplied by `h`'s rows where they lie: [`RecurrentProduct`]), then
//! 2. the cell for its units, which reads only its own gate sums (on AVX-512 each block of 16
//!    units right after the product has its sums: `cell_avx512`),
//!
//! and the next step's product reads the whole new `h`: in the forward, a member waits for each
//! other member's units of it when its product's depth gets there (a count of finished steps per
//! member); the backward meets at a barrier. Each output element
//! is one product column and one cell element, computed as the step-by-step path computes them
//! (the same depth order, see `gemm::GEMM_DEPTH`; the cell's math is `lstm_fwd_body`'s), so the
//! results do not depend on the team's size.

use super::bias_vec;
use super::cell_avx512::{self, Block};
use super::panels_avx512;
use crate::dtype::DType;
use crate::error::FooResult;
use crate::kernels::core::float::Math;
use crate::kernels::core::gemm::linear::{self, Linear};
use crate::kernels::core::gemm::rows::{product_avx2, product_avx512, Dst};
use crate::kernels::core::gemm::{gemm_plain, GemmElem, Mat, GEMM_DEPTH, GEMM_SPLIT_FLOPS};
use crate::kernels::core::parallel::SendPtr;
use crate::kernels::core::scratch::{with_scratch, with_scratch2};
use crate::kernels::core::simd::{self, Isa};
use crate::kernels::core::transpose::{transpose_into, transpose_strided};
use crate::runtime::{cpu, pool, team};
use crate::tensor::{TensorMut, TensorRef};
use crate::{invalid_arg, multiversion, not_implemented};
use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Hidden units per member are a multiple of this (whole vectors for the cell).
const UNIT_BLOCK: usize = 8;

/// Element types the layer runs: the product's and the cell's math type in one.
pub trait LayerFloat: GemmElem + Math {}
impl LayerFloat for f32 {}
impl LayerFloat for f64 {}

/// LSTM layer forward from the input projections `xg` `[T, B, 4H]` (`x @ w_ih.t()` for every
/// step, without biases) or, with `w_ih` `[4H, I]` (where [`projects_input`]), from the input
/// `x` `[T, B, I]` in their place, the recurrent weight `w_hh` `[4H, H]` and the first states
/// `h0`, `c0` `[B, H]`, all contiguous: writes the outputs `out` `[T, B, H]` in time order (`reverse` runs
/// the steps from the last) and the last cell state `c_last` `[B, H]`; for a backward, also
/// every step's cell state `cs` `[T, B, H]` and activated gates `ws` `[T, B, 4H]` (the cell's
/// workspace), which inference leaves out (null): a third of the cell's memory traffic.
#[allow(clippy::too_many_arguments)]
pub fn lstm_layer(
    out: &TensorMut,
    c_last: &TensorMut,
    cs: Option<&TensorMut>,
    ws: Option<&TensorMut>,
    xg: &TensorRef,
    w_ih: Option<&TensorRef>,
    w_hh: &TensorRef,
    h0: &TensorRef,
    c0: &TensorRef,
    input_bias: Option<&TensorRef>,
    hidden_bias: Option<&TensorRef>,
    reverse: bool,
) -> FooResult<()> {
    // With `w_ih`, `xg` is the input `x` [T, B, I] (see `projects_input`).
    let input = w_ih.map(|w| (xg, w));
    let gates_shape = match input {
        Some((x, w)) => match (x.shape.as_slice(), w.shape.as_slice()) {
            (&[t, b, i], &[g, wi]) if wi == i => vec![t, b, g],
            (x, w) => {
                return invalid_arg!(
                    "lstm layer: input {x:?} and input weight {w:?} are not [T, B, I] and [4H, I]"
                )
            }
        },
        None => xg.shape.to_vec(),
    };
    let (t, b, h) = match (gates_shape.as_slice(), w_hh.shape.as_slice()) {
        (&[t, b, g], &[wg, h]) if g == 4 * h && wg == g => (t, b, h),
        (x, w) => {
            return invalid_arg!(
                "lstm layer: input gates {x:?} and recurrent weight {w:?} are not [T, B, 4H] and [4H, H]"
            )
        }
    };
    let dtype = xg.dtype;
    if input.is_some() && !projects_input(dtype, h) {
        return invalid_arg!(
            "lstm layer: cannot project the input itself for {} and H = {h}",
            dtype.name()
        );
    }
    let mut tensors: Vec<Operand> = vec![
        (
            "out",
            &out.shape,
            out.dtype,
            out.is_contiguous(),
            vec![t, b, h],
        ),
        (
            "c_last",
            &c_last.shape,
            c_last.dtype,
            c_last.is_contiguous(),
            vec![b, h],
        ),
        (
            "xg",
            &xg.shape,
            xg.dtype,
            xg.is_contiguous(),
            match input {
                Some((x, _)) => x.shape.to_vec(),
                None => vec![t, b, 4 * h],
            },
        ),
        (
            "w_hh",
            &w_hh.shape,
            w_hh.dtype,
            w_hh.is_contiguous(),
            vec![4 * h, h],
        ),
        ("h0", &h0.shape, h0.dtype, h0.is_contiguous(), vec![b, h]),
        ("c0", &c0.shape, c0.dtype, c0.is_contiguous(), vec![b, h]),
    ];
    if let Some((_, w)) = input {
        tensors.push((
            "w_ih",
            &w.shape,
            w.dtype,
            w.is_contiguous(),
            w.shape.to_vec(),
        ));
    }
    if let Some(cs) = cs {
        tensors.push(("cs", &cs.shape, cs.dtype, cs.is_contiguous(), vec![t, b, h]));
    }
    if let Some(ws) = ws {
        tensors.push((
            "ws",
            &ws.shape,
            ws.dtype,
            ws.is_contiguous(),
            vec![t, b, 4 * h],
        ));
    }
    check_all("lstm layer", dtype, &tensors)?;
    let threads = if b * 4 * h * h >= GEMM_SPLIT_FLOPS {
        pool::num_threads()
    } else {
        1
    };
    let ptrs = Ptrs {
        out: SendPtr::of(out.ptr),
        c_last: SendPtr::of(c_last.ptr),
        cs: cs.map(|x| SendPtr::of(x.ptr)),
        ws: ws.map(|x| SendPtr::of(x.ptr)),
        xg: SendPtr::of(xg.ptr),
        input: input.map(|(x, w)| (SendPtr::of(w.ptr), x.shape[2])),
        w_hh: SendPtr::of(w_hh.ptr),
        h0: SendPtr::of(h0.ptr),
        c0: SendPtr::of(c0.ptr),
    };
    match dtype {
        DType::F32 => {
            let biases = (
                bias_vec::<f32>(input_bias, 4 * h, "input_bias")?,
                bias_vec::<f32>(hidden_bias, 4 * h, "hidden_bias")?,
            );
            // SAFETY: the pointers are the checked tensors' (contiguous, these shapes, f32).
            unsafe { run_layer::<f32>(ptrs, (t, b, h), &biases, reverse, threads) }
        }
        DType::F64 => {
            let biases = (
                bias_vec::<f64>(input_bias, 4 * h, "input_bias")?,
                bias_vec::<f64>(hidden_bias, 4 * h, "hidden_bias")?,
            );
            // SAFETY: as above, f64.
            unsafe { run_layer::<f64>(ptrs, (t, b, h), &biases, reverse, threads) }
        }
        d => return not_implemented!("lstm layer: not implemented for '{}'", d.name()),
    }
    Ok(())
}

/// The layer's tensors (see [`lstm_layer`]).
#[derive(Clone, Copy)]
struct Ptrs {
    out: SendPtr<u8>,
    c_last: SendPtr<u8>,
    cs: Option<SendPtr<u8>>,
    ws: Option<SendPtr<u8>>,
    xg: SendPtr<u8>,
    /// The input weight `[4H, I]` and `I` when `xg` is the input `x` `[T, B, I]`: each member
    /// then projects the input onto its own units' gates first ([`MemberGates`]).
    input: Option<(SendPtr<u8>, usize)>,
    w_hh: SendPtr<u8>,
    h0: SendPtr<u8>,
    c0: SendPtr<u8>,
}

/// Member `tid`'s hidden units `j0..j1` of `h` in a team of `size`: whole [`UNIT_BLOCK`]s but
/// the last; none (`j0 == j1`) for members past the units.
fn member_units(h: usize, size: usize, tid: usize) -> (usize, usize) {
    let per = h.div_ceil(size).next_multiple_of(UNIT_BLOCK);
    ((tid * per).min(h), ((tid + 1) * per).min(h))
}

/// Runs `member(j0, n)` on a team of up to `threads` threads, each member with its own hidden
/// units `j0..j0 + n` of `h` ([`member_units`]); a member left without units
/// still meets the others at each of the `steps` barriers, which count the whole team.
fn run_members(threads: usize, h: usize, steps: usize, member: &(dyn Fn(usize, usize) + Sync)) {
    team::run_fn(threads, &|tid, size| {
        let (j0, j1) = member_units(h, size, tid);
        if j1 == j0 {
            (0..steps).for_each(|_| team::barrier());
        } else {
            member(j0, j1 - j0)
        }
    });
}

/// How many steps a member of the forward has finished (its units of `h` written), on a cache
/// line of its own: the forward's members wait for these instead of meeting at a barrier.
#[repr(align(128))]
#[derive(Default)]
struct StepsDone(AtomicUsize);

/// # Safety
/// `p` holds [`lstm_layer`]'s checked tensors, of element type `F` and dims `(t, b, h)`, the
/// outputs writable and aliasing no input.
unsafe fn run_layer<F: LayerFloat>(
    p: Ptrs,
    (t, b, h): (usize, usize, usize),
    (b1, b2): &(Vec<F>, Vec<F>),
    reverse: bool,
    threads: usize,
) {
    if t == 0 || b == 0 || h == 0 {
        return;
    }
    // Each step's product reads the previous `h` in depth order, member by member's units:
    // a member waits for each one's units of the previous step only when its product gets
    // there (its own are ready), not for the whole team at a barrier. On 2 cores the helper
    // thread ran ~5% slower than the caller, which the barrier made the other wait for at
    // every step; now the faster one runs on into the first part of the next product.
    let done: Vec<StepsDone> = (0..threads).map(|_| StepsDone::default()).collect();
    // A zero first state (`nn.LSTM`'s default without one): the first step can do without its
    // product (`RecurrentProduct::run_zero_state`).
    // SAFETY: h0 is the dense [B, H] state (the caller's contract).
    let h0_zero = unsafe { p.h0.cast::<F>().slice(0, b * h) }
        .iter()
        .all(|v| *v == F::ZERO);
    team::run_fn(threads, &|tid, size| {
        let (j0, j1) = member_units(h, size, tid);
        if j1 == j0 {
            return;
        }
        let n = j1 - j0;
        // The depth segments of the product, one per member with units, in depth order.
        let segments: Vec<(usize, usize, usize)> = (0..size)
            .map(|k| {
                let (lo, hi) = member_units(h, size, k);
                (lo, hi, k)
            })
            .filter(|&(lo, hi, _)| hi > lo)
            .collect();
        let panels = RecurrentProduct::<F>::panels_len(h, n);
        let own_len = p.input.map_or(0, |_| t * b * 4 * n);
        with_scratch2::<f32, f32, _>(panels, own_len, |packed, own| {
            // The member's input gates: its own projection ([`MemberGates`]), or its units of
            // the caller's.
            let (xg, xg_at) = match p.input {
                Some((w_ih, i)) => {
                    let layout = MemberGates::own(t * b, n);
                    // SAFETY: `input` comes with a float32 x [T, B, I] in `xg` and w_ih [4H, I]
                    // (`lstm_layer`, `projects_input`); `own` holds T B 4n floats.
                    unsafe {
                        layout.project(p.xg.cast(), (w_ih.cast(), i), (h, j0, n), t * b, own)
                    };
                    (layout, SendPtr::new(own.as_mut_ptr()).cast::<F>())
                }
                None => (MemberGates::shared(h, j0), p.xg.cast::<F>()),
            };
            let mut product =
                RecurrentProduct::<F>::new(p.w_hh.cast::<F>(), (b, h), (j0, n), packed);
            let (ld, gs) = product.sums_layout();
            let mut sums = vec![F::ZERO; product.sums_len()];
            // The cell state at the member's units, [B, n] (the cell is elementwise).
            let mut c = vec![F::ZERO; b * n];
            for r in 0..b {
                // SAFETY: row r of the dense [B, H] c0, at the member's units.
                c[r * n..(r + 1) * n]
                    .copy_from_slice(unsafe { p.c0.cast::<F>().slice(r * h + j0, n) });
            }
            let step = Step {
                b,
                h,
                xg,
                ld,
                gs,
                j0,
                n,
                sums: SendPtr::new(sums.as_mut_ptr()),
                c: SendPtr::new(c.as_mut_ptr()),
                b1,
                b2,
            };
            for s in 0..t {
                let tt = if reverse { t - 1 - s } else { s };
                let h_prev = if s == 0 {
                    p.h0.cast::<F>()
                } else {
                    elem::<F>(p.out, (if reverse { tt + 1 } else { tt - 1 }) * b * h)
                };
                let row = tt * b;
                let at = StepAt {
                    xg: elem::<F>(xg_at.cast(), row * xg.ld),
                    out: elem::<F>(p.out, row * h),
                    cs: p.cs.map(|x| elem::<F>(x, row * h)),
                    ws: p.ws.map(|x| elem::<F>(x, row * 4 * h)),
                };
                // Member k's units of the previous step's `h` are written once it has done s steps.
                let ready = |k: usize| {
                    team::wait_until(|| done[k].0.load(Ordering::Acquire) >= s);
                    if k != tid {
                        let (lo, hi) = member_units(h, size, k);
                        prefetch_columns(h_prev, (b, h), lo..hi);
                    }
                };
                // On AVX-512 the product runs the cell on each block of 16 units as soon as it has
                // the block's sums (`cell_avx512`); otherwise the cell takes all units after it.
                let block_cell = |u0: usize, units: usize| {
                    // SAFETY: the product fuses the cell only for float32 (`fuses_cell`), and
                    // this member's block u0..u0 + units of this step's rows is its own.
                    unsafe { cell_avx512::lstm_block(&step.block(at, u0, units)) }
                    // The next block's inputs, or the next step's first block's after the last.
                    let u1 = u0 + units;
                    if u1 < n {
                        cell_avx512::prefetch_xg(&step.block(
                            at,
                            u1,
                            cell_avx512::UNITS.min(n - u1),
                        ));
                    } else if s + 1 < t {
                        let tn = if reverse { t - 2 - s } else { s + 1 };
                        let next = StepAt {
                            xg: elem::<F>(xg_at.cast(), tn * b * xg.ld),
                            ..at
                        };
                        cell_avx512::prefetch_xg(&step.block(next, 0, cell_avx512::UNITS.min(n)));
                    }
                };
                let cell = product
                    .fuses_cell()
                    .then_some(&block_cell as &dyn Fn(usize, usize));
                // SAFETY: the member's sums are its own.
                let from_zero =
                    s == 0 && h0_zero && unsafe { product.run_zero_state(step.sums.get(), cell) };
                if !from_zero {
                    // SAFETY: h_prev is a dense [B, H] state: h0, or the previous step's output,
                    // whose units each segment's member wrote before `ready` returns for it (and
                    // no one writes again: every step has its own output rows); the member's
                    // sums are its own.
                    unsafe { product.run(h_prev.get(), step.sums.get(), &segments, &ready, cell) };
                }
                if cell.is_none() {
                    lstm_units::<F>(&step, at);
                }
                done[tid].0.store(s + 1, Ordering::Release);
            }
            for r in 0..b {
                // SAFETY: row r of the dense [B, H] c_last, at the member's units (its alone).
                unsafe { p.c_last.cast::<F>().slice_mut(r * h + j0, n) }
                    .copy_from_slice(&c[r * n..(r + 1) * n]);
            }
        })
    });
}

/// Asks for columns `cols` of the `[B, H]` state at `state` (another member's units of the
/// previous step's `h`, just written in that member's core) to be brought into L1, all at once,
/// before the product reads them row by row: with the vCPUs far apart (a cache line's round
/// trip 400+ ns) the product's first reads of each row waited for them one stream at a time.
/// Zen 5, 2 threads, 2 layers, medians of 7 alternating rounds, on top of [`cell_avx512::
/// prefetch_xg`]: 5.38 -> 5.08, 5.99 -> 5.88 ms there, level while the vCPUs are near.
fn prefetch_columns<F>(state: SendPtr<F>, (b, h): (usize, usize), cols: std::ops::Range<usize>) {
    let line = (64 / size_of::<F>()).max(1);
    for r in 0..b {
        for u in cols.clone().step_by(line) {
            let at = state.get().wrapping_add(r * h + u);
            // SAFETY: a prefetch reads nothing architecturally and never faults.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(at.cast()) };
        }
    }
}

/// Each step's product of a member: its gate sums (rows [`Self::sums_layout`]`.0` apart, a
/// row's gates `.1` apart) from the previous hidden state `[B, H]` and its rows of the
/// recurrent weight, which it keeps in the form its product reads fastest.
enum RecurrentProduct<'a, F> {
    /// Float32 on AVX2/AVX-512 CPUs: the member's units in blocks of `lanes` (one register of
    /// floats), each block's four gates' rows in one panel `[H][4 lanes]` (gate by gate), times
    /// the state's rows read in place ([`product_avx512`]): no packing, no transpose per step,
    /// and register tiles of a few rows ([`row_tiles`]) x 4 vectors, one per gate, stored to
    /// the gates' places in the sums (gates `n` rounded up to `lanes` apart).
    Panels {
        /// In a scratch buffer of the thread's: a fresh 512 KB `Vec` per call came as fresh
        /// pages, a fault and a zeroing each (most of the ~80 us a member spent packing).
        packed: &'a mut [f32],
        /// On AVX-512, one row of the sums of a zero state (`panels_avx512::pack`); else empty.
        zero_state: Vec<f32>,
        lanes: usize,
        /// The state's row pointers (as many as the tiles cover).
        state_rows: Vec<*const f32>,
        /// The batch's tiles, in rows ([`row_tiles`]).
        tiles: Vec<usize>,
        dims: (usize, usize, usize),
    },
    /// Otherwise (and for depths over [`GEMM_DEPTH`], which `gemm` would sum in pieces), the
    /// rows dense and gate-major (`wr[g * n + u] = w_hh[g * H + j0 + u]`), and the product
    /// turned around, `wr @ h.t()` into a `[4n, B]` scratch transposed afterwards (as
    /// `gemm_raw` does `a @ w.t()` with few rows): a [32, 256] @ [256, 512] product took 100
    /// us that way against 110 us as `h @ w.t()` with `w.t()` stored row-major (one thread).
    Dense {
        wr: Vec<F>,
        turned: Vec<F>,
        dims: (usize, usize, usize),
    },
}

impl<'a, F: LayerFloat> RecurrentProduct<'a, F> {
    /// The floats [`Self::new`]'s panels take for `n` units of a depth `h` (0 if none).
    fn panels_len(h: usize, n: usize) -> usize {
        panel_lanes::<F>(h).map_or(0, |lanes| n.div_ceil(lanes) * 4 * lanes * h)
    }

    /// The member's units `j0..j0 + n` of the dense `[4H, H]` weight at `w`, for batches of `b`,
    /// packed into `packed` ([`Self::panels_len`] floats, contents unspecified) if panels.
    fn new(
        w: SendPtr<F>,
        (b, h): (usize, usize),
        (j0, n): (usize, usize),
        packed: &'a mut [f32],
    ) -> Self {
        // SAFETY: rows g*H + j0 .. g*H + j0 + n of the dense [4H, H] weight.
        let gate = |g: usize| unsafe { w.slice((g * h + j0) * h, n * h) };
        let dims = (b, h, n);
        if let Some(lanes) = panel_lanes::<F>(h) {
            let cols = 4 * lanes;
            let packed = &mut packed[..n.div_ceil(lanes) * cols * h];
            let mut zero_state = Vec::new();
            if lanes == panels_avx512::LANES {
                zero_state = vec![0.0; 4 * n.next_multiple_of(lanes)];
                // SAFETY: lanes 16 means AVX-512 (panel_lanes) and F is f32; w is the dense
                // [4H, H] weight and j0 + n <= H.
                unsafe { panels_avx512::pack(w.cast().get(), h, (j0, n), packed, &mut zero_state) };
            } else {
                // Panel p's gate g is the transpose of that gate's rows of units p * lanes.., in
                // 8 x 8 register blocks.
                for (p, panel) in packed.chunks_exact_mut(h * cols).enumerate() {
                    let units = lanes.min(n - p * lanes);
                    if units < lanes {
                        // Columns past the units: their sums are dropped, but not from garbage.
                        panel.fill(0.0);
                    }
                    for g in 0..4 {
                        // SAFETY: F is f32 (panel_lanes); the source is `units` rows of H floats
                        // of gate g's rows (within `gate(g)`), the destination column block g of
                        // the panel's H rows of `cols` floats.
                        unsafe {
                            transpose_strided(
                                gate(g)[p * lanes * h..].as_ptr().cast::<f32>(),
                                h as isize,
                                units,
                                h,
                                panel[g * lanes..].as_mut_ptr(),
                                cols,
                                false,
                            )
                        }
                    }
                }
            }
            let tiles = row_tiles(b, lanes);
            return Self::Panels {
                packed,
                zero_state,
                lanes,
                state_rows: vec![std::ptr::null(); tiles.iter().sum()],
                tiles,
                dims,
            };
        }
        let mut wr = vec![F::ZERO; 4 * n * h];
        for g in 0..4 {
            wr[g * n * h..(g + 1) * n * h].copy_from_slice(gate(g));
        }
        Self::Dense {
            wr,
            turned: vec![F::ZERO; 4 * n * b],
            dims,
        }
    }

    /// Whether [`Self::run`] runs the cell on each block of units it finishes (AVX-512 panels).
    fn fuses_cell(&self) -> bool {
        matches!(self, Self::Panels { lanes: 16, .. })
    }

    /// [`Self::run`] for a state of zeros (+-0), without the product, where the panels carry
    /// its sums (AVX-512, `zero_state`): every row of `sums` gets them, and `cell` runs on each
    /// block as `run` has it. False (nothing done) otherwise: the first step of a layer from
    /// the default zero state, 1/T of the recurrent products (3% for 32 steps).
    ///
    /// # Safety
    /// As [`Self::run`]'s for `sums`.
    unsafe fn run_zero_state(&self, sums: *mut F, cell: Option<&dyn Fn(usize, usize)>) -> bool {
        let (ld, gs) = self.sums_layout();
        let (
            Self::Panels {
                zero_state,
                lanes,
                dims: (b, _, n),
                ..
            },
            Some(cell),
        ) = (self, cell)
        else {
            return false;
        };
        if zero_state.is_empty() {
            return false;
        }
        let (b, n, lanes) = (*b, *n, *lanes);
        for u0 in (0..n).step_by(lanes) {
            for r in 0..b {
                for g in 0..4 {
                    let at = g * gs + u0;
                    // SAFETY: row r < B of the sums, gate g's block of units u0.. (whole blocks
                    // wide), within sums_len; F is f32 (panels of 16 lanes).
                    unsafe {
                        sums.cast::<f32>()
                            .add(r * ld + at)
                            .copy_from(zero_state[at..at + lanes].as_ptr(), lanes)
                    };
                }
            }
            cell(u0, lanes.min(n - u0));
        }
        true
    }

    /// Where the sums lie: rows `.0` apart, a row's gates `.1` apart.
    fn sums_layout(&self) -> (usize, usize) {
        let gs = match self {
            Self::Panels { lanes, dims, .. } => dims.2.next_multiple_of(*lanes),
            Self::Dense { dims, .. } => dims.2,
        };
        (4 * gs, gs)
    }

    /// The sums buffer's length (rows past the batch included, which the panels' tiles write).
    fn sums_len(&self) -> usize {
        match self {
            Self::Panels { state_rows, .. } => state_rows.len() * self.sums_layout().0,
            Self::Dense { dims, .. } => dims.0 * 4 * dims.2,
        }
    }

    /// `sums = h_prev @ wr.t()`, as [`Self::sums_layout`] says, over the depth in `segments`
    /// `(lo, hi, owner)` (contiguous from 0 to H), calling `ready(owner)` before reading
    /// `h_prev`'s columns `lo..hi`; then `cell(u0, units)` for each block of units whose sums
    /// are done, when given (only if [`Self::fuses_cell`]).
    ///
    /// # Safety
    /// `h_prev` is a dense `[B, H]` matrix of `F` whose columns of a segment are readable once
    /// its `ready` returns; `sums` is writable for [`Self::sums_len`] elements that no one else
    /// accesses meanwhile.
    unsafe fn run(
        &mut self,
        h_prev: *const F,
        sums: *mut F,
        segments: &[(usize, usize, usize)],
        ready: &dyn Fn(usize),
        cell: Option<&dyn Fn(usize, usize)>,
    ) {
        let (ld, gs) = self.sums_layout();
        match self {
            Self::Panels {
                packed,
                lanes,
                state_rows,
                tiles,
                dims: (b, h, n),
                ..
            } => {
                let (b, h, n, lanes) = (*b, *h, *n, *lanes);
                let cols = 4 * lanes;
                let h_prev = h_prev.cast::<f32>();
                for (j, r) in state_rows.iter_mut().enumerate() {
                    // Rows past the batch read row 0; their results are dropped.
                    *r = h_prev.wrapping_add(if j < b { j * h } else { 0 });
                }
                let dst = sums.cast::<f32>();
                let null = std::ptr::null();
                // Cutting the depth at the segments' ends resumes the same chains (Dst::Resume).
                for (si, &(lo, hi, owner)) in segments.iter().enumerate() {
                    ready(owner);
                    let last = si + 1 == segments.len();
                    for (i, panel) in packed.chunks_exact(h * cols).enumerate() {
                        for k0 in (lo..hi).step_by(depth_block()) {
                            let depth = depth_block().min(hi - k0);
                            let w = panel[k0 * cols..].as_ptr();
                            let mode = match k0 {
                                0 => Dst::Write,
                                _ => Dst::Resume,
                            };
                            let mut r0 = 0;
                            for &rows in tiles.iter() {
                                let d = dst.wrapping_add(r0 * ld + i * lanes);
                                let mut at = [null; MAX_TILE_ROWS];
                                for (a, &r) in at.iter_mut().zip(&state_rows[r0..r0 + rows]) {
                                    *a = r.wrapping_add(k0);
                                }
                                r0 += rows;
                                // SAFETY: F is f32 and the CPU has the kernel's features
                                // (panel_lanes); the tile's pointers address the depths k0..k0 +
                                // depth of H floats each, `w` those depths of the panel, and d
                                // `lanes` columns of each gate of rows r0.. of sums (within the
                                // sums' rows, whose gates are whole blocks wide), which the block
                                // before wrote when resuming.
                                unsafe {
                                    let t = &at[..rows];
                                    match (lanes, rows) {
                                        (16, 6) => product_avx512::<6, 6, 4>(
                                            t, depth, w, d, ld, gs, rows, null, mode,
                                        ),
                                        (16, _) => product_avx512::<4, 4, 4>(
                                            t, depth, w, d, ld, gs, rows, null, mode,
                                        ),
                                        _ => product_avx2::<3, 3, 4>(
                                            t, depth, w, d, ld, gs, rows, null, mode,
                                        ),
                                    }
                                }
                            }
                        }
                        if let Some(cell) = cell.filter(|_| last) {
                            cell(i * lanes, lanes.min(n - i * lanes));
                        }
                    }
                }
            }
            Self::Dense {
                wr,
                turned,
                dims: (b, h, n),
            } => {
                let (b, h, n) = (*b, *h, *n);
                // One product over the whole depth (`gemm` sums it in one piece).
                segments.iter().for_each(|&(_, _, owner)| ready(owner));
                // SAFETY: turned is a dense [4n, B] matrix, wr a dense [4n, H] one, h_prev a
                // dense [B, H] one (read as [H, B]); then the [4n, B] product into sums.
                unsafe {
                    gemm_plain(
                        4 * n,
                        b,
                        h,
                        turned.as_mut_ptr(),
                        b as isize,
                        1,
                        Mat {
                            ptr: wr.as_ptr(),
                            rs: h as isize,
                            cs: 1,
                        },
                        Mat {
                            ptr: h_prev,
                            rs: 1,
                            cs: h as isize,
                        },
                    );
                    let sums = std::slice::from_raw_parts_mut(sums, b * 4 * n);
                    transpose_into(turned.as_ptr(), b as isize, 4 * n, b, sums, false)
                }
            }
        }
    }
}

/// Depth indices per pass of [`RecurrentProduct::Panels`] over the batch's tiles. On Intel, 64:
/// a panel's block (64 x 64 floats, 16 KB) stays in L1 while every tile reads it, the tiles
/// resuming their chains from the sums between blocks ([`Dst::Resume`], the same bits); each
/// 4-row tile had streamed the whole panel (64 KB at H = 256) from L2 (Xeon, 2 threads, 2
/// layers: 10.6-11.0 -> 9.9-10.0 ms). On AMD ([`cpu::amd`]) the whole depth in one pass:
/// a Zen 4 streams the panel from L2 at the FMA rate, and the blocks' reloads and stores of
/// the accumulators cost 7% (a C loop of the layer's tiles: 105 GFLOP/s in 64-deep blocks,
/// 113 in one pass; `nn.LSTM(256, 256)` over 32 steps of a batch of 32, medians of 9-21
/// alternating rounds: 1 thread 11.99 -> 11.54 ms, 2 threads and 2 layers 13.89 -> 13.42).
fn depth_block() -> usize {
    if cpu::amd() {
        usize::MAX
    } else {
        64
    }
}

/// The most rows of a tile in [`row_tiles`].
const MAX_TILE_ROWS: usize = 6;

/// The batch's `b` rows cut into the register tiles of [`RecurrentProduct::Panels`], each
/// [`MAX_TILE_ROWS`], 4 or 3 rows (the last one's rows past `b` read row 0 and are dropped).
/// AVX-512: 6 rows x 4 vectors of 16 floats (24 accumulators: 10 loads per 24 multiply-adds,
/// against 8 per 16 in 4 x 4, which reads the 64 KB panel from L2 half as often again) while
/// more than 8 rows are left, then 4 x 4: [6, 6, 6, 6, 4, 4] for 32 rows. Zen 5, `nn.LSTM(8,
/// 256)` over 32 steps of a batch of 32, medians of 7 alternating rounds, three runs: 1
/// thread 2.87-2.88 -> 2.79-2.81 ms, 2 threads level (1.44-1.46 either way); `nn.LSTM(256,
/// 256, 2)` inference: 1 thread 9.91 -> 9.86 ms, 2 threads level in three runs (+-0.3%). 4 x 4 alone on a
/// Zen 4, 1 thread, `nn.LSTM(8, 256)` over 128 steps: 28.0-30.0 ms against 28.8-32.3 with
/// 4 x 2 vectors of one gate's columns. AVX2: 3 x 4 of 8 (12 of its 16 registers).
fn row_tiles(b: usize, lanes: usize) -> Vec<usize> {
    let mut tiles = Vec::new();
    let mut left = b;
    while left > 0 {
        let rows = match lanes {
            16 if left > 8 => MAX_TILE_ROWS,
            16 => 4,
            _ => 3,
        };
        tiles.push(rows);
        left = left.saturating_sub(rows);
    }
    tiles
}

/// The block width (floats per register) [`RecurrentProduct`] packs a member's weight rows in,
/// if any: float32 on AVX2/AVX-512 CPUs, with a depth `gemm` sums in one piece (so the bits
/// are the same as the dense form's).
fn panel_lanes<F: LayerFloat>(h: usize) -> Option<usize> {
    let fits = F::DTYPE == DType::F32 && h <= GEMM_DEPTH;
    match simd::level() {
        3 if fits => Some(16),
        2 if fits => Some(8),
        _ => None,
    }
}

/// Units per block of [`MemberGates`]' layout: one AVX-512 vector of float32.
const BLOCK_UNITS: usize = 16;

/// Whether [`lstm_layer`] projects the input itself (takes `x` and `w_ih` instead of the input
/// gates) for this dtype and hidden size: float32 where the recurrent product runs the AVX-512
/// cell on each block of units (`cell_avx512`), which reads [`MemberGates::own`]'s layout.
pub fn projects_input(dtype: DType, h: usize) -> bool {
    dtype == DType::F32
        && panel_lanes::<f32>(h) == Some(BLOCK_UNITS)
        && linear::panel_width().is_some()
}

/// Where a member's input gates lie: the gate `g` of its unit `u` (from 0) in row `r` (step
/// `t`'s rows are `t B..`) at `r ld + g gate + ((col0 + u) / 16) block + (col0 + u) % 16`.
#[derive(Clone, Copy)]
struct MemberGates {
    ld: usize,
    gate: usize,
    block: usize,
    col0: usize,
}

impl MemberGates {
    /// The caller's `[T, B, 4H]` input gates, the member's units from `j0`.
    fn shared(h: usize, j0: usize) -> Self {
        Self {
            ld: 4 * h,
            gate: h,
            block: BLOCK_UNITS,
            col0: j0,
        }
    }

    /// The member's own projection of the input onto its `n` units' gates, for `rows` rows
    /// (T B), in a buffer of its thread's: block by block of 16 units (`[n / 16][rows][4][16]`),
    /// so a step's block that the cell reads is one run of `B` 256-byte rows, where the
    /// hardware's prefetcher follows it and the member's core wrote it. In the caller's
    /// `[T, B, 4H]` (computed by both cores) each of a block's rows had four 64-byte pieces 1
    /// KB apart, rows 4 KB apart: the cell waited on them (half of its time, `perf`), the
    /// layer's prefetches notwithstanding. Row-major `[rows][4][n]` when `n` is not a whole
    /// number of the product's 32-column panels.
    fn own(rows: usize, n: usize) -> Self {
        match n % 32 {
            0 => Self {
                ld: 4 * BLOCK_UNITS,
                gate: BLOCK_UNITS,
                block: rows * 4 * BLOCK_UNITS,
                col0: 0,
            },
            _ => Self {
                ld: 4 * n,
                gate: n,
                block: BLOCK_UNITS,
                col0: 0,
            },
        }
    }

    /// Writes the member's gates `x @ w_ih[g H + j0..][..n].t()` for each gate `g` into `dst`
    /// in this layout (`linear::product_blocks`: each element the bits of the caller's `x @
    /// w_ih.t()`).
    ///
    /// # Safety
    /// `x` is a dense `[rows, I]` float32 matrix and `w_ih` a dense `[4H, I]` one with `j0 + n
    /// <= H`; `dst` holds `rows * 4 * n` floats; the CPU has AVX-512 ([`projects_input`]).
    unsafe fn project(
        &self,
        x: SendPtr<f32>,
        (w_ih, i): (SendPtr<f32>, usize),
        (h, j0, n): (usize, usize, usize),
        rows: usize,
        dst: &mut [f32],
    ) {
        assert!(dst.len() >= rows * 4 * n);
        for g in 0..4 {
            let p = Linear {
                m: rows,
                n,
                k: i,
                a: x.get(),
                lda: i as isize,
                w: w_ih.get().wrapping_add((g * h + j0) * i),
                ldw: i as isize,
                wk: 1,
                dst: dst.as_mut_ptr().wrapping_add(g * self.gate),
                ldd: self.ld as isize,
                bias: std::ptr::null(),
                add_dst: false,
                w_half: None,
                dst_half: None,
            };
            // SAFETY: rows g H + j0.. + n of w_ih and every row of x exist (the caller's
            // contract); each (row, unit) of gate g has its place in `dst` (rows * 4 n floats in
            // this layout), written only here.
            unsafe { linear::product_blocks(&p, self.block) };
        }
    }
}

/// Element `e` of a tensor of `F`s.
fn elem<F>(p: SendPtr<u8>, e: usize) -> SendPtr<F> {
    SendPtr::new(p.cast::<F>().at(e as isize))
}

/// A member's part of every step: its units `j0..j0 + n` of `h`, its sums of a block of
/// units (rows `ld` apart, a row's gates `gs` apart: [`RecurrentProduct::sums_layout`]).
struct Step<'a, F> {
    b: usize,
    h: usize,
    /// Where the member's input gates lie (rows `StepAt::xg` of each step).
    xg: MemberGates,
    ld: usize,
    gs: usize,
    j0: usize,
    n: usize,
    sums: SendPtr<F>,
    /// The cell state at its units, `[B, n]`, updated by each step.
    c: SendPtr<F>,
    b1: &'a [F],
    b2: &'a [F],
}

impl<F> Step<'_, F> {
    /// The operands of the units `u0..u0 + units` of the member's (a block of its sums) at
    /// step `at`, as float32 for [`cell_avx512::lstm_block`] (only called when `F` is f32).
    fn block(&self, at: StepAt<F>, u0: usize, units: usize) -> Block {
        let (h, j0) = (self.h, self.j0 + u0);
        let f32_at = |p: SendPtr<F>, e: usize| p.cast::<f32>().at(e as isize);
        let null = std::ptr::null_mut();
        let col = self.xg.col0 + u0;
        Block {
            rows: self.b,
            units,
            gate: h,
            xg: f32_at(
                at.xg,
                (col / BLOCK_UNITS) * self.xg.block + col % BLOCK_UNITS,
            ),
            xg_ld: self.xg.ld,
            xg_gate: self.xg.gate,
            sums: f32_at(self.sums, u0),
            ld: self.ld,
            gs: self.gs,
            b1: self.b1[j0..].as_ptr().cast(),
            b2: self.b2[j0..].as_ptr().cast(),
            c: f32_at(self.c, u0),
            c_ld: self.n,
            out: f32_at(at.out, j0),
            out_ld: h,
            cs: at.cs.map_or(null, |x| f32_at(x, j0)),
            ws: at.ws.map_or(null, |x| f32_at(x, j0)),
        }
    }
}

/// One step's rows: `xg`, `ws` `[B, 4H]`, `out`, `cs` `[B, H]` (dense).
#[derive(Clone, Copy)]
struct StepAt<F> {
    xg: SendPtr<F>,
    out: SendPtr<F>,
    cs: Option<SendPtr<F>>,
    ws: Option<SendPtr<F>>,
}

multiversion!(fn lstm_units<F: LayerFloat>(a: &Step<F>, at: StepAt<F>) => isa lstm_units_body);

/// The cell of `lstm_fwd_body` over the member's units of every row.
#[inline(always)]
fn lstm_units_body<F: LayerFloat>(isa: Isa, a: &Step<F>, at: StepAt<F>) {
    let (h, j0, n, gs) = (a.h, a.j0, a.n, a.gs);
    for r in 0..a.b {
        // SAFETY: row r of this step's tensors; the outputs' units (columns j0..j0 + n of each
        // gate block) are written by this member alone, and its sums are its own.
        unsafe {
            let o = r * h + j0;
            lstm_row(
                isa,
                at.xg.slice(r * 4 * h, 4 * h),
                a.sums.slice_mut(r * a.ld, 3 * gs + n),
                (a.b1, a.b2),
                a.c.slice_mut(r * n, n),
                at.out.slice_mut(o, n),
                at.cs.map(|x| x.slice_mut(o, n)),
                at.ws.map(|x| x.slice_mut(r * 4 * h, 4 * h)),
                (h, j0, n, gs),
            )
        }
    }
}

/// One row of [`lstm_units_body`]: `x`, `b1`, `b2`, `ws` hold all `4H` gate columns, `y` the
/// member's gate sums, gates `gs` apart (turned into the activated gates in place), the rest its
/// `n` units; `c` is the cell state, updated in place and copied into `cs` when given.
/// The work is a few simple loops, each a function with its slices as parameters: the compiler
/// then knows they do not overlap and vectorizes each (one loop over all of them stayed scalar,
/// 4x slower).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn lstm_row<F: LayerFloat>(
    isa: Isa,
    x: &[F],
    y: &mut [F],
    (b1, b2): (&[F], &[F]),
    c: &mut [F],
    hy: &mut [F],
    cs: Option<&mut [F]>,
    ws: Option<&mut [F]>,
    (h, j0, n, gs): (usize, usize, usize, usize),
) {
    // Each gate's sum `x + y + b1 + b2` (the step-by-step cell's order) activated in the same
    // pass: a separate summing pass had stored and reloaded every gate sum (a sixth of the
    // cell's time on a Zen 4). One loop over the gates and the states together stays scalar.
    for g in 0..4 {
        let at = g * h + j0..g * h + j0 + n;
        activate(
            isa,
            g == 2,
            &mut y[g * gs..g * gs + n],
            (&x[at.clone()], &b1[at.clone()], &b2[at]),
        );
    }
    let (yi, rest) = y.split_at_mut(gs);
    let (yf, rest) = rest.split_at_mut(gs);
    let (yc, yo) = rest.split_at_mut(gs);
    let (yi, yf, yc, yo) = (&mut yi[..n], &mut yf[..n], &mut yc[..n], &mut yo[..n]);
    cell_states(isa, (yi, yf, yc, yo), c, hy);
    if let Some(cs) = cs {
        cs[..n].copy_from_slice(&c[..n]);
    }
    if let Some(ws) = ws {
        for g in 0..4 {
            ws[g * h + j0..g * h + j0 + n].copy_from_slice(&y[g * gs..g * gs + n]);
        }
    }
}

/// `y = act(x + y + b1 + b2)`: tanh (the cell gate) or the sigmoid.
// `for` loops, not `for_each`: that is a std function that need not be inlined, and outlined it
// is compiled without this copy's target features (its FMAs became libm calls).
#[inline(always)]
fn activate<F: LayerFloat>(isa: Isa, tanh: bool, y: &mut [F], (x, b1, b2): (&[F], &[F], &[F])) {
    let n = y.len();
    let (x, b1, b2) = (&x[..n], &b1[..n], &b2[..n]);
    if tanh {
        for u in 0..n {
            y[u] = (x[u] + y[u] + b1[u] + b2[u]).vtanh(isa);
        }
    } else {
        for u in 0..n {
            y[u] = (x[u] + y[u] + b1[u] + b2[u]).vsigmoid(isa);
        }
    }
}

/// The new states from the activated gates: `c = f * c + i * g` (in place), `h = o * tanh(c)`.
#[inline(always)]
fn cell_states<F: LayerFloat>(
    isa: Isa,
    (i, f, g, o): (&[F], &[F], &[F], &[F]),
    c: &mut [F],
    hy: &mut [F],
) {
    let n = c.len();
    let (i, f, g, o, hy) = (&i[..n], &f[..n], &g[..n], &o[..n], &mut hy[..n]);
    for u in 0..n {
        let cy = f[u] * c[u] + i[u] * g[u];
        c[u] = cy;
        hy[u] = o[u] * cy.vtanh(isa);
    }
}

/// LSTM layer backward, the steps in reverse of [`lstm_layer`]'s order: from the gradients of
/// the outputs `grad_out` `[T, B, H]` and of the last states `grad_h`, `grad_c` `[B, H]`, and
/// the forward's `cs`, `ws` and `c0`, writes the gate gradients `grad_gates` `[T, B, 4H]` (of
/// the input and the hidden gates alike) and the gradients of the first states `grad_h0`,
/// `grad_c0` `[B, H]`. All contiguous, of one dtype (float32/float64).
///
/// Member `m` owns hidden units as in the forward: per step it runs the cell backward for its
/// units (which needs only its own parts of the state gradients), then, after a barrier (the
/// product reads every unit's gate gradients), its units' columns of the next state gradient,
/// `grad_gates[t] @ w_hh[:, units]`.
#[allow(clippy::too_many_arguments)]
pub fn lstm_layer_backward(
    grad_gates: &TensorMut,
    grad_h0: &TensorMut,
    grad_c0: &TensorMut,
    grad_out: &TensorRef,
    grad_h: &TensorRef,
    grad_c: &TensorRef,
    cs: &TensorRef,
    ws: &TensorRef,
    c0: &TensorRef,
    w_hh: &TensorRef,
    reverse: bool,
) -> FooResult<()> {
    let (t, b, h) = match (ws.shape.as_slice(), w_hh.shape.as_slice()) {
        (&[t, b, g], &[wg, h]) if g == 4 * h && wg == g => (t, b, h),
        (x, w) => {
            return invalid_arg!(
                "lstm layer backward: workspace {x:?} and recurrent weight {w:?} are not [T, B, 4H] and [4H, H]"
            )
        }
    };
    let dtype = ws.dtype;
    let tensors: [Operand; 10] = [
        (
            "grad_gates",
            &grad_gates.shape,
            grad_gates.dtype,
            grad_gates.is_contiguous(),
            vec![t, b, 4 * h],
        ),
        (
            "grad_h0",
            &grad_h0.shape,
            grad_h0.dtype,
            grad_h0.is_contiguous(),
            vec![b, h],
        ),
        (
            "grad_c0",
            &grad_c0.shape,
            grad_c0.dtype,
            grad_c0.is_contiguous(),
            vec![b, h],
        ),
        (
            "grad_out",
            &grad_out.shape,
            grad_out.dtype,
            grad_out.is_contiguous(),
            vec![t, b, h],
        ),
        (
            "grad_h",
            &grad_h.shape,
            grad_h.dtype,
            grad_h.is_contiguous(),
            vec![b, h],
        ),
        (
            "grad_c",
            &grad_c.shape,
            grad_c.dtype,
            grad_c.is_contiguous(),
            vec![b, h],
        ),
        ("cs", &cs.shape, cs.dtype, cs.is_contiguous(), vec![t, b, h]),
        (
            "ws",
            &ws.shape,
            ws.dtype,
            ws.is_contiguous(),
            vec![t, b, 4 * h],
        ),
        ("c0", &c0.shape, c0.dtype, c0.is_contiguous(), vec![b, h]),
        (
            "w_hh",
            &w_hh.shape,
            w_hh.dtype,
            w_hh.is_contiguous(),
            vec![4 * h, h],
        ),
    ];
    check_all("lstm layer backward", dtype, &tensors)?;
    let threads = if b * 4 * h * h >= GEMM_SPLIT_FLOPS {
        pool::num_threads()
    } else {
        1
    };
    let p = BwdPtrs {
        grad_gates: SendPtr::of(grad_gates.ptr),
        grad_h0: SendPtr::of(grad_h0.ptr),
        grad_c0: SendPtr::of(grad_c0.ptr),
        grad_out: SendPtr::of(grad_out.ptr),
        grad_h: SendPtr::of(grad_h.ptr),
        grad_c: SendPtr::of(grad_c.ptr),
        cs: SendPtr::of(cs.ptr),
        ws: SendPtr::of(ws.ptr),
        c0: SendPtr::of(c0.ptr),
        w_hh: SendPtr::of(w_hh.ptr),
    };
    match dtype {
        // SAFETY: the pointers are the checked tensors' (contiguous, these shapes and dtype).
        DType::F32 => unsafe { run_layer_backward::<f32>(p, (t, b, h), reverse, threads) },
        // SAFETY: as above.
        DType::F64 => unsafe { run_layer_backward::<f64>(p, (t, b, h), reverse, threads) },
        d => return not_implemented!("lstm layer backward: not implemented for '{}'", d.name()),
    }
    Ok(())
}

/// An operand to check: name, shape, dtype, whether contiguous, expected shape.
type Operand<'a> = (&'a str, &'a [usize], DType, bool, Vec<usize>);

/// Checks that each of `tensors` (name, shape, dtype, contiguous, expected shape) is a
/// contiguous `dtype` tensor of its expected shape.
fn check_all(op: &str, dtype: DType, tensors: &[Operand]) -> FooResult<()> {
    for (what, shape, dt, contiguous, want) in tensors {
        if *dt != dtype || !contiguous || shape != want {
            return invalid_arg!(
                "{op}: {what} must be a contiguous {} tensor of shape {want:?}, got {} {shape:?}",
                dtype.name(),
                dt.name()
            );
        }
    }
    Ok(())
}

/// The backward's tensors (see [`lstm_layer_backward`]).
#[derive(Clone, Copy)]
struct BwdPtrs {
    grad_gates: SendPtr<u8>,
    grad_h0: SendPtr<u8>,
    grad_c0: SendPtr<u8>,
    grad_out: SendPtr<u8>,
    grad_h: SendPtr<u8>,
    grad_c: SendPtr<u8>,
    cs: SendPtr<u8>,
    ws: SendPtr<u8>,
    c0: SendPtr<u8>,
    w_hh: SendPtr<u8>,
}

/// # Safety
/// As [`run_layer`], for [`lstm_layer_backward`]'s tensors.
unsafe fn run_layer_backward<F: LayerFloat>(
    p: BwdPtrs,
    (t, b, h): (usize, usize, usize),
    reverse: bool,
    threads: usize,
) {
    if b == 0 || h == 0 {
        return;
    }
    // Float32 on AVX2/AVX-512: each step's product with the member's columns of the weight
    // on the linear kernel, the columns packed once per call, with `gemm`'s bits. Zen 4,
    // `nn.LSTM(256, 256)` forward and backward, 32 steps of batch 32, against `gemm` per
    // step: 2 threads 1-3% less time (fastest tenth of 40 steps, 4 alternating runs), 1
    // thread level.
    let packs = F::DTYPE == DType::F32 && linear::panel_width().is_some();
    run_members(threads, h, t, &|j0, n| {
        // The member's columns of the weight, `w_hh[:, j0..j0 + n]` as a [4H, n] operand.
        let columns = |gg: SendPtr<F>, dh: *mut F| Linear {
            m: b,
            n,
            k: 4 * h,
            a: gg.get().cast::<f32>(),
            lda: 4 * h as isize,
            w: p.w_hh.cast::<f32>().get().wrapping_add(j0),
            ldw: 1,
            wk: h as isize,
            dst: dh.cast::<f32>(),
            ldd: n as isize,
            bias: std::ptr::null(),
            add_dst: false,
            w_half: None,
            dst_half: None,
        };
        let packed_len = if packs {
            linear::packed_len(&columns(p.grad_gates.cast::<F>(), std::ptr::null_mut()))
        } else {
            0
        };
        with_scratch::<f32, _>(packed_len, |packed| {
            // Otherwise dense: wc[g * H + j][u] = w_hh[g * H + j][j0 + u].
            let w = p.w_hh.cast::<F>();
            let mut wc = vec![F::ZERO; if packs { 0 } else { 4 * h * n }];
            for (r, dst) in wc.chunks_exact_mut(n).enumerate() {
                // SAFETY: row r of the [4H, H] weight, at the member's units.
                dst.copy_from_slice(unsafe { w.slice(r * h + j0, n) });
            }
            if packs {
                // SAFETY: F is f32; the weight's rows hold columns j0..j0 + n; `packed` holds
                // packed_len floats.
                unsafe {
                    linear::pack_whole(
                        &columns(p.grad_gates.cast::<F>(), std::ptr::null_mut()),
                        packed,
                    )
                };
            }
            // The state gradients at the member's units, [B, n]: the last states' to start with.
            let (mut dh, mut dc) = (vec![F::ZERO; b * n], vec![F::ZERO; b * n]);
            let mut tmp = vec![F::ZERO; 2 * n];
            for r in 0..b {
                // SAFETY: row r of the dense [B, H] gradients, at the member's units.
                unsafe {
                    dh[r * n..(r + 1) * n]
                        .copy_from_slice(p.grad_h.cast::<F>().slice(r * h + j0, n));
                    dc[r * n..(r + 1) * n]
                        .copy_from_slice(p.grad_c.cast::<F>().slice(r * h + j0, n));
                }
            }
            for s in 0..t {
                let tt = if reverse { s } else { t - 1 - s };
                let prev = if reverse { tt + 1 } else { tt.wrapping_sub(1) };
                let c_prev = if prev < t {
                    elem::<F>(p.cs, prev * b * h)
                } else {
                    p.c0.cast::<F>()
                };
                let at = BwdAt {
                    grad_out: elem::<F>(p.grad_out, tt * b * h),
                    c_prev,
                    cs: elem::<F>(p.cs, tt * b * h),
                    ws: elem::<F>(p.ws, tt * b * 4 * h),
                    grad_gates: elem::<F>(p.grad_gates, tt * b * 4 * h),
                };
                let own = BwdUnits {
                    b,
                    h,
                    j0,
                    n,
                    dh: SendPtr::new(dh.as_mut_ptr()),
                    dc: SendPtr::new(dc.as_mut_ptr()),
                    tmp: SendPtr::new(tmp.as_mut_ptr()),
                };
                lstm_units_backward::<F>(&own, at);
                team::barrier();
                if packs {
                    // SAFETY: F is f32; the step's gate gradients, a dense [B, 4H] matrix every
                    // member has written whole before the barrier and nobody writes again; dh the
                    // member's own [B, n] matrix; `packed` the weight columns' panels.
                    unsafe {
                        linear::product_packed(&columns(at.grad_gates, dh.as_mut_ptr()), packed)
                    };
                    continue;
                }
                // SAFETY: as above; wc is the member's dense [4H, n] weight columns.
                unsafe {
                    gemm_plain(
                        b,
                        n,
                        4 * h,
                        dh.as_mut_ptr(),
                        n as isize,
                        1,
                        Mat {
                            ptr: at.grad_gates.get(),
                            rs: 4 * h as isize,
                            cs: 1,
                        },
                        Mat {
                            ptr: wc.as_ptr(),
                            rs: n as isize,
                            cs: 1,
                        },
                    )
                };
            }
            for r in 0..b {
                // SAFETY: row r of the dense [B, H] outputs, at the member's units (its alone).
                unsafe {
                    p.grad_h0
                        .cast::<F>()
                        .slice_mut(r * h + j0, n)
                        .copy_from_slice(&dh[r * n..(r + 1) * n]);
                    p.grad_c0
                        .cast::<F>()
                        .slice_mut(r * h + j0, n)
                        .copy_from_slice(&dc[r * n..(r + 1) * n]);
                }
            }
        });
    });
}

/// A member's state gradients (`[B, n]`, its units `j0..j0 + n`), updated by each step.
struct BwdUnits<F> {
    b: usize,
    h: usize,
    j0: usize,
    n: usize,
    dh: SendPtr<F>,
    dc: SendPtr<F>,
    /// `2n` of scratch.
    tmp: SendPtr<F>,
}

/// One step's rows: `grad_out`, `c_prev`, `cs` `[B, H]`, `ws`, `grad_gates` `[B, 4H]` (dense).
#[derive(Clone, Copy)]
struct BwdAt<F> {
    grad_out: SendPtr<F>,
    c_prev: SendPtr<F>,
    cs: SendPtr<F>,
    ws: SendPtr<F>,
    grad_gates: SendPtr<F>,
}

multiversion!(fn lstm_units_backward<F: LayerFloat>(a: &BwdUnits<F>, at: BwdAt<F>) => isa lstm_units_backward_body);

/// The cell backward of `lstm_bwd_body` over the member's units of every row, the gradient of
/// `h` being the state gradient plus the step's output gradient (`dh + grad_out[t]`, as the
/// step-by-step path adds them); leaves the cell state's gradient for the previous step in `dc`.
#[inline(always)]
fn lstm_units_backward_body<F: LayerFloat>(isa: Isa, a: &BwdUnits<F>, at: BwdAt<F>) {
    let (h, j0, n) = (a.h, a.j0, a.n);
    for r in 0..a.b {
        // SAFETY: row r of this step's tensors; the gate gradients' units (columns j0..j0 + n
        // of each block) and the state gradients are this member's alone.
        unsafe {
            let o = r * h + j0;
            lstm_row_backward(
                isa,
                at.grad_out.slice(o, n),
                at.c_prev.slice(o, n),
                at.cs.slice(o, n),
                at.ws.slice(r * 4 * h, 4 * h),
                at.grad_gates.slice_mut(r * 4 * h, 4 * h),
                (a.dh.slice(r * n, n), a.dc.slice_mut(r * n, n)),
                a.tmp.slice_mut(0, 2 * n),
                (h, j0, n),
            )
        }
    }
}

/// One row of [`lstm_units_backward_body`], in simple loops as in [`lstm_row`]; `tmp` is the
/// member's scratch of `2n`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn lstm_row_backward<F: LayerFloat>(
    isa: Isa,
    go: &[F],
    cx: &[F],
    cy: &[F],
    ws: &[F],
    gg: &mut [F],
    (dh, dc): (&[F], &mut [F]),
    tmp: &mut [F],
    (h, j0, n): (usize, usize, usize),
) {
    let (grad_h, tanh_c) = tmp[..2 * n].split_at_mut(n);
    add_into(grad_h, dh, go);
    tanh_into(isa, tanh_c, cy);
    let gate = |g: usize| g * h + j0..g * h + j0 + n;
    let (gi, rest) = gg[j0..].split_at_mut(h);
    let (gf, rest) = rest.split_at_mut(h);
    let (gc, go) = rest.split_at_mut(h);
    cell_gradients(
        (grad_h, tanh_c, cx),
        (&ws[gate(0)], &ws[gate(1)], &ws[gate(2)], &ws[gate(3)]),
        dc,
        &mut gi[..n],
        &mut gf[..n],
        &mut gc[..n],
        &mut go[..n],
    );
}

/// `out = a + b`.
#[inline(always)]
fn add_into<F: LayerFloat>(out: &mut [F], a: &[F], b: &[F]) {
    let n = out.len();
    let (a, b) = (&a[..n], &b[..n]);
    for u in 0..n {
        out[u] = a[u] + b[u];
    }
}

/// `out = tanh(x)`.
#[inline(always)]
fn tanh_into<F: LayerFloat>(isa: Isa, out: &mut [F], x: &[F]) {
    let x = &x[..out.len()];
    for u in 0..out.len() {
        out[u] = x[u].vtanh(isa);
    }
}

/// The gate gradients from the gradient of `h`, `tanh(c)`, `cx` and the activated gates; `dc`
/// (the gradient of `c`) becomes that of `cx`. `lstm_bwd_body`'s math.
#[inline(always)]
fn cell_gradients<F: LayerFloat>(
    (grad_h, tanh_c, cx): (&[F], &[F], &[F]),
    (wi, wf, wc, wo): (&[F], &[F], &[F], &[F]),
    dc: &mut [F],
    gi: &mut [F],
    gf: &mut [F],
    gcg: &mut [F],
    gog: &mut [F],
) {
    let one = F::ONE;
    let n = dc.len();
    let (go, t, cx) = (&grad_h[..n], &tanh_c[..n], &cx[..n]);
    let (wi, wf, wc, wo) = (&wi[..n], &wf[..n], &wc[..n], &wo[..n]);
    let (gi, gf, gcg, gog) = (&mut gi[..n], &mut gf[..n], &mut gcg[..n], &mut gog[..n]);
    for u in 0..n {
        let gcell = go[u] * wo[u] * (one - t[u] * t[u]) + dc[u];
        gi[u] = gcell * wc[u] * (one - wi[u]) * wi[u];
        gf[u] = gcell * cx[u] * (one - wf[u]) * wf[u];
        gcg[u] = gcell * wi[u] * (one - wc[u] * wc[u]);
        gog[u] = go[u] * t[u] * (one - wo[u]) * wo[u];
        dc[u] = gcell * wf[u];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::core::gemm::gemm_raw;
    use crate::kernels::core::map::testing::{uniform, Owned};
    use crate::kernels::rnn::{lstm_cell, lstm_cell_backward};

    fn vals(n: usize, seed: u64) -> Vec<f32> {
        uniform(n, seed, -1.0, 1.0)
            .into_iter()
            .map(|v| v as f32)
            .collect()
    }

    /// Step by step: the whole recurrent product `h @ w_hh.t()` (as the layer's form for this
    /// CPU sums it: plain fused chains for its panels, else `gemm` turned around), then the
    /// cell kernel.
    fn step_by_step(
        (t, b, h): (usize, usize, usize),
        xg: &[f32],
        w: &[f32],
        h0: &[f32],
        c0: &[f32],
        bias: Option<(&Owned<f32>, &Owned<f32>)>,
        reverse: bool,
    ) -> [Vec<f32>; 3] {
        let (mut out, mut cs, mut ws) = (
            vec![0.0; t * b * h],
            vec![0.0; t * b * h],
            vec![0.0; t * b * 4 * h],
        );
        let (mut hp, mut cp) = (h0.to_vec(), c0.to_vec());
        for s in 0..t {
            let tt = if reverse { t - 1 - s } else { s };
            let mut hg = vec![0.0f32; b * 4 * h];
            if panel_lanes::<f32>(h).is_some() {
                // The panels' sums: one fused chain over k from zero per element.
                for (e, v) in hg.iter_mut().enumerate() {
                    let (r, g) = (e / (4 * h), e % (4 * h));
                    *v = (0..h).fold(0.0, |a, k| hp[r * h + k].mul_add(w[g * h + k], a));
                }
            } else {
                let mut turned = vec![0.0f32; 4 * h * b];
                // SAFETY: dense [4h, h] @ [h, b] (hp read transposed) into [4h, b], transposed
                // into [b, 4h].
                unsafe {
                    gemm_plain(
                        4 * h,
                        b,
                        h,
                        turned.as_mut_ptr(),
                        b as isize,
                        1,
                        Mat {
                            ptr: w.as_ptr(),
                            rs: h as isize,
                            cs: 1,
                        },
                        Mat {
                            ptr: hp.as_ptr(),
                            rs: 1,
                            cs: h as isize,
                        },
                    );
                    transpose_into(turned.as_ptr(), b as isize, 4 * h, b, &mut hg, false);
                }
            }
            let ig = Owned::new(
                xg[tt * b * 4 * h..(tt + 1) * b * 4 * h].to_vec(),
                &[b, 4 * h],
            );
            let (hg, cx) = (Owned::new(hg, &[b, 4 * h]), Owned::new(cp.clone(), &[b, h]));
            let (mut hy, mut cy, mut w) = (
                Owned::<f32>::zeros(&[b, h]),
                Owned::<f32>::zeros(&[b, h]),
                Owned::<f32>::zeros(&[b, 4 * h]),
            );
            lstm_cell(
                &hy.m(),
                &cy.m(),
                &w.m(),
                &ig.r(),
                &hg.r(),
                &cx.r(),
                bias.map(|(x, _)| x.r()).as_ref(),
                bias.map(|(_, y)| y.r()).as_ref(),
            )
            .unwrap();
            out[tt * b * h..(tt + 1) * b * h].copy_from_slice(&hy.data);
            cs[tt * b * h..(tt + 1) * b * h].copy_from_slice(&cy.data);
            ws[tt * b * 4 * h..(tt + 1) * b * 4 * h].copy_from_slice(&w.data);
            (hp, cp) = (hy.data, cy.data);
        }
        [out, cs, ws]
    }

    /// The layer on teams of 1, 2 and 3 threads gives the step-by-step path's bits: split by
    /// hidden units (partial vectors at the end: 13 and 40 units), forwards and reversed, with
    /// and without biases.
    #[test]
    fn layer_matches_step_by_step_for_every_team_size() {
        let _serial = crate::runtime::pool::tests::SERIAL
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // The state: 0 random, 1 zeros (some -0: the first step skips the product), 2 zeros
        // with an infinity and a NaN in two of the weight's rows (that step's sums of those
        // rows are NaN, as the product's would be; one in the depth past whole 16 x 16 blocks,
        // one in a partial panel).
        for (i, &(t, b, h, reverse, with_bias, state)) in [
            (3, 5, 40, false, true, 0),
            (4, 2, 13, true, false, 0),
            (2, 33, 64, true, true, 0),
            (1, 1, 8, false, true, 0),
            (3, 5, 40, false, true, 1),
            (2, 33, 64, true, false, 1),
            (3, 7, 40, false, true, 2),
        ]
        .iter()
        .enumerate()
        {
            let seed = 10 * i as u64;
            let (xg, mut w, mut h0, c0) = (
                vals(t * b * 4 * h, seed),
                vals(4 * h * h, seed + 1),
                vals(b * h, seed + 2),
                vals(b * h, seed + 3),
            );
            if state > 0 {
                h0.iter_mut()
                    .enumerate()
                    .for_each(|(e, v)| *v = if e % 3 == 0 { -0.0 } else { 0.0 });
            }
            if state == 2 {
                (w[5 * h + 37], w[(3 * h + 34) * h + 1]) = (f32::INFINITY, f32::NAN);
            }
            let (b1, b2) = (
                Owned::new(vals(4 * h, seed + 4), &[4 * h]),
                Owned::new(vals(4 * h, seed + 5), &[4 * h]),
            );
            let bias = with_bias.then_some((&b1, &b2));
            let want = step_by_step((t, b, h), &xg, &w, &h0, &c0, bias, reverse);
            let biases = (
                bias_vec::<f32>(bias.map(|(x, _)| x.r()).as_ref(), 4 * h, "b1").unwrap(),
                bias_vec::<f32>(bias.map(|(_, y)| y.r()).as_ref(), 4 * h, "b2").unwrap(),
            );
            for (threads, keep) in [(1, true), (2, true), (3, true), (2, false)] {
                let (xg_t, w_t, h0_t, c0_t) = (
                    Owned::new(xg.clone(), &[t, b, 4 * h]),
                    Owned::new(w.clone(), &[4 * h, h]),
                    Owned::new(h0.clone(), &[b, h]),
                    Owned::new(c0.clone(), &[b, h]),
                );
                let (mut out, mut c_last, mut cs, mut ws) = (
                    Owned::<f32>::zeros(&[t, b, h]),
                    Owned::<f32>::zeros(&[b, h]),
                    Owned::<f32>::zeros(&[t, b, h]),
                    Owned::<f32>::zeros(&[t, b, 4 * h]),
                );
                let ptrs = Ptrs {
                    out: SendPtr::of(out.m().ptr),
                    c_last: SendPtr::of(c_last.m().ptr),
                    cs: keep.then(|| SendPtr::of(cs.m().ptr)),
                    ws: keep.then(|| SendPtr::of(ws.m().ptr)),
                    xg: SendPtr::of(xg_t.r().ptr),
                    input: None,
                    w_hh: SendPtr::of(w_t.r().ptr),
                    h0: SendPtr::of(h0_t.r().ptr),
                    c0: SendPtr::of(c0_t.r().ptr),
                };
                // SAFETY: the tensors above, of these shapes.
                unsafe { run_layer::<f32>(ptrs, (t, b, h), &biases, reverse, threads) };
                let last = if reverse { 0 } else { t - 1 };
                let mut got = vec![("out", out.data, &want[0][..])];
                got.push((
                    "c_last",
                    c_last.data,
                    &want[1][last * b * h..(last + 1) * b * h],
                ));
                if keep {
                    got.push(("cs", cs.data, &want[1][..]));
                    got.push(("ws", ws.data, &want[2][..]));
                }
                for (name, g, w) in got {
                    assert!(
                        g.iter()
                            .zip(w)
                            .all(|(x, y)| x.to_bits() == y.to_bits() || x.is_nan() && y.is_nan()),
                        "case {i}, {threads} threads: {name} differs"
                    );
                    // The NaN sums reach the first step's outputs at the two units alone.
                    let nans = g[..b * h].iter().filter(|v| v.is_nan()).count();
                    assert!(
                        state < 2 || name != "out" || nans == 2 * b,
                        "case {i}: {nans} NaN in the first step's outputs"
                    );
                }
            }
        }
    }

    /// The step-by-step backward the glue runs for other dtypes: `dh + grad_out[t]`, the cell
    /// backward, then `grad_gates[t] @ w_hh`. Returns the gate gradients, `grad_h0`, `grad_c0`.
    #[allow(clippy::too_many_arguments)]
    fn backward_step_by_step(
        (t, b, h): (usize, usize, usize),
        grad_out: &[f32],
        grad_h: &[f32],
        grad_c: &[f32],
        cs: &[f32],
        ws: &[f32],
        c0: &[f32],
        w: &[f32],
        reverse: bool,
    ) -> [Vec<f32>; 3] {
        let mut gates = vec![0.0f32; t * b * 4 * h];
        let (mut dh, mut dc) = (grad_h.to_vec(), grad_c.to_vec());
        let rows =
            |v: &[f32], tt: usize, cols: usize| v[tt * b * cols..(tt + 1) * b * cols].to_vec();
        for s in 0..t {
            let tt = if reverse { s } else { t - 1 - s };
            let prev = if reverse { tt + 1 } else { tt.wrapping_sub(1) };
            let cx = if prev < t {
                rows(cs, prev, h)
            } else {
                c0.to_vec()
            };
            let go: Vec<f32> = dh
                .iter()
                .zip(&grad_out[tt * b * h..])
                .map(|(a, g)| a + g)
                .collect();
            let (mut gg, mut gcx) = (
                Owned::<f32>::zeros(&[b, 4 * h]),
                Owned::<f32>::zeros(&[b, h]),
            );
            let (go, gc) = (Owned::new(go, &[b, h]), Owned::new(dc.clone(), &[b, h]));
            let (cx, cy, w_t) = (
                Owned::new(cx, &[b, h]),
                Owned::new(rows(cs, tt, h), &[b, h]),
                Owned::new(rows(ws, tt, 4 * h), &[b, 4 * h]),
            );
            lstm_cell_backward(
                &gg.m(),
                &gcx.m(),
                None,
                Some(&go.r()),
                Some(&gc.r()),
                &cx.r(),
                &cy.r(),
                &w_t.r(),
            )
            .unwrap();
            // SAFETY: dense [b, 4h] @ [4h, h] into [b, h].
            unsafe {
                gemm_raw(
                    b,
                    h,
                    4 * h,
                    dh.as_mut_ptr(),
                    h as isize,
                    1,
                    false,
                    Mat {
                        ptr: gg.data.as_ptr(),
                        rs: 4 * h as isize,
                        cs: 1,
                    },
                    Mat {
                        ptr: w.as_ptr(),
                        rs: h as isize,
                        cs: 1,
                    },
                    1.0,
                    true,
                )
            };
            gates[tt * b * 4 * h..(tt + 1) * b * 4 * h].copy_from_slice(&gg.data);
            dc = gcx.data;
        }
        [gates, dh, dc]
    }

    /// The backward on teams of 1, 2 and 3 threads gives the step-by-step path's bits.
    #[test]
    fn layer_backward_matches_step_by_step_for_every_team_size() {
        let _serial = crate::runtime::pool::tests::SERIAL
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for (i, &(t, b, h, reverse)) in [
            (3, 5, 40, false),
            (4, 2, 13, true),
            (2, 33, 64, true),
            (1, 1, 8, false),
            (3, 3, 136, false),
        ]
        .iter()
        .enumerate()
        {
            let seed = 100 + 10 * i as u64;
            let v = |n: usize, k: u64| vals(n, seed + k);
            let (grad_out, grad_h, grad_c, cs, ws, c0, w) = (
                v(t * b * h, 0),
                v(b * h, 1),
                v(b * h, 2),
                v(t * b * h, 3),
                v(t * b * 4 * h, 4),
                v(b * h, 5),
                v(4 * h * h, 6),
            );
            let want = backward_step_by_step(
                (t, b, h),
                &grad_out,
                &grad_h,
                &grad_c,
                &cs,
                &ws,
                &c0,
                &w,
                reverse,
            );
            for threads in 1..=3 {
                let own = |d: &[f32], shape: &[usize]| Owned::new(d.to_vec(), shape);
                let ins = [
                    own(&grad_out, &[t, b, h]),
                    own(&grad_h, &[b, h]),
                    own(&grad_c, &[b, h]),
                    own(&cs, &[t, b, h]),
                    own(&ws, &[t, b, 4 * h]),
                    own(&c0, &[b, h]),
                    own(&w, &[4 * h, h]),
                ];
                let (mut gg, mut gh0, mut gc0) = (
                    Owned::<f32>::zeros(&[t, b, 4 * h]),
                    Owned::<f32>::zeros(&[b, h]),
                    Owned::<f32>::zeros(&[b, h]),
                );
                let p = BwdPtrs {
                    grad_gates: SendPtr::of(gg.m().ptr),
                    grad_h0: SendPtr::of(gh0.m().ptr),
                    grad_c0: SendPtr::of(gc0.m().ptr),
                    grad_out: SendPtr::of(ins[0].r().ptr),
                    grad_h: SendPtr::of(ins[1].r().ptr),
                    grad_c: SendPtr::of(ins[2].r().ptr),
                    cs: SendPtr::of(ins[3].r().ptr),
                    ws: SendPtr::of(ins[4].r().ptr),
                    c0: SendPtr::of(ins[5].r().ptr),
                    w_hh: SendPtr::of(ins[6].r().ptr),
                };
                // SAFETY: the tensors above, of these shapes.
                unsafe { run_layer_backward::<f32>(p, (t, b, h), reverse, threads) };
                let got = [gg.data, gh0.data, gc0.data];
                for (name, (g, w)) in ["grad_gates", "grad_h0", "grad_c0"]
                    .iter()
                    .zip(got.iter().zip(&want))
                {
                    assert!(
                        g.iter().zip(w).all(|(x, y)| x.to_bits() == y.to_bits()),
                        "case {i}, {threads} threads: {name} differs"
                    );
                }
            }
        }
    }

    /// Shapes are checked before anything runs.
    #[test]
    fn bad_shapes_are_errors() {
        let ok = |w: &[usize], h0: &[usize], out: &[usize]| {
            let (xg, w, h0, c0) = (
                Owned::<f32>::zeros(&[2, 3, 8]),
                Owned::<f32>::zeros(w),
                Owned::<f32>::zeros(h0),
                Owned::<f32>::zeros(&[3, 2]),
            );
            let (mut out, mut c_last, mut cs, mut ws) = (
                Owned::<f32>::zeros(out),
                Owned::<f32>::zeros(&[3, 2]),
                Owned::<f32>::zeros(&[2, 3, 2]),
                Owned::<f32>::zeros(&[2, 3, 8]),
            );
            let (o, l, c, s) = (out.m(), c_last.m(), cs.m(), ws.m());
            let (xg, w, h0, c0) = (xg.r(), w.r(), h0.r(), c0.r());
            lstm_layer(
                &o,
                &l,
                Some(&c),
                Some(&s),
                &xg,
                None,
                &w,
                &h0,
                &c0,
                None,
                None,
                false,
            )
            .is_ok()
        };
        assert!(!ok(&[8, 3], &[3, 2], &[2, 3, 2]), "w_hh [8, 3] with 4H = 8");
        assert!(!ok(&[8, 2], &[2, 2], &[2, 3, 2]), "h0 [2, 2]");
        assert!(!ok(&[8, 2], &[3, 2], &[2, 3, 3]), "out [2, 3, 3]");
        assert!(ok(&[8, 2], &[3, 2], &[2, 3, 2]));
    }
}
