//! Strided copy with dtype conversion: the kernel behind `_copy_from` (CPU <-> foo, foo <-> foo,
//! any dtype pair, broadcast sources, non-contiguous sources and destinations).

use super::element::Element;
use super::layout::{coalesce, Layout, GRAIN};
use super::map::map1;
use super::parallel::{parallel_for, SendPtr};
use super::reduced::dense_convert;
use crate::error::FooResult;
use crate::invalid_arg;
use crate::tensor::{TensorMut, TensorRef};

/// `dst[i] = cast(src[i])` for every index. Shapes must match (the glue expands `src` first);
/// `dst` must not overlap itself or `src` (the glue stages overlapping copies).
pub fn copy(dst: &TensorMut, src: &TensorRef) -> FooResult<()> {
    if dst.shape != src.shape {
        return invalid_arg!(
            "copy: destination shape {:?} does not match source shape {:?}",
            dst.shape,
            src.shape
        );
    }
    if dst.numel() == 0 {
        return Ok(());
    }
    let layout = coalesce(&dst.shape, [&dst.strides, &src.strides]);
    let nd = layout.shape.len();
    let inner_dense = nd == 0 || (layout.strides[0][nd - 1] == 1 && layout.strides[1][nd - 1] == 1);
    if dst.dtype == src.dtype {
        let size = dst.dtype.size();
        if layout.is_flat_contiguous() {
            copy_bytes(dst.ptr, src.ptr, layout.numel() * size);
            return Ok(());
        }
        if inner_dense {
            dense_runs(&layout, dst.ptr, src.ptr, [size, size], &|d, s, len| {
                // SAFETY: `dense_runs` passes a run of `len` elements inside each operand; the
                // glue keeps `dst` from overlapping itself or `src`.
                unsafe { std::ptr::copy_nonoverlapping(s, d, len * size) }
            });
            return Ok(());
        }
        // Same dtype, strided: move bits by element size (one instantiation per size, not per dtype).
        let (mut d, mut s) = (dst.clone(), src.clone());
        let (dt, st) = match dst.dtype.size() {
            1 => (crate::DType::U8, crate::DType::U8),
            2 => (crate::DType::U16, crate::DType::U16),
            4 => (crate::DType::U32, crate::DType::U32),
            8 => (crate::DType::U64, crate::DType::U64),
            _ => (crate::DType::C128, crate::DType::C128),
        };
        d.dtype = dt;
        s.dtype = st;
        return crate::dispatch!(all: dt, T => map1(&d, &s, move |x: T| x));
    }
    if let Some(convert) = dense_convert(dst.dtype, src.dtype).filter(|_| inner_dense) {
        let sizes = [dst.dtype.size(), src.dtype.size()];
        dense_runs(&layout, dst.ptr, src.ptr, sizes, &|d, s, len| {
            // SAFETY: as for the same-dtype runs above.
            unsafe { convert(d, s, len) }
        });
        return Ok(());
    }
    crate::dispatch!(all: dst.dtype, D => crate::dispatch!(all: src.dtype, S => map1(dst, src, move |x: S| x.cast::<D>())))
}

/// Elements of one piece of a long run in [`dense_runs`]: a whole contiguous tensor is one run,
/// and it still splits over the threads.
const PIECE: usize = 1 << 14;

/// Calls `run(dst, src, len)` over the dense innermost runs of a layout whose innermost stride
/// is 1 in both operands (the rows of `x.permute(0, 2, 1, 3).contiguous()`, or one long run),
/// in parallel; `sizes` are the operands' element sizes in bytes. Rows go one call each (the
/// element-wise map paid a dynamic call and an offset computation per element: 55 us for 2080
/// rows of 16 floats where the CPU takes 6); runs longer than [`PIECE`] are cut into pieces.
fn dense_runs(
    l: &Layout<2>,
    dst: *mut u8,
    src: *const u8,
    sizes: [usize; 2],
    run: &(dyn Fn(*mut u8, *const u8, usize) + Sync),
) {
    let nd = l.shape.len();
    let (len, outer) = match nd {
        0 => (1, &[][..]),
        _ => (l.shape[nd - 1], &l.shape[..nd - 1]),
    };
    let rows: usize = outer.iter().product();
    let piece = len.clamp(1, PIECE);
    let pieces = len.div_ceil(piece);
    let (d, s) = (SendPtr::new(dst), SendPtr::of(src));
    parallel_for(rows * pieces, (GRAIN / piece).max(1), &|i0, i1| {
        let mut idx = vec![0usize; outer.len()];
        let mut rem = i0 / pieces;
        for k in (0..outer.len()).rev() {
            idx[k] = rem % outer[k];
            rem /= outer[k];
        }
        let offset = |k: usize| -> isize {
            idx.iter()
                .zip(&l.strides[k])
                .map(|(&i, &st)| i as isize * st)
                .sum()
        };
        let (mut od, mut os) = (offset(0), offset(1));
        let mut p = i0 % pieces;
        for _ in i0..i1 {
            let start = (p * piece) as isize;
            let n = piece.min(len - p * piece);
            run(
                d.at((od + start) * sizes[0] as isize),
                s.at((os + start) * sizes[1] as isize),
                n,
            );
            p += 1;
            if p < pieces {
                continue;
            }
            p = 0;
            // Next row: bump the innermost outer index, carrying into the ones above it.
            for k in (0..outer.len()).rev() {
                idx[k] += 1;
                od += l.strides[0][k];
                os += l.strides[1][k];
                if idx[k] < outer[k] {
                    break;
                }
                od -= l.strides[0][k] * outer[k] as isize;
                os -= l.strides[1][k] * outer[k] as isize;
                idx[k] = 0;
            }
        }
    });
}

/// Parallel memcpy of `n` bytes.
pub fn copy_bytes(dst: *mut u8, src: *const u8, n: usize) {
    let (d, s) = (SendPtr::new(dst), SendPtr::of(src));
    parallel_for(n, 16 * GRAIN, &|start, end| {
        // SAFETY: callers pass non-overlapping regions of at least n bytes; ranges are disjoint.
        unsafe {
            std::ptr::copy_nonoverlapping(s.at(start as isize), d.at(start as isize), end - start)
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::tensor::contiguous_strides;

    fn tref<T>(data: &[T], shape: &[usize], strides: &[isize], dtype: DType) -> TensorRef {
        TensorRef {
            ptr: data.as_ptr() as *const u8,
            shape: shape.to_vec().into(),
            strides: strides.to_vec().into(),
            dtype,
        }
    }
    fn tmut<T>(data: &mut [T], shape: &[usize], dtype: DType) -> TensorMut {
        TensorMut {
            ptr: data.as_mut_ptr() as *mut u8,
            shape: shape.to_vec().into(),
            strides: contiguous_strides(shape),
            dtype,
        }
    }

    #[test]
    fn transposed_convert() {
        let src: Vec<f32> = (0..6).map(|x| x as f32 + 0.5).collect();
        let mut dst = vec![0i64; 6];
        copy(
            &tmut(&mut dst, &[3, 2], DType::I64),
            &tref(&src, &[3, 2], &[1, 3], DType::F32),
        )
        .unwrap();
        assert_eq!(dst, vec![0, 3, 1, 4, 2, 5]);
    }

    #[test]
    fn permuted_rows_are_copied_whole() {
        // [2, 3, 4, 5] read as permute(0, 2, 1, 3): rows of 5 stay dense, the outer index runs
        // over three dims, across chunk boundaries when parallel.
        let (a, b, c, e) = (2usize, 3usize, 4usize, 5usize);
        let src: Vec<u32> = (0..(a * b * c * e) as u32).collect();
        let mut dst = vec![0u32; src.len()];
        let strides = [(b * c * e) as isize, e as isize, (c * e) as isize, 1];
        copy(
            &tmut(&mut dst, &[a, c, b, e], DType::U32),
            &tref(&src, &[a, c, b, e], &strides, DType::U32),
        )
        .unwrap();
        let mut want = Vec::new();
        for i in 0..a {
            for k in 0..c {
                for j in 0..b {
                    for l in 0..e {
                        want.push(src[((i * b + j) * c + k) * e + l]);
                    }
                }
            }
        }
        assert_eq!(dst, want);
    }

    #[test]
    fn broadcast_source() {
        let src = [1u8, 2, 3];
        let mut dst = vec![0u8; 6];
        copy(
            &tmut(&mut dst, &[2, 3], DType::U8),
            &tref(&src, &[2, 3], &[0, 1], DType::U8),
        )
        .unwrap();
        assert_eq!(dst, vec![1, 2, 3, 1, 2, 3]);
    }

    #[test]
    fn strided_same_dtype_moves_bits() {
        let src = [1.5f64, -2.0, f64::NAN, 4.0];
        let mut dst = vec![0f64; 2];
        copy(
            &tmut(&mut dst, &[2], DType::F64),
            &tref(&src, &[2], &[2], DType::F64),
        )
        .unwrap();
        assert_eq!(dst[0], 1.5);
        assert!(dst[1].is_nan());
    }

    #[test]
    fn large_parallel_and_reversed() {
        let n = 3 * GRAIN + 7;
        let src: Vec<f64> = (0..n).map(|x| x as f64).collect();
        let mut dst = vec![0f64; n];
        copy(
            &tmut(&mut dst, &[n], DType::F64),
            &tref(&src, &[n], &[1], DType::F64),
        )
        .unwrap();
        assert_eq!(dst, src);
        let mut dst32 = vec![0f32; n];
        let rev = TensorRef {
            ptr: src[n - 1..].as_ptr() as *const u8,
            shape: smallvec::smallvec![n],
            strides: smallvec::smallvec![-1],
            dtype: DType::F64,
        };
        copy(&tmut(&mut dst32, &[n], DType::F32), &rev).unwrap();
        assert_eq!(dst32[0], (n - 1) as f32);
        assert_eq!(dst32[n - 1], 0.0);
    }

    /// The dense-run conversions give the element-wise cast's values (and nan as the CPU's
    /// copy gives it, whatever the payload), in one long run cut into pieces and in permuted
    /// rows.
    #[test]
    fn float_conversions_match_the_elementwise_cast() {
        use half::{bf16, f16};
        let mut vals = vec![
            0.0f32,
            -0.0,
            1.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -f32::NAN,
            f32::MAX,
            f32::MIN_POSITIVE,
            1e-40,
            -3e-42,
            65504.0,
            65520.0,
            6e-8,
            f32::from_bits(0x3f80_8000), // a bfloat16 tie: rounds to even (down)
            f32::from_bits(0x3f81_8000), // a tie that rounds up
            f32::from_bits(0x7f7f_ffff),
        ];
        let n = 2 * PIECE + 5;
        vals.extend((vals.len()..n).map(|i| (i as f32 - 7e3) * 1.37e-3 * (i % 13) as f32));
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        let f32_layouts: [(&[usize], &[isize]); 2] = [
            (&[n], &[1]),
            (
                &[5, 3, PIECE / 8],
                &[PIECE as isize / 8, 5 * PIECE as isize / 8, 1],
            ),
        ];
        for (shape, strides) in f32_layouts {
            let m: usize = shape.iter().product();
            let src = tref(&vals, shape, strides, DType::F32);
            let mut b = vec![bf16::ZERO; m];
            let mut h = vec![f16::ZERO; m];
            copy(&tmut(&mut b, shape, DType::BF16), &src).unwrap();
            copy(&tmut(&mut h, shape, DType::F16), &src).unwrap();
            let mut logical = vec![0f32; m];
            copy(&tmut(&mut logical, shape, DType::F32), &src).unwrap();
            for (i, &v) in logical.iter().enumerate() {
                let want_b: bf16 = v.cast();
                assert!(
                    same(b[i].to_f32(), want_b.to_f32()),
                    "bf16 of {v:e}: {:?}",
                    b[i]
                );
                if v.is_nan() {
                    assert_eq!(b[i].to_bits(), 0xffff);
                }
                let want_h: f16 = v.cast();
                assert!(
                    same(h[i].to_f32(), want_h.to_f32()),
                    "f16 of {v:e}: {:?}",
                    h[i]
                );
            }
            // And back: every bfloat16 and float16 value widens exactly.
            let mut wb = vec![0f32; m];
            let mut wh = vec![0f32; m];
            copy(
                &tmut(&mut wb, shape, DType::F32),
                &tref(&b, shape, &contiguous_strides(shape), DType::BF16),
            )
            .unwrap();
            copy(
                &tmut(&mut wh, shape, DType::F32),
                &tref(&h, shape, &contiguous_strides(shape), DType::F16),
            )
            .unwrap();
            for i in 0..m {
                assert!(
                    same(wb[i], b[i].to_f32()) && same(wh[i], h[i].to_f32()),
                    "{i}"
                );
            }
        }
    }

    #[test]
    fn mismatched_shapes_error() {
        let src = [1u8, 2, 3];
        let mut dst = vec![0u8; 2];
        assert!(copy(
            &tmut(&mut dst, &[2], DType::U8),
            &tref(&src, &[3], &[1], DType::U8)
        )
        .is_err());
    }
}

#[cfg(test)]
mod regression {
    use super::*;
    use crate::dtype::DType;

    #[test]
    fn expanded_source_rows() {
        let src: Vec<f32> = (0..7).map(|x| x as f32).collect();
        let mut dst = vec![0f32; 42];
        let d = TensorMut {
            ptr: dst.as_mut_ptr() as *mut u8,
            shape: smallvec::smallvec![6, 7],
            strides: smallvec::smallvec![7, 1],
            dtype: DType::F32,
        };
        let s = TensorRef {
            ptr: src.as_ptr() as *const u8,
            shape: smallvec::smallvec![6, 7],
            strides: smallvec::smallvec![0, 1],
            dtype: DType::F32,
        };
        copy(&d, &s).unwrap();
        assert_eq!(&dst[35..], &src[..]);
    }
}
