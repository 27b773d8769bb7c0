//! The bfloat16 products of AVX512-BF16 CPUs, both routes (`Bf16Route`: the native kernel of
//! `core::gemm::bf16`, and the widening to float32 with its semantics), against an exact
//! reference: small-integer operands make every product
//! and partial sum exact in float32, so the only rounding is the final one to bfloat16 and the
//! result must match `half::bf16::from_f32` of the exact value bit for bit, whatever the
//! summation order. Random fractional operands check the tolerance of a realistic product.

use super::{bf16_product, matmul, Bf16Route};
use crate::kernels::core::gemm::bf16::available;
use crate::tensor::{Scalar, TensorMut, TensorRef};
use crate::DType;
use half::bf16;

/// How a logical `[B, R, C]` operand is laid out in memory.
#[derive(Clone, Copy, Debug)]
enum Layout {
    Dense,
    /// Each matrix stored transposed (column-major).
    Transposed,
    /// Every other column of a wider row-major buffer, rows padded.
    Strided,
    /// One matrix shared by every batch (batch stride 0).
    Broadcast,
}

struct Operand {
    data: Vec<bf16>,
    shape: [usize; 3],
    strides: [isize; 3],
}

impl Operand {
    fn new(vals: &[f64], shape: [usize; 3], how: Layout) -> Self {
        let [b, r, c] = shape;
        let (len, strides) = match how {
            Layout::Dense => (b * r * c, [(r * c) as isize, c as isize, 1]),
            Layout::Transposed => (b * r * c, [(r * c) as isize, 1, r as isize]),
            Layout::Strided => (
                b * r * (2 * c + 3),
                [(r * (2 * c + 3)) as isize, (2 * c + 3) as isize, 2],
            ),
            Layout::Broadcast => (r * c, [0, c as isize, 1]),
        };
        let mut data = vec![bf16::from_f32(-99.0); len.max(1)];
        for q in 0..b {
            for i in 0..r {
                for j in 0..c {
                    let at =
                        q as isize * strides[0] + i as isize * strides[1] + j as isize * strides[2];
                    let v = if matches!(how, Layout::Broadcast) {
                        vals[i * c + j]
                    } else {
                        vals[(q * r + i) * c + j]
                    };
                    data[at as usize] = bf16::from_f64(v);
                }
            }
        }
        Operand {
            data,
            shape,
            strides,
        }
    }
    fn r(&self) -> TensorRef {
        TensorRef {
            ptr: self.data.as_ptr() as *const u8,
            shape: self.shape.to_vec().into(),
            strides: self.strides.to_vec().into(),
            dtype: DType::BF16,
        }
    }
    fn m(&mut self) -> TensorMut {
        TensorMut {
            ptr: self.data.as_mut_ptr() as *mut u8,
            shape: self.shape.to_vec().into(),
            strides: self.strides.to_vec().into(),
            dtype: DType::BF16,
        }
    }
    fn get(&self, q: usize, i: usize, j: usize) -> f64 {
        let at = q as isize * self.strides[0]
            + i as isize * self.strides[1]
            + j as isize * self.strides[2];
        self.data[at as usize].to_f64()
    }
}

/// Small integers in -4..=4 (exact in bfloat16), deterministic.
fn ints(n: usize, seed: u64) -> Vec<f64> {
    (0..n)
        .map(|i| ((i as u64 * 2654435761 + seed * 97) % 9) as f64 - 4.0)
        .collect()
}

/// Fractions in (-1, 1), deterministic.
fn fracs(n: usize, seed: u64) -> Vec<f64> {
    crate::kernels::core::map::testing::uniform(n, seed, -1.0, 1.0)
}

/// `alpha * a @ b + beta * c` in f64 from the operands' stored (bfloat16) values.
fn reference(a: &Operand, b: &Operand, c: Option<&Operand>, alpha: f64, beta: f64) -> Vec<f64> {
    let ([bs, m, k], n) = (a.shape, b.shape[2]);
    let mut out = Vec::with_capacity(bs * m * n);
    for q in 0..bs {
        for i in 0..m {
            for j in 0..n {
                let dot: f64 = (0..k).map(|p| a.get(q, i, p) * b.get(q, p, j)).sum();
                out.push(alpha * dot + c.map_or(0.0, |c| beta * c.get(q, i, j)));
            }
        }
    }
    out
}

struct Case {
    dims: [usize; 4],
    la: Layout,
    lb: Layout,
    lo: Layout,
    bias: Option<Layout>,
    alpha: f64,
    beta: f64,
}

const ROUTES: [Bf16Route; 2] = [Bf16Route::Native, Bf16Route::ViaF32];

/// Runs one case by `route` and returns (got, want, |a|·|b| per output).
fn run(
    case: &Case,
    vals: fn(usize, u64) -> Vec<f64>,
    route: Bf16Route,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let [bs, m, k, n] = case.dims;
    let a = Operand::new(&vals(bs * m * k, 1), [bs, m, k], case.la);
    let b = Operand::new(&vals(bs * k * n, 2), [bs, k, n], case.lb);
    let c = case
        .bias
        .map(|l| Operand::new(&vals(bs * m * n, 3), [bs, m, n], l));
    let mut out = Operand::new(&vec![7.0; bs * m * n], [bs, m, n], case.lo);
    let want = reference(&a, &b, c.as_ref(), case.alpha, case.beta);
    let abs = |o: &Operand| Operand {
        data: o
            .data
            .iter()
            .map(|x| bf16::from_f32(x.to_f32().abs()))
            .collect(),
        ..*o
    };
    let mag = reference(&abs(&a), &abs(&b), None, 1.0, 0.0);
    let (alpha, beta) = (Scalar::from_f64(case.alpha), Scalar::from_f64(case.beta));
    bf16_product(
        &out.m(),
        &a.r(),
        &b.r(),
        c.as_ref().map(|c| c.r()).as_ref(),
        &beta,
        &alpha,
        route,
    )
    .unwrap();
    let got = (0..bs * m * n)
        .map(|x| out.get(x / (m * n), x / n % m, x % n))
        .collect();
    (got, want, mag)
}

const SIZES: [[usize; 4]; 10] = [
    [1, 1, 1, 1],
    [1, 7, 7, 7],
    [1, 1, 300, 1],
    [1, 33, 17, 65],
    [2, 257, 33, 129],
    [1, 13, 513, 70],
    [3, 100, 5, 300],
    [1, 200, 260, 130],
    [2, 97, 1, 64],
    [1, 6, 256, 64],
];

#[test]
fn bf16_gemm_exact_on_integers_all_layouts() {
    if !available() {
        return;
    }
    use Layout::*;
    for dims in SIZES {
        for (la, lb, lo, bias) in [
            (Dense, Dense, Dense, None),
            (Transposed, Transposed, Dense, Some(Dense)),
            (Strided, Transposed, Transposed, Some(Broadcast)),
            (Broadcast, Strided, Dense, Some(Transposed)),
            (Dense, Broadcast, Strided, None),
        ] {
            for (alpha, beta) in [(1.0, 1.0), (0.5, 2.0), (-1.0, 0.0)] {
                let case = Case {
                    dims,
                    la,
                    lb,
                    lo,
                    bias,
                    alpha,
                    beta,
                };
                for route in ROUTES {
                    let (got, want, _) = run(&case, ints, route);
                    for (x, (&g, &w)) in got.iter().zip(&want).enumerate() {
                        let w = bf16::from_f32(w as f32).to_bits();
                        // Compared as values: the sign of a zero may differ (-1 * 0 + 0).
                        assert_eq!(
                            g,
                            bf16::from_bits(w).to_f64(),
                            "{route:?} {dims:?} {la:?} {lb:?} {lo:?} {bias:?} a={alpha} b={beta} \
                             at {x}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn bf16_gemm_fractions_within_one_rounding() {
    if !available() {
        return;
    }
    for dims in SIZES {
        let case = Case {
            dims,
            la: Layout::Dense,
            lb: Layout::Transposed,
            lo: Layout::Dense,
            bias: Some(Layout::Dense),
            alpha: 0.75,
            beta: -1.5,
        };
        for route in ROUTES {
            let (got, want, mag) = run(&case, fracs, route);
            for (x, ((&g, &w), &s)) in got.iter().zip(&want).zip(&mag).enumerate() {
                // One bfloat16 rounding of the result plus float32 accumulation error.
                let tol = w.abs() * 2f64.powi(-8) + (0.75 * s + 1.5) * 1e-6;
                assert!(
                    (g - w).abs() <= tol,
                    "{route:?} {dims:?} at {x}: {g} vs {w}"
                );
            }
        }
    }
}

#[test]
fn bf16_gemm_k_zero_in_place_and_beta_zero_ignores_nan() {
    if !available() {
        return;
    }
    let (a, b) = (
        Operand::new(&[], [1, 3, 0], Layout::Dense),
        Operand::new(&[], [1, 0, 5], Layout::Dense),
    );
    let c = Operand::new(&[1.0; 15], [1, 3, 5], Layout::Dense);
    let mut out = Operand::new(&[9.0; 15], [1, 3, 5], Layout::Dense);
    let s = Scalar::from_f64;
    matmul(&out.m(), &a.r(), &b.r(), Some(&c.r()), &s(3.0), &s(1.0)).unwrap();
    assert!(out.data.iter().all(|x| x.to_f32() == 3.0));
    matmul(&out.m(), &a.r(), &b.r(), None, &s(1.0), &s(1.0)).unwrap();
    assert!(out.data.iter().all(|x| x.to_f32() == 0.0));

    // In place: c is the output (addmm_).
    let (a, b) = (
        Operand::new(&ints(40, 1), [1, 8, 5], Layout::Dense),
        Operand::new(&ints(35, 2), [1, 5, 7], Layout::Dense),
    );
    let mut out = Operand::new(&ints(56, 3), [1, 8, 7], Layout::Dense);
    let want = reference(&a, &b, Some(&out), 1.0, 2.0);
    let view = out.r();
    matmul(&out.m(), &a.r(), &b.r(), Some(&view), &s(2.0), &s(1.0)).unwrap();
    for (g, w) in out.data.iter().zip(&want) {
        assert_eq!(g.to_bits(), bf16::from_f32(*w as f32).to_bits());
    }

    let nan = Operand::new(&[f64::NAN; 56], [1, 8, 7], Layout::Dense);
    matmul(&out.m(), &a.r(), &b.r(), Some(&nan.r()), &s(0.0), &s(1.0)).unwrap();
    assert!(out.data.iter().all(|x| !x.is_nan()));
}

/// Both routes read subnormal operands as zero (inf * 1e-40 is nan) and flush subnormal
/// results (1e-20 * 1e-20 is 0), as `vdpbf16ps` does, at any size.
#[test]
fn bf16_routes_share_the_instructions_subnormal_semantics() {
    if !available() {
        return;
    }
    let s = Scalar::from_f64;
    for route in ROUTES {
        for (x, y, want_nan, want_zero) in [
            (f64::INFINITY, 9.18e-41, true, false),
            (1e-20, 1e-20, false, true),
            (3.0, 2.0, false, false),
        ] {
            let mut va = ints(33 * 40, 1);
            let mut vb = vec![0.0; 40 * 17];
            va[0] = x;
            vb[0] = y;
            let a = Operand::new(&va, [1, 33, 40], Layout::Dense);
            let b = Operand::new(&vb, [1, 40, 17], Layout::Transposed);
            let mut out = Operand::new(&vec![7.0; 33 * 17], [1, 33, 17], Layout::Dense);
            bf16_product(&out.m(), &a.r(), &b.r(), None, &s(0.0), &s(1.0), route).unwrap();
            let v = out.get(0, 0, 0);
            assert_eq!(v.is_nan(), want_nan, "{route:?} {x} * {y} = {v}");
            assert_eq!(v == 0.0, want_zero, "{route:?} {x} * {y} = {v}");
        }
    }
}
