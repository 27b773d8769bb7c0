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

#[test]
fn bf16_pack_panel_all_three_loops() {
    if !available() {
        return;
    }
    let (lines, k) = (5usize, 7usize);
    let src: Vec<u16> = (0..200).collect();
    for (ls, ks) in [(9isize, 1isize), (1, 9), (11, 3)] {
        let mut dst = vec![u32::MAX; k.div_ceil(2) * 8];
        // SAFETY: every (l, q) with l < 5, q < 7 is below 11 * 4 + 3 * 6 + 1 < 200.
        unsafe { pack::panel::<8>(src.as_ptr(), ls, ks, lines, k, &mut dst) };
        for p in 0..k.div_ceil(2) {
            for l in 0..8 {
                let el = |q: usize| {
                    if l < lines && q < k {
                        u32::from(src[l * ls as usize + q * ks as usize])
                    } else {
                        0
                    }
                };
                assert_eq!(
                    dst[p * 8 + l],
                    el(2 * p) | el(2 * p + 1) << 16,
                    "ls={ls} ks={ks} p={p} l={l}"
                );
            }
        }
    }
}
