//! The epilogue: a row of float32 accumulators becomes `alpha * acc + beta * c`, rounded once
//! to bfloat16 with round-to-nearest-even (bit-identical to `half::bf16::from_f32`).

pub use crate::kernels::core::reduced::{bf16_bits as to_bf16, bf16_from_bits as from_bf16};

/// Writes `alpha * acc[j] (+ beta * c[j * c_cs])` to `out[j * out_cs]` for `j < acc.len()`.
/// `c` may be the output itself (in-place addmm_): each element is read before it is written.
///
/// # Safety
/// `out` must be writable and `c` readable at those offsets; the CPU must support AVX512F/BW
/// (the loops are compiled for it, so they vectorize).
#[target_feature(enable = "avx512f,avx512bw")]
pub unsafe fn row(
    acc: &[f32],
    out: *mut u16,
    out_cs: isize,
    c: Option<(*const u16, isize)>,
    alpha: f32,
    beta: f32,
) {
    let o = |j: usize| out.wrapping_offset(j as isize * out_cs);
    match c {
        None if out_cs == 1 => {
            for (j, &x) in acc.iter().enumerate() {
                // SAFETY: element j of the output row (caller's contract).
                unsafe { *out.add(j) = to_bf16(alpha * x) };
            }
        }
        None => {
            for (j, &x) in acc.iter().enumerate() {
                // SAFETY: as above.
                unsafe { *o(j) = to_bf16(alpha * x) };
            }
        }
        Some((c, 1)) if out_cs == 1 => {
            for (j, &x) in acc.iter().enumerate() {
                // SAFETY: element j of the output row and of `c`'s row (caller's contract).
                unsafe { *out.add(j) = to_bf16(alpha * x + beta * from_bf16(*c.add(j))) };
            }
        }
        Some((c, c_cs)) => {
            for (j, &x) in acc.iter().enumerate() {
                let cj = c.wrapping_offset(j as isize * c_cs);
                // SAFETY: as above.
                unsafe { *o(j) = to_bf16(alpha * x + beta * from_bf16(*cj)) };
            }
        }
    }
}
