//! Float32 products whose left operand's rows are read through pointers, against a packed
//! right operand: `dst[r][c] = bias[c] + sum over (tap, k) of rows[tap][r][k] * w[tap][k][c]`,
//! on AVX2 and AVX-512. Users: the channels-last convolution (a row is an output position, a
//! tap one kernel pixel's run of channels, read where it lies in the input) and the LSTM
//! layer's recurrent product (a row is a batch row of the previous hidden state, one tap).
//!
//! A call computes a tile of up to `R` rows and `J` vectors of output columns, in
//! sub-tiles of `S` rows whose `S x J` accumulators stay in registers: per depth index, `J`
//! loads of packed weights and `S` broadcasts. Each output element is one fused multiply-add
//! chain over the depth in order from zero (the order of the `gemm` crate's microkernels when
//! its depth block is the whole depth), so the bits do not depend on the tile or the caller's
//! split.

// The AVX-512 intrinsics are stable since Rust 1.89 (see gemm/bf16/microkernel.rs).
#![allow(clippy::incompatible_msrv)]

use std::arch::x86_64::*;

/// Depth indices per unrolled block of the inner loop.
const UNROLL: usize = 16;

/// What a kernel call does with the output rows it computes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Dst {
    /// Writes the sums (plus the bias).
    Write,
    /// Adds the sums (plus the bias) to what the rows hold: a product summed over depth in
    /// pieces, each piece its own chain.
    Add,
    /// Continues the chains that the rows hold (a call over the depth before wrote them):
    /// the accumulators start from the rows instead of zero, so a product cut into depth
    /// blocks this way has the bits of one call over the whole depth (storing and reloading a
    /// float32 is exact), while a block of the packed operand stays in L1 across the tiles.
    Resume,
}

/// One depth index `k` of a sub-tile: its rows' elements `k` times the packed weights of `k`,
/// one row's broadcast at a time (`J` weight vectors and one broadcast live beside the
/// accumulators: with all `S` broadcasts first, a 12 x 2 sub-tile spilled).
/// A macro, not a closure: a closure is not compiled with the kernel's target features, and
/// was not inlined.
macro_rules! depth_step {
    ($acc:ident, $pixels:ident, $wt:ident, $k:expr, $v:ty, $w:literal, $splat:expr, $load:ident,
     $fma:ident) => {{
        let k = $k;
        let wv: [$v; J] = std::array::from_fn(|j| {
            // SAFETY: k's packed weights of columns $w j.. $w (j + 1).
            unsafe { $load($wt.add((k * J + j) * $w)) }
        });
        for (row, px) in $acc.iter_mut().zip(&$pixels) {
            // SAFETY: element k < depth of row r (the caller's contract).
            let x = $splat(unsafe { &*px.add(k) });
            for j in 0..J {
                row[j] = $fma(wv[j], x, row[j]);
            }
        }
    }};
}

/// Defines the kernel for one vector width (the register type and its intrinsics are all that
/// differ between the AVX2 and the AVX-512 copy).
macro_rules! rows_product {
    ($(#[$doc:meta])* $name:ident, $features:literal, $v:ty, $w:literal,
     $zero:ident, $load:ident, $splat:expr, $fma:ident, $add:ident, $store:ident) => {
        $(#[$doc])*
        #[target_feature(enable = $features)]
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn $name<const R: usize, const S: usize, const J: usize>(
            rows: &[*const f32],
            depth: usize,
            w: *const f32,
            dst: *mut f32,
            ld: usize,
            vec_ld: usize,
            n: usize,
            bias: *const f32,
            mode: Dst,
        ) {
            let has_bias = !bias.is_null();
            let bias: [$v; J] = std::array::from_fn(|j| match bias.is_null() {
                true => $zero(),
                // SAFETY: column block j of the bias (the caller's contract).
                false => unsafe { $load(bias.add($w * j)) },
            });
            let (blocks, tail) = (depth / UNROLL, depth % UNROLL);
            for r0 in (0..R).step_by(S) {
                if r0 >= n {
                    break;
                }
                let mut acc = [[$zero(); J]; S];
                if mode == Dst::Resume {
                    for (r, row) in acc.iter_mut().enumerate().take(n - r0) {
                        for (j, a) in row.iter_mut().enumerate() {
                            // SAFETY: row r0 + r < n of dst, vector j (the caller's contract).
                            *a = unsafe { $load(dst.add((r0 + r) * ld + vec_ld * j)) };
                        }
                    }
                }
                for (tap, taps) in rows.chunks_exact(R).enumerate() {
                    let pixels: [*const f32; S] = std::array::from_fn(|r| taps[r0 + r]);
                    // SAFETY: tap `tap`'s packed weights (the caller's contract).
                    let wt = unsafe { w.add(tap * depth * $w * J) };
                    for c in 0..blocks {
                        for kk in 0..UNROLL {
                            depth_step!(acc, pixels, wt, c * UNROLL + kk, $v, $w, $splat, $load, $fma);
                        }
                    }
                    for k in blocks * UNROLL..blocks * UNROLL + tail {
                        depth_step!(acc, pixels, wt, k, $v, $w, $splat, $load, $fma);
                    }
                }
                for (r, row) in acc.iter().enumerate().take(n - r0) {
                    for (j, &v) in row.iter().enumerate() {
                        let v = if has_bias { $add(v, bias[j]) } else { v };
                        // SAFETY: row r0 + r < n of dst (the caller's contract).
                        let at = unsafe { dst.add((r0 + r) * ld + vec_ld * j) };
                        // SAFETY: as above; read before it is written.
                        let v = if mode == Dst::Add { $add(unsafe { $load(at) }, v) } else { v };
                        // SAFETY: as above.
                        unsafe { $store(at, v) };
                    }
                }
            }
        }
    };
}

rows_product!(
    /// `dst[r][c] = sum over taps and k < depth of rows[tap * R + r][k] *
    /// w[(tap * depth + k) * 8J + c]` for `c < 8J`, plus `bias[c]` unless `bias` is null,
    /// added to what `dst` holds or continuing its chains as `mode` says ([`Dst`]), written to
    /// rows `r < n` at `dst + r * ld`, a row's vector `j` (columns `8j..8j + 8`) at `vec_ld * j`
    /// (`8` for dense rows; more to scatter them, as the LSTM layer puts its gates apart); on
    /// AVX2 (8-float vectors).
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA; `R` is a multiple of `S` and `n <= R`; `rows.len()`
    /// is a multiple of `R`, each pointer readable for `depth` floats (also those of rows
    /// `n..R`, whose results are dropped); `w` readable for `rows.len() / R * depth * 8J`
    /// floats; `dst` writable (and readable unless `mode` is `Write`) for 8 floats at each vector of its
    /// `n` rows; `bias` readable for `8J` floats unless null.
    product_avx2, "avx2,fma", __m256, 8,
    _mm256_setzero_ps, _mm256_loadu_ps, _mm256_broadcast_ss, _mm256_fmadd_ps, _mm256_add_ps,
    _mm256_storeu_ps
);

rows_product!(
    /// [`product_avx2`] with `16J` columns, on AVX-512.
    ///
    /// # Safety
    /// As [`product_avx2`] with `16J` columns, and AVX-512F instead of AVX2 and FMA.
    product_avx512, "avx512f", __m512, 16,
    _mm512_setzero_ps, _mm512_loadu_ps, |x: &f32| _mm512_set1_ps(*x), _mm512_fmadd_ps,
    _mm512_add_ps, _mm512_storeu_ps
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::core::simd;

    /// Every kernel copy gives each element the plain fused chain's bits, with a depth tail,
    /// two taps, a bias, fewer rows than the tile, and added to the output's values.
    #[test]
    fn matches_the_plain_chain() {
        let (taps, depth, n) = (2, 37, 10);
        const TILE: usize = 12;
        let tile_rows = TILE;
        let val = |i: usize| ((i * 7919 % 1000) as f32 - 500.0) / 250.0;
        let x: Vec<f32> = (0..taps * tile_rows * depth).map(val).collect();
        let rows: Vec<*const f32> = (0..taps * tile_rows)
            .map(|i| x[i * depth..].as_ptr())
            .collect();
        for cols in [8, 16, 32] {
            let w: Vec<f32> = (0..taps * depth * cols).map(|i| val(i + 3)).collect();
            let bias: Vec<f32> = (0..cols).map(|i| val(i + 11)).collect();
            let want: Vec<f32> = (0..n * cols)
                .map(|e| {
                    let (r, c) = (e / cols, e % cols);
                    let mut s = 0.0f32;
                    for tap in 0..taps {
                        for k in 0..depth {
                            let xv = x[(tap * tile_rows + r) * depth + k];
                            s = xv.mul_add(w[(tap * depth + k) * cols + c], s);
                        }
                    }
                    s + bias[c]
                })
                .collect();
            let ld = cols + 3;
            // Each kernel runs twice: into a fresh output, then adding to the values it holds.
            let run = |f: &dyn Fn(*mut f32, Dst)| {
                for add in [false, true] {
                    let old = |e: usize| val(e + 17);
                    let mut dst: Vec<f32> = match add {
                        true => (0..n * ld).map(old).collect(),
                        false => vec![f32::NAN; n * ld],
                    };
                    f(dst.as_mut_ptr(), if add { Dst::Add } else { Dst::Write });
                    let same = (0..n * cols).all(|e| {
                        let at = e / cols * ld + e % cols;
                        let want = if add { old(at) + want[e] } else { want[e] };
                        dst[at].to_bits() == want.to_bits()
                    });
                    assert!(same, "{cols} columns, adding {add}");
                }
            };
            let (w, b) = (w.as_ptr(), bias.as_ptr());
            // SAFETY: the level guards the CPU features; the buffers have the extents above.
            unsafe {
                if simd::level() >= 2 {
                    match cols {
                        8 => run(&|d, add| {
                            product_avx2::<TILE, 3, 1>(&rows, depth, w, d, ld, 8, n, b, add)
                        }),
                        16 => run(&|d, add| {
                            product_avx2::<TILE, 4, 2>(&rows, depth, w, d, ld, 8, n, b, add)
                        }),
                        _ => run(&|d, add| {
                            product_avx2::<TILE, 3, 4>(&rows, depth, w, d, ld, 8, n, b, add)
                        }),
                    }
                }
                if simd::level() >= 3 && cols >= 16 {
                    match cols {
                        16 => run(&|d, add| {
                            product_avx512::<TILE, 6, 1>(&rows, depth, w, d, ld, 16, n, b, add)
                        }),
                        _ => run(&|d, add| {
                            product_avx512::<TILE, 4, 2>(&rows, depth, w, d, ld, 16, n, b, add)
                        }),
                    }
                }
            }
        }
    }

    /// A product over two depth blocks, the second resuming the first's chains, has the bits
    /// of one call over the whole depth, on every kernel copy the callers use.
    #[test]
    fn resumed_chains_match_one_call() {
        const TILE: usize = 24;
        let (depth, split, n, cols) = (37, 16, 21, 32);
        let val = |i: usize| ((i * 7919 % 1000) as f32 - 500.0) / 250.0;
        let x: Vec<f32> = (0..TILE * depth).map(val).collect();
        let w: Vec<f32> = (0..depth * cols).map(|i| val(i + 5)).collect();
        let bias: Vec<f32> = (0..cols).map(|i| val(i + 9)).collect();
        let rows_at = |k: usize| -> Vec<*const f32> {
            (0..TILE).map(|r| x[r * depth + k..].as_ptr()).collect()
        };
        let (whole, head, tail) = (rows_at(0), rows_at(0), rows_at(split));
        let ld = cols + 1;
        type Kernel<'a> = &'a dyn Fn(&[*const f32], usize, *const f32, *mut f32, *const f32, Dst);
        let check = |f: Kernel| {
            let (mut one, mut two) = (vec![f32::NAN; n * ld], vec![f32::NAN; n * ld]);
            let b = bias.as_ptr();
            f(&whole, depth, w.as_ptr(), one.as_mut_ptr(), b, Dst::Write);
            f(
                &head,
                split,
                w.as_ptr(),
                two.as_mut_ptr(),
                std::ptr::null(),
                Dst::Write,
            );
            let w_tail = w[split * cols..].as_ptr();
            f(
                &tail,
                depth - split,
                w_tail,
                two.as_mut_ptr(),
                b,
                Dst::Resume,
            );
            let same = (0..n * cols).all(|e| {
                let at = e / cols * ld + e % cols;
                one[at].to_bits() == two[at].to_bits()
            });
            assert!(same);
        };
        // SAFETY: the level guards the CPU features; the buffers have the extents above.
        unsafe {
            if simd::level() >= 2 {
                check(&|r, d, w, o, b, m| product_avx2::<TILE, 3, 4>(r, d, w, o, ld, 8, n, b, m));
            }
            if simd::level() >= 3 {
                check(&|r, d, w, o, b, m| {
                    product_avx512::<TILE, 8, 2>(r, d, w, o, ld, 16, n, b, m)
                });
                check(&|r, d, w, o, b, m| {
                    product_avx512::<TILE, 4, 2>(r, d, w, o, ld, 16, n, b, m)
                });
            }
        }
    }
}
