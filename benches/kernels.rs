//! Kernel benchmarks without Python: `cargo bench`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use foo_rs::kernels::{copy::copy, fill::fill};
use foo_rs::tensor::{contiguous_strides, Scalar, TensorMut, TensorRef};
use foo_rs::DType;
use std::hint::black_box;

fn tmut(buf: &mut [f32], shape: &[usize], strides: Vec<isize>) -> TensorMut {
    TensorMut {
        ptr: buf.as_mut_ptr() as *mut u8,
        shape: shape.to_vec(),
        strides,
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
                shape: vec![n],
                strides: vec![1],
                dtype: DType::F32,
            };
            let d = tmut(&mut dst, &[n], vec![1]);
            b.iter(|| copy(black_box(&d), black_box(&s)).unwrap())
        });
        let side = (n as f64).sqrt() as usize;
        g.bench_with_input(BenchmarkId::new("transpose", side * side), &n, |b, _| {
            let s = TensorRef {
                ptr: src.as_ptr() as *const u8,
                shape: vec![side, side],
                strides: vec![1, side as isize],
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

criterion_group!(benches, bench_copy, bench_fill);
criterion_main!(benches);
