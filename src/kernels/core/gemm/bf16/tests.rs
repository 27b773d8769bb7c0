//! Unit tests of the native kernel's pieces: the rounding to bfloat16 and the packing of
//! panels, and the two ways of reading A giving the same bits. The products themselves are
//! checked through `linalg::matmul` (kernels/linalg/bf16_tests.rs).

use super::store::to_bf16;
use super::{available, pack};
use crate::tensor::{TensorMut, TensorRef};
use crate::DType;
use half::bf16;

#[test]
fn bf16_rounding_matches_half() {
    let specials = [
        0.0f32,
        -0.0,
        1.0,
        f32::MAX,
        f32::MIN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        1e-40,
        -1e-45,
    ];
    let sweep = (0..1u64 << 32)
        .step_by(65_521)
        .map(|b| f32::from_bits(b as u32));
    for x in specials.into_iter().chain(sweep) {
        assert_eq!(
            to_bf16(x),
            bf16::from_f32(x).to_bits(),
            "{x:e} ({:#x})",
            x.to_bits()
        );
    }
    // Ties: exactly halfway rounds to even.
    for b in [
        0x3F80_8000u32,
        0x3F81_8000,
        0xBF80_8000,
        0x3F80_8001,
        0x3F80_7FFF,
    ] {
        let x = f32::from_bits(b);
        assert_eq!(to_bf16(x), bf16::from_f32(x).to_bits(), "{b:#x}");
    }
}

/// `pack::panel::<L>` of `lines` lines of `k` elements at `src[off + l * ls + q * ks]` against
/// the layout it promises, every slot of the panel (padding included) overwritten.
fn check_panel<const L: usize>(
    src: &[u16],
    off: usize,
    ls: isize,
    ks: isize,
    lines: usize,
    k: usize,
) {
    let mut dst = vec![u32::MAX; k.div_ceil(2) * L];
    // SAFETY: the callers size `src` to hold every (l, q) with l < lines, q < k.
    unsafe { pack::panel::<L>(src[off..].as_ptr(), ls, ks, lines, k, &mut dst) };
    for p in 0..k.div_ceil(2) {
        for l in 0..L {
            let el = |q: usize| {
                if l < lines && q < k {
                    u32::from(src[off + l * ls as usize + q * ks as usize])
                } else {
                    0
                }
            };
            assert_eq!(
                dst[p * L + l],
                el(2 * p) | el(2 * p + 1) << 16,
                "L={L} lines={lines} k={k} ls={ls} ks={ks} off={off} p={p} l={l}"
            );
        }
    }
}

#[test]
fn bf16_pack_panel_all_loops() {
    if !available() {
        return;
    }
    let src: Vec<u16> = (0..u16::MAX).collect();
    // Any strides, lines contiguous, and k contiguous with an odd line stride.
    for (ls, ks) in [(9isize, 1isize), (1, 9), (11, 3)] {
        check_panel::<8>(&src, 0, ls, ks, 5, 7);
    }
    // k contiguous with an even line stride: 8 x 8 transposes (whole and partial groups of
    // lines, pairs past the last block of 8, an odd k), also from an odd (unaligned) offset.
    for (lines, k) in [(64, 40), (61, 37), (6, 16), (6, 35), (13, 18), (3, 5)] {
        for off in [0, 1] {
            check_panel::<64>(&src, off, 40, 1, lines.min(64), k);
            check_panel::<6>(&src, off, 40, 1, lines.min(6), k);
            check_panel::<8>(&src, off, 40, 1, lines.min(8), k);
        }
    }
}

/// A `[batches, rows, cols]` bfloat16 operand stored row-major (`transposed`: each matrix
/// column-major), of deterministic fractions; `(data, strides)`.
fn operand(
    batches: usize,
    rows: usize,
    cols: usize,
    seed: u64,
    transposed: bool,
) -> (Vec<u16>, [isize; 3]) {
    let vals = crate::kernels::core::map::testing::uniform(batches * rows * cols, seed, -1.0, 1.0);
    let strides = match transposed {
        false => [(rows * cols) as isize, cols as isize, 1],
        true => [(rows * cols) as isize, 1, rows as isize],
    };
    let mut data = vec![0u16; vals.len()];
    for q in 0..batches {
        for i in 0..rows {
            for j in 0..cols {
                let at =
                    q as isize * strides[0] + i as isize * strides[1] + j as isize * strides[2];
                data[at as usize] = bf16::from_f64(vals[(q * rows + i) * cols + j]).to_bits();
            }
        }
    }
    (data, strides)
}

fn tensor(data: &[u16], shape: [usize; 3], strides: [isize; 3]) -> TensorRef {
    TensorRef {
        ptr: data.as_ptr().cast(),
        shape: shape.to_vec().into(),
        strides: strides.to_vec().into(),
        dtype: DType::BF16,
    }
}

/// The blocks of `rows.rs`, with A's rows read in place (row-major A, even `k`) or A
/// interleaved per block (column-major A, any `k`), in any number of depth passes, on one
/// thread or split, give the bits of both operands packed whole ([`super::imp::packed`]), for B
/// row-major (packed pair by pair) and column-major (8 x 8 transposes), with and without
/// `beta * c`: each sum is the same chain of `vdpbf16ps` over the pairs in order.
#[test]
fn bf16_blocks_per_thread_match_packed_operands_bit_for_bit() {
    if !available() {
        return;
    }
    let sizes = [
        [1, 6, 2, 64],
        [1, 37, 258, 131],
        [2, 130, 64, 70],
        [1, 300, 520, 20],
        [3, 7, 1030, 200],
        [1, 70, 7, 65],
        [2, 1030, 33, 40],
    ];
    for [bs, m, k, n] in sizes {
        let (a_rows, sa_rows) = operand(bs, m, k, 1, false);
        let (a_cols, sa_cols) = operand(bs, m, k, 1, true);
        let mut layouts = vec![tensor(&a_cols, [bs, m, k], sa_cols)];
        if k % 2 == 0 {
            layouts.push(tensor(&a_rows, [bs, m, k], sa_rows));
        }
        for b_transposed in [false, true] {
            let (bd, sb) = operand(bs, k, n, 2, b_transposed);
            let b = tensor(&bd, [bs, k, n], sb);
            let (cd, sc) = operand(bs, m, n, 3, false);
            for with_c in [false, true] {
                let c = with_c.then(|| tensor(&cd, [bs, m, n], sc));
                let ab = (0.75f32, if with_c { -1.5f32 } else { 0.0 });
                let out = |data: &mut Vec<u16>| TensorMut {
                    ptr: data.as_mut_ptr().cast(),
                    shape: vec![bs, m, n].into(),
                    strides: vec![(m * n) as isize, n as isize, 1].into(),
                    dtype: DType::BF16,
                };
                let mut want = vec![0u16; bs * m * n];
                super::imp::packed(&out(&mut want), &layouts[0], &b, c.as_ref(), ab, true);
                for a in &layouts {
                    assert!(super::rows::takes(a));
                    for kc in [1, 3, 128, k.div_ceil(2)] {
                        for parallel in [false, true] {
                            let mut got = vec![0u16; bs * m * n];
                            super::rows::matmul(
                                &out(&mut got),
                                a,
                                &b,
                                c.as_ref(),
                                ab,
                                parallel,
                                kc,
                            );
                            assert!(
                                got == want,
                                "[{bs}, {m}, {k}, {n}] a strides {:?} b transposed {b_transposed} c {with_c} kc {kc} parallel {parallel}",
                                a.strides
                            );
                        }
                    }
                }
            }
        }
    }
}
