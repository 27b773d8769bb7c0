//! `a @ w.t()` for a few rows of `a` (decoding, small-batch inference) in float32/float64: every
//! output is the dot product of a row of `a` and a row of `w`, both contiguous, so `w` is
//! streamed once, with no packing, while the rows of `a` stay in L1. `gemm` ran these as
//! matrix-vector products with four columns: 4 x 1024 @ (1024 x 1024)^T took 0.216 ms against
//! the CPU's 0.085 (2 threads).

use super::GemmElem;
use crate::kernels::core::layout::GRAIN;
use crate::kernels::core::parallel::{parallel_for, SendPtr};

/// Rows of `a` up to which [`nt_rows`] runs.
pub const SKINNY_ROWS: usize = 8;

/// Lanes of the accumulators (one AVX-512 register of float32).
const L: usize = 16;

/// `dst[i, j] = (read_dst ? dst[i, j] : 0) + alpha * a[i, :] . w[j, :]` for `i < m <=`
/// [`SKINNY_ROWS`], `j < n`: `a` is `m x k` and `w` is `n x k`, rows `lda` and `ldw` apart,
/// each dense; `dst` is at `dst_rs`/`dst_cs`. Parallel over rows of `w` when `parallel`; every
/// output's sum has the same order whatever the thread count (16 lane sums, added in lane order).
///
/// # Safety
/// The operands address every element of their matrices; `dst` is written only here.
#[allow(clippy::too_many_arguments)]
pub unsafe fn nt_rows<T: GemmElem>(
    m: usize,
    n: usize,
    k: usize,
    dst: *mut T,
    dst_rs: isize,
    dst_cs: isize,
    read_dst: bool,
    a: *const T,
    lda: isize,
    w: *const T,
    ldw: isize,
    alpha: T,
    parallel: bool,
) {
    assert!(m <= SKINNY_ROWS);
    let grain = match parallel {
        true => (GRAIN / (k * m).max(1)).max(1),
        false => usize::MAX,
    };
    let (d, pa, pw) = (SendPtr::new(dst), SendPtr::of(a), SendPtr::of(w));
    parallel_for(n, grain, &|j0, j1| {
        let mut sums = [T::ZERO; SKINNY_ROWS];
        for j in j0..j1 {
            let wj = pw.at(j as isize * ldw) as *const T;
            let mut i = 0;
            while i < m {
                let ai = pa.at(i as isize * lda) as *const T;
                let rest = &mut sums[i..];
                // SAFETY: rows i.. of `a` and row j of `w`, k elements each (the caller's
                // contract).
                i += unsafe {
                    match m - i {
                        8.. => dots::<T, Rows<8>>(ai, lda, wj, k, rest),
                        4..=7 => dots::<T, Rows<4>>(ai, lda, wj, k, rest),
                        2..=3 => dots::<T, Rows<2>>(ai, lda, wj, k, rest),
                        _ => dots::<T, Rows<1>>(ai, lda, wj, k, rest),
                    }
                };
            }
            for (i, &s) in sums[..m].iter().enumerate() {
                let o = d.at(i as isize * dst_rs + j as isize * dst_cs);
                // SAFETY: output (i, j), written by this task only.
                unsafe { *o = if read_dst { *o + alpha * s } else { alpha * s } };
            }
        }
    });
}

/// A row count as a type, so that it can be a parameter of the multiversioned loop.
pub trait RowCount {
    const M: usize;
}

/// `M` rows of `a` at a time.
pub struct Rows<const M: usize>;

impl<const M: usize> RowCount for Rows<M> {
    const M: usize = M;
}

/// The dot products of `R::M` rows of `a` (rows `lda` apart) with one row `w` of `k` elements,
/// into `out[..R::M]`; returns `R::M`. Runs an AVX-512 / AVX2 / baseline copy.
///
/// # Safety
/// The rows address `k` elements each; `out` holds `R::M`.
#[inline(always)]
unsafe fn dots<T: GemmElem, R: RowCount>(
    a: *const T,
    lda: isize,
    w: *const T,
    k: usize,
    out: &mut [T],
) -> usize {
    assert!(out.len() >= R::M && R::M <= SKINNY_ROWS);
    // SAFETY: forwarded.
    unsafe { dots_mv::<T, R>(a, lda, w, k, out.as_mut_ptr()) };
    R::M
}

crate::unsafe_multiversion!(unsafe fn dots_mv<T: GemmElem, R: RowCount>(a: *const T, lda: isize, w: *const T, k: usize, out: *mut T) => dots_body);

/// See [`dots`]: `M x L` independent accumulators (lane `l` sums elements `l, l + L, ...`),
/// which the compiler keeps in registers and vectorizes across lanes (`M` is a constant in
/// each copy, so the rows past it are never touched).
#[inline(always)]
unsafe fn dots_body<T: GemmElem, R: RowCount>(
    a: *const T,
    lda: isize,
    w: *const T,
    k: usize,
    out: *mut T,
) {
    let mut acc = [[T::ZERO; L]; SKINNY_ROWS];
    let full = k / L * L;
    let mut p = 0;
    while p < full {
        // SAFETY: elements p..p + L < k of every row (the caller's contract).
        unsafe {
            let wv = std::ptr::read_unaligned(w.add(p) as *const [T; L]);
            for (r, row) in acc.iter_mut().enumerate().take(R::M) {
                let av =
                    std::ptr::read_unaligned(a.offset(r as isize * lda).add(p) as *const [T; L]);
                for l in 0..L {
                    row[l] = row[l] + av[l] * wv[l];
                }
            }
        }
        p += L;
    }
    for (r, row) in acc.iter().enumerate().take(R::M) {
        let mut s = T::ZERO;
        for &x in row {
            s = s + x;
        }
        for q in full..k {
            // SAFETY: element q < k of row r and of `w`.
            unsafe { s = s + *a.offset(r as isize * lda).add(q) * *w.add(q) };
        }
        // SAFETY: out holds M elements.
        unsafe { *out.add(r) = s };
    }
}
