//! The elementwise engine: `out[i] = f(a[i], b[i], ...)` over broadcast-ready operands (same
//! shape as `out`, zero strides where broadcast).
//!
//! Like ATen's TensorIterator, it coalesces the operands' dims ([`layout::coalesce`]), walks the
//! outer dims with an index counter (not generic over the op) and runs a small inner loop per
//! row that *is* generic over the op, specialised for dense and broadcast inner strides so the
//! compiler vectorizes the common cases. Work above [`GRAIN`] elements is split across threads
//! by [`parallel_for`], which is compiled once for all ops.

use super::element::Element;
use super::layout::{coalesce, for_each_row, Layout, GRAIN};
use super::parallel::{parallel_for, SendPtr};
use super::simd::Isa;
use super::tiles::{drive_tiles, wants_tiles};
use crate::error::{FooError, FooResult};
use crate::tensor::{TensorMut, TensorRef};
use std::mem::size_of;

fn check_operand<T: Element>(
    what: &str,
    dtype: crate::DType,
    shape: &[usize],
    out_shape: &[usize],
) -> FooResult<()> {
    if dtype != T::DTYPE {
        return Err(FooError::Runtime(format!(
            "elementwise kernel: {what} has dtype {} but the kernel expects {}",
            dtype.name(),
            T::DTYPE.name()
        )));
    }
    if shape != out_shape {
        return Err(FooError::InvalidArgument(format!(
            "elementwise kernel: {what} shape {shape:?} differs from the output shape {out_shape:?}"
        )));
    }
    Ok(())
}

/// Runs `body(row offsets, len)` over every row of `l`, in parallel above GRAIN.
pub fn drive_rows<const N: usize>(l: &Layout<N>, body: &(dyn Fn([isize; N], usize) + Sync)) {
    let n = l.numel();
    parallel_for(n, GRAIN, &|s, e| {
        for_each_row(l, s, e, &mut |off, len| body(off, len))
    });
}

/// Runs `body(first row's offsets, rows, len, row strides)` over chunks of `l` in parallel when
/// `l` is one run or rows of runs along which the output is dense and each input dense or
/// constant (inner strides 1 or 0: the callers pick the patterns they handle); returns whether
/// it did. Rows indexed by several dims (`q * cos` in a rotary embedding: `q` a transposed
/// view, `cos` broadcast over batch and heads) go in runs along the innermost of them, one
/// call each: called once per row of 32, that product took 5x the CPU's time.
pub fn drive_dense_rows<const N: usize>(
    l: &Layout<N>,
    body: &(dyn Fn([isize; N], usize, usize, [isize; N]) + Sync),
) -> bool {
    let inner = inner_strides(l);
    if inner[0] != 1 || inner.iter().any(|&s| s != 0 && s != 1) {
        return false;
    }
    let d = l.shape.len();
    if d == 1 {
        parallel_for(l.shape[0], GRAIN, &|s, e| {
            body(
                std::array::from_fn(|k| s as isize * inner[k]),
                1,
                e - s,
                [0; N],
            )
        });
        return true;
    }
    let len = l.shape[d - 1];
    let rows = Layout {
        shape: l.shape[..d - 1].into(),
        strides: std::array::from_fn(|k| l.strides[k][..d - 1].into()),
    };
    let step: [isize; N] = std::array::from_fn(|k| l.strides[k][d - 2]);
    parallel_for(rows.numel(), (GRAIN / len.max(1)).max(1), &|s, e| {
        for_each_row(&rows, s, e, &mut |off, n| body(off, n, len, step))
    });
    true
}

fn inner_strides<const N: usize>(l: &Layout<N>) -> [isize; N] {
    std::array::from_fn(|k| l.strides[k].last().copied().unwrap_or(0))
}

/// The dense inner loops, compiled three times: for the baseline target, with AVX2+FMA and with
/// AVX-512, chosen at run time. `kernels::core::vmath` math is branch-free, so 8 lanes instead of 4 is close to twice as
/// fast for exp/tanh/sigmoid-style ops; memory-bound ops are unaffected.
/// The op gets the copy's [`Isa`] (for `vmath`'s polynomials).
///
/// The loops go through raw pointers, so any aliasing among the operands is sound; the compiler
/// vectorizes them behind a run-time overlap check. In place (`o` is `x`: `relu_`, `add_(bias)`)
/// that check would fail and leave the loop scalar, so the output's element is read as the
/// input's in a loop of its own (measured: a [256, 1024] `add_` of a bias row took 46 us
/// against 16 for the out-of-place add). Rarer overlaps (`add(a, b, out=b)`, `a.add_(a)`) run
/// scalar.
///
/// # Safety
/// `o` and `x` address `len` elements; `o` is `x` or overlaps it only elementwise.
#[inline(always)]
unsafe fn dense1_body<A: Copy, O, F: Fn(A, Isa) -> O>(
    isa: Isa,
    o: *mut O,
    x: *const A,
    len: usize,
    f: &F,
) {
    // SAFETY: (the whole body) the caller's contract; in place, `A` is `O` (one tensor).
    unsafe {
        if in_place(o, x) {
            for i in 0..len {
                let v = o.add(i);
                *v = f(*(v as *const A), isa);
            }
        } else {
            for i in 0..len {
                *o.add(i) = f(*x.add(i), isa);
            }
        }
    }
}

/// [`dense1_body`] with a second input.
///
/// # Safety
/// As [`dense1_body`], and `y` addresses `len` elements that `o` overlaps only elementwise.
#[inline(always)]
unsafe fn dense2_body<A: Copy, B: Copy, O, F: Fn(A, B, Isa) -> O>(
    isa: Isa,
    o: *mut O,
    x: *const A,
    y: *const B,
    len: usize,
    f: &F,
) {
    // SAFETY: as in dense1_body.
    unsafe {
        if in_place(o, x) {
            for i in 0..len {
                let v = o.add(i);
                *v = f(*(v as *const A), *y.add(i), isa);
            }
        } else {
            for i in 0..len {
                *o.add(i) = f(*x.add(i), *y.add(i), isa);
            }
        }
    }
}

/// Whether an output row is its input row (same address, same element size).
#[inline(always)]
fn in_place<A, O>(o: *mut O, x: *const A) -> bool {
    std::ptr::addr_eq(o, x) && size_of::<A>() == size_of::<O>()
}

crate::unsafe_multiversion!(
    /// `o[i] = f(x[i])` over `len` elements.
    ///
    /// # Safety
    /// As [`dense1_body`].
    unsafe fn dense1<A: Copy, O: Sized, F: Fn(A, Isa) -> O>(o: *mut O, x: *const A, len: usize, f: &F) => isa dense1_body
);
crate::unsafe_multiversion!(
    /// `o[i] = f(x[i], y[i])` over `len` elements.
    ///
    /// # Safety
    /// As [`dense2_body`].
    unsafe fn dense2<A: Copy, B: Copy, O: Sized, F: Fn(A, B, Isa) -> O>(o: *mut O, x: *const A, y: *const B, len: usize, f: &F) => isa dense2_body
);

/// `o[i so] = f(x[i sx])` over `len` elements: a row of any strides (a stride-0 input is one
/// value, computed once when the output is dense). Multiversioned as the dense loops, so that
/// a strided row gets the same bits as a dense one (`vmath` with FMA where the CPU has it).
///
/// # Safety
/// `o + i so` and `x + i sx` address elements for every `i < len`; output elements are
/// distinct and overlap the input only elementwise.
#[inline(always)]
unsafe fn strided1_body<A: Copy, O: Copy, F: Fn(A, Isa) -> O>(
    isa: Isa,
    o: *mut O,
    so: isize,
    x: *const A,
    sx: isize,
    len: usize,
    f: &F,
) {
    // SAFETY: (the whole body) the caller's contract.
    unsafe {
        if so == 1 && sx == 0 {
            std::slice::from_raw_parts_mut(o, len).fill(f(*x, isa));
        } else {
            for i in 0..len as isize {
                *o.offset(i * so) = f(*x.offset(i * sx), isa);
            }
        }
    }
}

/// [`strided1_body`] with a second input.
///
/// # Safety
/// As [`strided1_body`], for `y + i sy` too.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn strided2_body<A: Copy, B: Copy, O: Copy, F: Fn(A, B, Isa) -> O>(
    isa: Isa,
    o: *mut O,
    so: isize,
    x: *const A,
    sx: isize,
    y: *const B,
    sy: isize,
    len: usize,
    f: &F,
) {
    // SAFETY: (the whole body) the caller's contract.
    unsafe {
        if so == 1 && sx == 0 && sy == 0 {
            std::slice::from_raw_parts_mut(o, len).fill(f(*x, *y, isa));
        } else {
            for i in 0..len as isize {
                *o.offset(i * so) = f(*x.offset(i * sx), *y.offset(i * sy), isa);
            }
        }
    }
}

crate::unsafe_multiversion!(
    /// `o[i so] = f(x[i sx])` over `len` elements.
    ///
    /// # Safety
    /// As [`strided1_body`].
    unsafe fn strided1<A: Copy, O: Copy, F: Fn(A, Isa) -> O>(o: *mut O, so: isize, x: *const A, sx: isize, len: usize, f: &F) => isa strided1_body
);
crate::unsafe_multiversion!(
    /// `o[i so] = f(x[i sx], y[i sy])` over `len` elements.
    ///
    /// # Safety
    /// As [`strided2_body`].
    #[allow(clippy::too_many_arguments)]
    unsafe fn strided2<A: Copy, B: Copy, O: Copy, F: Fn(A, B, Isa) -> O>(o: *mut O, so: isize, x: *const A, sx: isize, y: *const B, sy: isize, len: usize, f: &F) => isa strided2_body
);

/// [`rows1`]'s body.
///
/// # Safety
/// As [`rows2`].
#[inline(always)]
unsafe fn rows1_body<A: Copy, O: Sized, F: Fn(A, Isa) -> O>(
    isa: Isa,
    o: *mut O,
    x: *const A,
    rows: usize,
    len: usize,
    outer: [isize; 2],
    f: &F,
) {
    for r in 0..rows as isize {
        // SAFETY: caller's contract.
        unsafe { dense1_body(isa, o.offset(r * outer[0]), x.offset(r * outer[1]), len, f) };
    }
}

/// [`rows2`]'s body.
///
/// # Safety
/// As [`rows2`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn rows2_body<A: Copy, B: Copy, O: Sized, F: Fn(A, B, Isa) -> O>(
    isa: Isa,
    o: *mut O,
    x: *const A,
    y: *const B,
    rows: usize,
    len: usize,
    outer: [isize; 3],
    f: &F,
) {
    for r in 0..rows as isize {
        // SAFETY: caller's contract.
        unsafe {
            let (o, x, y) = (
                o.offset(r * outer[0]),
                x.offset(r * outer[1]),
                y.offset(r * outer[2]),
            );
            dense2_body(isa, o, x, y, len, f)
        };
    }
}

crate::unsafe_multiversion!(
    /// [`rows2`] with one input: `rows` rows of `len` elements (a unary op of a row slice,
    /// `-x[..., h:]` in a rotary embedding).
    ///
    /// # Safety
    /// As [`rows2`].
    unsafe fn rows1<A: Copy, O: Sized, F: Fn(A, Isa) -> O>(o: *mut O, x: *const A, rows: usize, len: usize, outer: [isize; 2], f: &F) => isa rows1_body
);

crate::unsafe_multiversion!(
    /// `rows` rows of `len` elements, row r of each operand at `ptr + r * outer[k]`, all inner
    /// strides 1: the row loop runs inside one multiversioned call, so short rows (a broadcast
    /// add of [10000, 100] + [100]) do not pay a dispatch and an indirect call each.
    ///
    /// # Safety
    /// Every row of every operand must be in bounds; output rows must not overlap each other
    /// or the inputs except elementwise.
    unsafe fn rows2<A: Copy, B: Copy, O: Sized, F: Fn(A, B, Isa) -> O>(o: *mut O, x: *const A, y: *const B, rows: usize, len: usize, outer: [isize; 3], f: &F) => isa rows2_body
);

/// [`rows2_scalar`]'s body.
///
/// # Safety
/// As [`rows2`], with `y` one element per row.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn rows2_scalar_body<A: Copy, B: Copy, O: Sized, F: Fn(A, B, Isa) -> O>(
    isa: Isa,
    o: *mut O,
    x: *const A,
    y: *const B,
    rows: usize,
    len: usize,
    outer: [isize; 3],
    f: &F,
) {
    for r in 0..rows as isize {
        // SAFETY: caller's contract.
        unsafe {
            let (o, x, y) = (
                o.offset(r * outer[0]),
                x.offset(r * outer[1]),
                *y.offset(r * outer[2]),
            );
            dense1_body(isa, o, x, len, &|x, isa| f(x, y, isa))
        };
    }
}

crate::unsafe_multiversion!(
    /// `o[r][i] = f(x[r][i], y[r])` over `rows` rows of `len` dense elements (`outer`: the
    /// operands' row strides): a per-row operand (a per-channel scale, `x * s[:, :, None,
    /// None]`) with all rows in one multiversioned call. Called per row, the dispatch cost
    /// more than rows of 4 (a [8, 576, 2, 2] product took 5x the CPU's time).
    ///
    /// # Safety
    /// As [`rows2`], with `y` one element per row.
    unsafe fn rows2_scalar<A: Copy, B: Copy, O: Sized, F: Fn(A, B, Isa) -> O>(o: *mut O, x: *const A, y: *const B, rows: usize, len: usize, outer: [isize; 3], f: &F) => isa rows2_scalar_body
);

/// Whether `pred` holds for some element of `a`: a read-only pass (parallel), each row folded
/// without a branch so that its loop vectorizes. For kernels with a fast path that is exact
/// only on part of the range (`sin` of huge arguments).
pub fn any1<A: Element>(a: &TensorRef, pred: impl Fn(A) -> bool + Sync) -> bool {
    if a.numel() == 0 {
        return false;
    }
    let l = coalesce(&a.shape, [&a.strides]);
    let [sa] = inner_strides(&l);
    let pa = SendPtr::<A>::of(a.ptr);
    let found = std::sync::atomic::AtomicBool::new(false);
    drive_rows(&l, &|off, len| {
        let x = pa.at(off[0]) as *const A;
        let hit = if sa == 1 {
            // SAFETY: a dense row of `len` elements of `a` (the layout came from its shape and
            // strides).
            let xs = unsafe { std::slice::from_raw_parts(x, len) };
            xs.iter().fold(false, |acc, &v| acc | pred(v))
        } else {
            // SAFETY: as above, `len` elements `sa` apart.
            (0..len as isize).fold(false, |acc, i| acc | pred(unsafe { *x.offset(i * sa) }))
        };
        if hit {
            found.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    });
    found.load(std::sync::atomic::Ordering::Relaxed)
}

/// `out[i] = f(a[i])`.
pub fn map1<A: Element, O: Element>(
    out: &TensorMut,
    a: &TensorRef,
    f: impl Fn(A) -> O + Sync + Send,
) -> FooResult<()> {
    map1_isa(out, a, move |x, _| f(x))
}

/// `out[i] = f(a[i], isa)`: `isa` is the instruction set of the loop's copy, for `vmath`.
pub fn map1_isa<A: Element, O: Element>(
    out: &TensorMut,
    a: &TensorRef,
    f: impl Fn(A, Isa) -> O + Sync + Send,
) -> FooResult<()> {
    check_operand::<O>("output", out.dtype, &out.shape, &out.shape)?;
    check_operand::<A>("input", a.dtype, &a.shape, &out.shape)?;
    if out.numel() == 0 {
        return Ok(());
    }
    let l = coalesce(&out.shape, [&out.strides, &a.strides]);
    if wants_tiles(&l) {
        let sizes = [size_of::<O>(), size_of::<A>()];
        // SAFETY: the layout came from the operands' shapes and strides; the glue keeps the
        // output from overlapping itself or the input; rows hand `len` dense elements over.
        unsafe {
            drive_tiles(
                &l,
                [SendPtr::of(out.ptr), SendPtr::of(a.ptr)],
                sizes,
                &|p, len| dense1(p[0] as *mut O, p[1] as *const A, len, &f),
            )
        };
        return Ok(());
    }
    let [so, sa] = inner_strides(&l);
    let (po, pa) = (SendPtr::<O>::of(out.ptr), SendPtr::<A>::of(a.ptr));
    if l.shape.len() >= 2 && so == 1 && sa == 1 {
        // Rows with dense insides: whole runs of rows per call, as in map2.
        drive_dense_rows(&l, &|off, rows, len, outer| {
            let (o, x) = (po.at(off[0]), pa.at(off[1]));
            // SAFETY: a run of rows of the operands, in bounds by their shapes and strides;
            // the output's rows are disjoint and written by this run only.
            unsafe { rows1(o, x as *const A, rows, len, outer, &f) };
        });
        return Ok(());
    }
    drive_rows(&l, &|off, len| {
        let (o, x) = (po.at(off[0]), pa.at(off[1]));
        // SAFETY: every (row offset + i * inner stride), i < len, addresses an element of the
        // operand (the layout came from its shape/strides); `out` does not overlap itself.
        unsafe {
            if so == 1 && sa == 1 {
                dense1(o, x as *const A, len, &f);
            } else {
                // Strided, or a broadcast row (`expand(...).contiguous()`, mean's backward).
                strided1(o, so, x as *const A, sa, len, &f);
            }
        }
    });
    Ok(())
}

/// `out[i] = f(a[i], b[i])`.
pub fn map2<A: Element, B: Element, O: Element>(
    out: &TensorMut,
    a: &TensorRef,
    b: &TensorRef,
    f: impl Fn(A, B) -> O + Sync + Send,
) -> FooResult<()> {
    map2_isa(out, a, b, move |x, y, _| f(x, y))
}

/// `out[i] = f(a[i], b[i], isa)`, `isa` as in [`map1_isa`].
pub fn map2_isa<A: Element, B: Element, O: Element>(
    out: &TensorMut,
    a: &TensorRef,
    b: &TensorRef,
    f: impl Fn(A, B, Isa) -> O + Sync + Send,
) -> FooResult<()> {
    check_operand::<O>("output", out.dtype, &out.shape, &out.shape)?;
    check_operand::<A>("input 1", a.dtype, &a.shape, &out.shape)?;
    check_operand::<B>("input 2", b.dtype, &b.shape, &out.shape)?;
    if out.numel() == 0 {
        return Ok(());
    }
    let l = coalesce(&out.shape, [&out.strides, &a.strides, &b.strides]);
    if wants_tiles(&l) {
        let bases = [SendPtr::of(out.ptr), SendPtr::of(a.ptr), SendPtr::of(b.ptr)];
        let sizes = [size_of::<O>(), size_of::<A>(), size_of::<B>()];
        // SAFETY: as in map1.
        unsafe {
            drive_tiles(&l, bases, sizes, &|p, len| {
                dense2(p[0] as *mut O, p[1] as *const A, p[2] as *const B, len, &f)
            })
        };
        return Ok(());
    }
    let [so, sa, sb] = inner_strides(&l);
    let (po, pa, pb) = (
        SendPtr::<O>::of(out.ptr),
        SendPtr::<A>::of(a.ptr),
        SendPtr::<B>::of(b.ptr),
    );
    if l.shape.len() >= 2 && so == 1 && sa == 1 && sb == 1 {
        // Rows with dense insides (broadcast vectors, row slices): whole runs of rows per
        // call.
        drive_dense_rows(&l, &|off, rows, len, outer| {
            let (o, x, y) = (po.at(off[0]), pa.at(off[1]), pb.at(off[2]));
            // SAFETY: a run of rows of the operands, in bounds by their shapes and strides;
            // the output's rows are disjoint and written by this run only.
            unsafe { rows2(o, x as *const A, y as *const B, rows, len, outer, &f) };
        });
        return Ok(());
    }
    if l.shape.len() >= 2 && so == 1 && matches!((sa, sb), (1, 0) | (0, 1)) {
        // Dense rows and one operand constant along each row.
        drive_dense_rows(&l, &|off, rows, len, outer| {
            let (o, x, y) = (
                po.at(off[0]),
                pa.at(off[1]) as *const A,
                pb.at(off[2]) as *const B,
            );
            // SAFETY: a run of rows of the operands, as above.
            unsafe {
                if sb == 0 {
                    rows2_scalar(o, x, y, rows, len, outer, &f)
                } else {
                    let swapped = [outer[0], outer[2], outer[1]];
                    rows2_scalar(o, y, x, rows, len, swapped, &|b, a, isa| f(a, b, isa))
                }
            };
        });
        return Ok(());
    }
    drive_rows(&l, &|off, len| {
        let (o, x, y) = (po.at(off[0]), pa.at(off[1]), pb.at(off[2]));
        // SAFETY: as in map1.
        unsafe {
            let o_dense = so == 1;
            if o_dense && sa == 1 && sb == 1 {
                dense2(o, x as *const A, y as *const B, len, &f);
            } else if o_dense && sa == 1 && sb == 0 {
                let y = *y;
                dense1(o, x as *const A, len, &|x, isa| f(x, y, isa));
            } else if o_dense && sa == 0 && sb == 1 {
                let x = *x;
                dense1(o, y as *const B, len, &|y, isa| f(x, y, isa));
            } else {
                // Strided, or both inputs broadcast along the row (an expanded tensor times a
                // scalar).
                strided2(o, so, x as *const A, sa, y as *const B, sb, len, &f);
            }
        }
    });
    Ok(())
}

/// `out[i] = f(a[i], b[i], c[i])`.
pub fn map3<A: Element, B: Element, C: Element, O: Element>(
    out: &TensorMut,
    a: &TensorRef,
    b: &TensorRef,
    c: &TensorRef,
    f: impl Fn(A, B, C) -> O + Sync + Send + Copy,
) -> FooResult<()> {
    check_operand::<O>("output", out.dtype, &out.shape, &out.shape)?;
    check_operand::<A>("input 1", a.dtype, &a.shape, &out.shape)?;
    check_operand::<B>("input 2", b.dtype, &b.shape, &out.shape)?;
    check_operand::<C>("input 3", c.dtype, &c.shape, &out.shape)?;
    if out.numel() == 0 {
        return Ok(());
    }
    let l = coalesce(
        &out.shape,
        [&out.strides, &a.strides, &b.strides, &c.strides],
    );
    let [so, sa, sb, sc] = inner_strides(&l);
    let (po, pa, pb, pc) = (
        SendPtr::<O>::of(out.ptr),
        SendPtr::<A>::of(a.ptr),
        SendPtr::<B>::of(b.ptr),
        SendPtr::<C>::of(c.ptr),
    );
    drive_rows(&l, &|off, len| {
        let (o, x, y, z) = (po.at(off[0]), pa.at(off[1]), pb.at(off[2]), pc.at(off[3]));
        // SAFETY: as in map1.
        unsafe {
            if so == 1 && sa == 1 && sb == 1 && (sc == 1 || sc == 0) {
                dense3(
                    o,
                    x as *const A,
                    y as *const B,
                    z as *const C,
                    sc == 0,
                    len,
                    &f,
                );
            } else if so == 1 && sa == 0 && sb == 0 && sc == 0 {
                std::slice::from_raw_parts_mut(o, len).fill(f(*x, *y, *z));
            } else {
                for i in 0..len as isize {
                    *o.offset(i * so) = f(*x.offset(i * sa), *y.offset(i * sb), *z.offset(i * sc));
                }
            }
        }
    });
    Ok(())
}

/// `o[i] = f(x[i], y[i], z[i])` over `len` contiguous elements, `z` one value for all when
/// `z_scalar` (lerp's scalar weight). In place (`o` is `x`: Adam's `exp_avg.lerp_`,
/// `param.addcdiv_`) the loop reads and writes one slice: with two, the compiler's run-time
/// overlap check fails and the loop stays scalar (measured: `_foreach_lerp_` on ResNet-18's
/// parameters took twice the CPU's time).
///
/// # Safety
/// The pointers address `len` elements (`z` one when `z_scalar`); `o` is `x` or overlaps no
/// operand.
#[inline(always)]
unsafe fn dense3<A: Element, B: Element, C: Element, O: Element>(
    o: *mut O,
    x: *const A,
    y: *const B,
    z: *const C,
    z_scalar: bool,
    len: usize,
    f: &(impl Fn(A, B, C) -> O + Copy),
) {
    // A copy on the stack: through the reference, the compiler reloads the closure's captured
    // constants after every store to `o` (it cannot rule out that they overlap).
    let f = *f;
    // SAFETY: (the whole body) the caller's contract; in place, `A` is `O` (same memory).
    unsafe {
        let y = std::slice::from_raw_parts(y, len);
        let inplace =
            std::ptr::addr_eq(o, x) && std::mem::size_of::<A>() == std::mem::size_of::<O>();
        let o = std::slice::from_raw_parts_mut(o, len);
        match (inplace, z_scalar) {
            (true, true) => {
                let zv = *z;
                for i in 0..len {
                    o[i] = f(*(&o[i] as *const O as *const A), y[i], zv);
                }
            }
            (true, false) => {
                let z = std::slice::from_raw_parts(z, len);
                for i in 0..len {
                    o[i] = f(*(&o[i] as *const O as *const A), y[i], z[i]);
                }
            }
            (false, true) => {
                let (x, zv) = (std::slice::from_raw_parts(x, len), *z);
                for i in 0..len {
                    o[i] = f(x[i], y[i], zv);
                }
            }
            (false, false) => {
                let x = std::slice::from_raw_parts(x, len);
                let z = std::slice::from_raw_parts(z, len);
                for i in 0..len {
                    o[i] = f(x[i], y[i], z[i]);
                }
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Owned test tensors for kernel unit tests.
    use crate::kernels::core::element::Element;
    use crate::tensor::{contiguous_strides, TensorMut, TensorRef};

    pub struct Owned<T> {
        pub data: Vec<T>,
        pub shape: Vec<usize>,
    }

    /// `n` deterministic pseudo-random values in `[lo, hi)` (an LCG per `seed`).
    pub fn uniform(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
        let step = |s: u64| {
            s.wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407)
        };
        let mut s = step(seed);
        (0..n)
            .map(|_| {
                s = step(s);
                lo + ((s >> 11) as f64 / (1u64 << 53) as f64) * (hi - lo)
            })
            .collect()
    }

    impl<T: Element> Owned<T> {
        pub fn new(data: Vec<T>, shape: &[usize]) -> Self {
            assert_eq!(data.len(), shape.iter().product::<usize>());
            Owned {
                data,
                shape: shape.to_vec(),
            }
        }
        pub fn zeros(shape: &[usize]) -> Self {
            Owned::new(vec![T::default(); shape.iter().product()], shape)
        }
        pub fn r(&self) -> TensorRef {
            TensorRef {
                ptr: self.data.as_ptr() as *const u8,
                shape: self.shape.as_slice().into(),
                strides: contiguous_strides(&self.shape),
                dtype: T::DTYPE,
            }
        }
        /// A broadcast view of this tensor to `shape` (numpy rules, trailing alignment).
        pub fn bcast(&self, shape: &[usize]) -> TensorRef {
            let own = contiguous_strides(&self.shape);
            let off = shape.len() - self.shape.len();
            let strides = (0..shape.len())
                .map(|d| {
                    if d < off || self.shape[d - off] == 1 {
                        0
                    } else {
                        own[d - off]
                    }
                })
                .collect();
            TensorRef {
                ptr: self.data.as_ptr() as *const u8,
                shape: shape.to_vec().into(),
                strides,
                dtype: T::DTYPE,
            }
        }
        pub fn m(&mut self) -> TensorMut {
            TensorMut {
                ptr: self.data.as_mut_ptr() as *mut u8,
                shape: self.shape.as_slice().into(),
                strides: contiguous_strides(&self.shape),
                dtype: T::DTYPE,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::Owned;
    use super::*;
    use crate::DType;

    #[test]
    fn map2_broadcast_and_parallel() {
        let a = Owned::new((0..6).map(|x| x as f32).collect(), &[2, 3]);
        let b = Owned::new(vec![10.0f32, 20.0, 30.0], &[3]);
        let mut o = Owned::<f32>::zeros(&[2, 3]);
        map2(&o.m(), &a.r(), &b.bcast(&[2, 3]), move |x: f32, y: f32| {
            x + y
        })
        .unwrap();
        assert_eq!(o.data, vec![10.0, 21.0, 32.0, 13.0, 24.0, 35.0]);

        let n = 2 * GRAIN + 3;
        let a = Owned::new((0..n).map(|x| x as f64).collect(), &[n]);
        let s = Owned::new(vec![2.0f64], &[1]);
        let mut o = Owned::<f64>::zeros(&[n]);
        map2(&o.m(), &a.r(), &s.bcast(&[n]), move |x: f64, y: f64| x * y).unwrap();
        assert!(o.data.iter().enumerate().all(|(i, &v)| v == 2.0 * i as f64));
    }

    #[test]
    fn map1_strided_and_dtype_check() {
        // Column of a 3x2 matrix.
        let a = Owned::new(vec![1i32, 2, 3, 4, 5, 6], &[3, 2]);
        let col = TensorRef {
            ptr: a.data.as_ptr() as *const u8,
            shape: smallvec::smallvec![3],
            strides: smallvec::smallvec![2],
            dtype: DType::I32,
        };
        let mut o = Owned::<bool>::zeros(&[3]);
        map1(&o.m(), &col, move |x: i32| x > 2).unwrap();
        assert_eq!(o.data, vec![false, true, true]);
        assert!(map1(&o.m(), &col, move |x: f32| x > 2.0).is_err());
    }

    #[test]
    fn loop_copies_get_their_isa() {
        // The copy that runs evaluates vmath with FMA exactly where the CPU has it: its results
        // are those of the scalar evaluation with that Isa (libm's exact fmaf here), bit for
        // bit, and with FMA some differ from the unfused ones.
        use crate::kernels::core::{simd, vmath};
        let x: Vec<f32> = (0..4099).map(|i| (i as f32 - 2049.0) * 0.003_7).collect();
        let mut o = vec![0f32; x.len()];
        // SAFETY: two vectors of x.len() elements.
        unsafe {
            dense1(o.as_mut_ptr(), x.as_ptr(), x.len(), &|v, isa| {
                vmath::erfc(isa, v) + vmath::tanh(isa, v)
            })
        };
        let f = |isa, v| vmath::erfc(isa, v) + vmath::tanh(isa, v);
        let fma = simd::level() >= 2;
        let isa = if fma { Isa::FMA } else { Isa::BASELINE };
        for (&v, &y) in x.iter().zip(&o) {
            assert_eq!(y.to_bits(), f(isa, v).to_bits(), "{v}");
        }
        let unfused = x
            .iter()
            .zip(&o)
            .filter(|&(&v, &y)| y != f(Isa::BASELINE, v));
        assert_eq!(unfused.count() > 0, fma);
    }

    #[test]
    fn rows_split_across_chunks() {
        // A transposed (column-major) input over a large matrix crosses row boundaries mid-chunk.
        let (r, c) = (300, 517);
        let a = Owned::new((0..r * c).map(|x| x as i64).collect(), &[r, c]);
        let t = TensorRef {
            ptr: a.data.as_ptr() as *const u8,
            shape: smallvec::smallvec![c, r],
            strides: smallvec::smallvec![1, c as isize],
            dtype: DType::I64,
        };
        let mut o = Owned::<i64>::zeros(&[c, r]);
        map1(&o.m(), &t, move |x: i64| x + 1).unwrap();
        for i in 0..c {
            for j in 0..r {
                assert_eq!(o.data[i * r + j], (j * c + i) as i64 + 1);
            }
        }
    }
}
