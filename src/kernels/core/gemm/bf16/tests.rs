//! Unit tests of the native kernel's pieces: the rounding to bfloat16 and the packing of
//! panels. The products themselves are checked through `linalg::matmul`
//! (kernels/linalg/bf16_tests.rs).

use super::store::to_bf16;
use super::{available, pack};
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
