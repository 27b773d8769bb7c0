//! Kernel benchmarks without Python: `cargo bench`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use foo_rs::kernels::binary::{binary, BinaryOp};
use foo_rs::kernels::core::copy::copy;
use foo_rs::kernels::core::gemm::{gemm_raw, Mat};
use foo_rs::kernels::core::parallel::SendPtr;
use foo_rs::kernels::fill::fill;
use foo_rs::kernels::random::{random, RandomOp};
use foo_rs::kernels::reduce::{reduce, ReduceOp};
use foo_rs::kernels::unary::{unary, UnaryOp};
use foo_rs::runtime::{pool, rng};
use foo_rs::tensor::{contiguous_strides, Scalar, Strides, TensorMut, TensorRef};
use foo_rs::DType;
use std::hint::black_box;

fn tmut(buf: &mut [f32], shape: &[usize], strides: impl Into<Strides>) -> TensorMut {
    TensorMut {
        ptr: buf.as_mut_ptr() as *mut u8,
        shape: shape.to_vec().into(),
        strides: strides.into(),
        dtype: DType::F32,
    }
}

fn bench_copy(c: &mut Criterion) {
    let mut g = c.benchmark_group("copy_f32");
    for n in [1usize << 10, 1 << 16, 1 << 20, 1 << 22] {
        let src = vec![1.0f32; n];
        let mut dst = vec![0.0f32; n];
        g.throughput(Throughput::Bytes((n * 8) as u64));
        g.bench_with_input(BenchmarkId::new("contiguous", n), &n, |b, _| {
            let s = TensorRef {
                ptr: src.as_ptr() as *const u8,
                shape: smallvec::smallvec![n],
                strides: smallvec::smallvec![1],
                dtype: DType::F32,
            };
            let d = tmut(&mut dst, &[n], vec![1]);
            b.iter(|| copy(black_box(&d), black_box(&s)).unwrap())
        });
        let side = (n as f64).sqrt() as usize;
        g.bench_with_input(BenchmarkId::new("transpose", side * side), &n, |b, _| {
            let s = TensorRef {
                ptr: src.as_ptr() as *const u8,
                shape: smallvec::smallvec![side, side],
                strides: smallvec::smallvec![1, side as isize],
                dtype: DType::F32,
            };
            let d = tmut(&mut dst, &[side, side], contiguous_strides(&[side, side]));
            b.iter(|| copy(black_box(&d), black_box(&s)).unwrap())
        });
    }
    g.finish();
}

fn bench_fill(c: &mut Criterion) {
    let mut g = c.benchmark_group("fill_f32");
    for n in [1usize << 10, 1 << 20] {
        let mut dst = vec![0.0f32; n];
        g.throughput(Throughput::Bytes((n * 4) as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            let d = tmut(&mut dst, &[n], vec![1]);
            b.iter(|| fill(black_box(&d), &Scalar::from_f64(3.0)).unwrap())
        });
    }
    g.finish();
}

fn tref(buf: &[f32], shape: &[usize]) -> TensorRef {
    TensorRef {
        ptr: buf.as_ptr() as *const u8,
        shape: shape.to_vec().into(),
        strides: contiguous_strides(shape),
        dtype: DType::F32,
    }
}

/// Element-wise math, add, sums and random fills on 1e6 f32 (the ops of issue 3/4's targets;
/// FOO_RS_NUM_THREADS sets the thread count).
fn bench_elementwise(c: &mut Criterion) {
    let n = 1_000_000usize;
    let a: Vec<f32> = (0..n).map(|i| (i % 1000) as f32 * 0.01 - 5.0).collect();
    let mut o = vec![0.0f32; n];
    let mut g = c.benchmark_group("elementwise_f32_1e6");
    g.throughput(Throughput::Elements(n as u64));
    for (name, op) in [
        ("exp", UnaryOp::Exp),
        ("tanh", UnaryOp::Tanh),
        ("sigmoid", UnaryOp::Sigmoid),
        ("sqrt", UnaryOp::Sqrt),
    ] {
        g.bench_function(name, |b| {
            let (om, ar) = (tmut(&mut o, &[n], vec![1]), tref(&a, &[n]));
            b.iter(|| unary(op, black_box(&om), black_box(&ar), &[]).unwrap())
        });
    }
    g.bench_function("add", |b| {
        let (om, ar) = (tmut(&mut o, &[n], vec![1]), tref(&a, &[n]));
        let alpha = [Scalar::from_f64(1.0)];
        b.iter(|| binary(BinaryOp::Add, black_box(&om), &ar, &ar, &alpha).unwrap())
    });
    g.finish();

    let mut g = c.benchmark_group("reduce_f32");
    g.throughput(Throughput::Elements(n as u64));
    let mut s = vec![0.0f32; 1000];
    for (name, out_shape) in [
        ("sum_all_1000x1000", [1, 1]),
        ("sum_dim-1_1000x1000", [1000, 1]),
        ("sum_dim0_1000x1000", [1, 1000]),
    ] {
        g.bench_function(name, |b| {
            let ar = tref(&a, &[1000, 1000]);
            // The output keeps the input's rank (size 1 along reduced dims).
            let om = TensorMut {
                ptr: s.as_mut_ptr() as *mut u8,
                shape: out_shape.to_vec().into(),
                strides: contiguous_strides(&out_shape),
                dtype: DType::F32,
            };
            b.iter(|| reduce(ReduceOp::Sum, black_box(&om), None, &ar, &[]).unwrap())
        });
    }
    g.finish();

    let mut g = c.benchmark_group("random_f32_1e6");
    g.throughput(Throughput::Elements(n as u64));
    let gen = rng::new_generator(0).unwrap();
    for (name, op) in [("uniform", RandomOp::Uniform), ("normal", RandomOp::Normal)] {
        g.bench_function(name, |b| {
            let om = tmut(&mut o, &[n], vec![1]);
            b.iter(|| random(op, black_box(&om), gen, &[]).unwrap())
        });
    }
    g.finish();
}

/// Square float32 products split two ways (FOO_RS_NUM_THREADS sets the thread count): "split",
/// one single-threaded `gemm` per block of the output from the calling thread (what every
/// product does), and "rayon", `gemm`'s own split on a rayon pool of as many threads (what
/// products of 2^27+ multiply-adds did until the split beat it on 2 and 16 threads).
fn bench_matmul(c: &mut Criterion) {
    let mut g = c.benchmark_group("mm_f32");
    g.sample_size(10);
    let rayon_pool = rayon::ThreadPoolBuilder::new()
        .num_threads(pool::num_threads())
        .build()
        .expect("a rayon pool");
    for n in [256usize, 512, 1024, 2048] {
        let a: Vec<f32> = (0..n * n).map(|i| (i % 17) as f32 * 0.1).collect();
        let mut o = vec![0.0f32; n * n];
        g.throughput(Throughput::Elements((n * n * n) as u64));
        for rayon in [false, true] {
            let label = if rayon { "rayon" } else { "split" };
            g.bench_with_input(BenchmarkId::new(label, n), &n, |b, _| {
                let (out, input) = (SendPtr::new(o.as_mut_ptr()), SendPtr::of(a.as_ptr()));
                b.iter(|| {
                    let product = || {
                        let dense = Mat {
                            ptr: input.get() as *const f32,
                            rs: n as isize,
                            cs: 1,
                        };
                        // SAFETY: `a` and `o` are live n x n row-major matrices, `o` written only
                        // here.
                        unsafe {
                            gemm_raw(
                                n,
                                n,
                                n,
                                out.get(),
                                n as isize,
                                1,
                                false,
                                dense,
                                dense,
                                1.0,
                                true,
                            )
                        }
                    };
                    match rayon {
                        true => rayon_pool.install(product),
                        false => product(),
                    }
                })
            });
        }
    }
    g.finish();
}

criterion_group!(
    benches,
    bench_copy,
    bench_fill,
    bench_elementwise,
    bench_matmul
);
criterion_main!(benches);
