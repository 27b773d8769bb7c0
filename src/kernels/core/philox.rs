//! Philox4x32-10 words in stream order, many blocks per call: the rounds run over lanes of
//! independent counters so LLVM vectorizes them (`vpmuludq`), and the loop is compiled a second
//! time with AVX2 and picked at run time. Word `4b + j` of a stream is word `j` of
//! `philox4x32_10([b, b >> 32, 0, 0], key)`, exactly as the scalar function gives it.

use crate::runtime::rng::{PHILOX_M0, PHILOX_M1, PHILOX_W0, PHILOX_W1};

const LANES: usize = 16;

#[inline(always)]
fn fill_blocks_body(first_block: u64, key: [u32; 2], out: &mut [u32]) {
    // Each 32-bit state word lives in a u64 lane (high half zero), so the 32x32->64-bit
    // products map straight onto `vpmuludq` without the shuffles u32 lanes would need.
    const LO: u64 = 0xffff_ffff;
    for (g, chunk) in out.chunks_mut(4 * LANES).enumerate() {
        let b0 = first_block.wrapping_add((g * LANES) as u64);
        let mut c0 = [0u64; LANES];
        let mut c1 = [0u64; LANES];
        let mut c2 = [0u64; LANES];
        let mut c3 = [0u64; LANES];
        for j in 0..LANES {
            let b = b0.wrapping_add(j as u64);
            c0[j] = b & LO;
            c1[j] = b >> 32;
        }
        let (mut k0, mut k1) = (key[0] as u64, key[1] as u64);
        for round in 0..10 {
            if round > 0 {
                k0 = (k0 + PHILOX_W0 as u64) & LO;
                k1 = (k1 + PHILOX_W1 as u64) & LO;
            }
            for j in 0..LANES {
                let p0 = PHILOX_M0 as u64 * c0[j];
                let p1 = PHILOX_M1 as u64 * c2[j];
                let n0 = (p1 >> 32) ^ c1[j] ^ k0;
                let n2 = (p0 >> 32) ^ c3[j] ^ k1;
                c1[j] = p1 & LO;
                c3[j] = p0 & LO;
                c0[j] = n0;
                c2[j] = n2;
            }
        }
        if let Ok(full) = <&mut [u32; 4 * LANES]>::try_from(&mut *chunk) {
            for j in 0..LANES {
                full[4 * j] = c0[j] as u32;
                full[4 * j + 1] = c1[j] as u32;
                full[4 * j + 2] = c2[j] as u32;
                full[4 * j + 3] = c3[j] as u32;
            }
        } else {
            for (i, w) in chunk.iter_mut().enumerate() {
                let j = i / 4;
                *w = [c0[j], c1[j], c2[j], c3[j]][i % 4] as u32;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2")]
unsafe fn fill_blocks_avx512(first_block: u64, key: [u32; 2], out: &mut [u32]) {
    fill_blocks_body(first_block, key, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn fill_blocks_avx2(first_block: u64, key: [u32; 2], out: &mut [u32]) {
    fill_blocks_body(first_block, key, out)
}

/// Writes words `4 * first_block ..` of the stream keyed by `key` into `out`.
pub fn fill_blocks(first_block: u64, key: [u32; 2], out: &mut [u32]) {
    #[cfg(target_arch = "x86_64")]
    match crate::kernels::core::simd::level() {
        // SAFETY: the CPU supports AVX-512F and AVX2 (checked at run time).
        3 => return unsafe { fill_blocks_avx512(first_block, key, out) },
        // SAFETY: the CPU supports AVX2 (checked at run time).
        2 => return unsafe { fill_blocks_avx2(first_block, key, out) },
        _ => {}
    }
    fill_blocks_body(first_block, key, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::rng::philox4x32_10;

    #[test]
    fn matches_the_scalar_generator() {
        let key = [0x1234_5678, 0x9abc_def0];
        let first = u32::MAX as u64 - 5; // crosses the 32-bit boundary of the block counter
        let mut out = vec![0u32; 4 * 37 + 2];
        fill_blocks(first, key, &mut out);
        for (i, &w) in out.iter().enumerate() {
            let b = first + (i / 4) as u64;
            assert_eq!(
                w,
                philox4x32_10([b as u32, (b >> 32) as u32, 0, 0], key)[i % 4]
            );
        }
    }
}
