//! The elementwise engine: `out[i] = f(a[i], b[i], ...)` over broadcast-ready operands (same
//! shape as `out`, zero strides where broadcast). Dense operands take a slice loop that the
//! compiler vectorizes; anything else walks ndarray views (Zip). Both go parallel above GRAIN.

use super::element::Element;
use super::layout::{coalesce, view, view_mut, Layout, GRAIN};
use crate::error::{FooError, FooResult};
use crate::tensor::{TensorMut, TensorRef};
use ndarray::Zip;
use rayon::prelude::*;

fn check_operand<T: Element>(what: &str, dtype: crate::DType, shape: &[usize], out_shape: &[usize]) -> FooResult<()> {
    if dtype != T::DTYPE {
        return Err(FooError::Runtime(format!(
            "elementwise kernel: {what} has dtype {} but the kernel expects {}",
            dtype.name(),
            T::DTYPE.name()
        )));
    }
    if shape != out_shape {
        return Err(FooError::InvalidArgument(format!(
            "elementwise kernel: {what} shape {shape:?} differs from the output shape {out_shape:?}"
        )));
    }
    Ok(())
}

/// A dense slice of `n` elements when the operand walks memory contiguously (stride 1), or a
/// single broadcast value (stride 0) — the two flat cases the slice loop handles.
enum Flat<'a, T> {
    Dense(&'a [T]),
    Splat(T),
}

impl<T: Copy> Flat<'_, T> {
    #[inline(always)]
    fn get(&self, i: usize) -> T {
        match self {
            Flat::Dense(s) => s[i],
            Flat::Splat(v) => *v,
        }
    }
}

/// # Safety
/// `ptr` must address `n` readable elements when `stride == 1`, or one when `stride == 0`.
unsafe fn flat<'a, T: Copy>(ptr: *const u8, stride: isize, n: usize) -> Option<Flat<'a, T>> {
    match stride {
        // SAFETY: caller's contract.
        1 => Some(Flat::Dense(unsafe { std::slice::from_raw_parts(ptr as *const T, n) })),
        // SAFETY: caller's contract.
        0 => Some(Flat::Splat(unsafe { (ptr as *const T).read() })),
        _ => None,
    }
}

fn flat_layout<const N: usize>(l: &Layout<N>) -> bool {
    l.shape.len() == 1 && l.strides[0][0] == 1 && l.strides[1..].iter().all(|s| s[0] == 0 || s[0] == 1)
}

macro_rules! flat_loop {
    ($n:expr, $out:expr, |$i:ident| $value:expr) => {{
        let out: &mut [_] = $out;
        if $n < GRAIN {
            for ($i, o) in out.iter_mut().enumerate() {
                *o = $value;
            }
        } else {
            out.par_chunks_mut(GRAIN).enumerate().for_each(|(c, chunk)| {
                let base = c * GRAIN;
                for (k, o) in chunk.iter_mut().enumerate() {
                    let $i = base + k;
                    *o = $value;
                }
            });
        }
    }};
}

/// `out[i] = f(a[i])`.
pub fn map1<A: Element, O: Element>(out: &TensorMut, a: &TensorRef, f: impl Fn(A) -> O + Sync + Send) -> FooResult<()> {
    check_operand::<O>("output", out.dtype, &out.shape, &out.shape)?;
    check_operand::<A>("input", a.dtype, &a.shape, &out.shape)?;
    let n = out.numel();
    if n == 0 {
        return Ok(());
    }
    let l = coalesce(&out.shape, [&out.strides, &a.strides]);
    if flat_layout(&l) {
        // SAFETY: the layout is flat: `out` is dense and `a` dense or broadcast (checked above).
        let (o, fa) = unsafe { (std::slice::from_raw_parts_mut(out.ptr as *mut O, n), flat::<A>(a.ptr, l.strides[1][0], n).unwrap()) };
        match fa {
            Flat::Dense(s) => flat_loop!(n, o, |i| f(s[i])),
            Flat::Splat(v) => {
                let r = f(v);
                flat_loop!(n, o, |_i| r)
            }
        }
        return Ok(());
    }
    // SAFETY: descriptors of live tensors; `out` has no internal overlap (glue-checked).
    let (o, va) = unsafe { (view_mut(out.ptr as *mut O, &l.shape, &l.strides[0]), view(a.ptr as *const A, &l.shape, &l.strides[1])) };
    let z = Zip::from(o).and(va);
    if n < GRAIN {
        z.for_each(|o, &a| *o = f(a));
    } else {
        z.par_for_each(|o, &a| *o = f(a));
    }
    Ok(())
}

/// `out[i] = f(a[i], b[i])`.
pub fn map2<A: Element, B: Element, O: Element>(
    out: &TensorMut,
    a: &TensorRef,
    b: &TensorRef,
    f: impl Fn(A, B) -> O + Sync + Send,
) -> FooResult<()> {
    check_operand::<O>("output", out.dtype, &out.shape, &out.shape)?;
    check_operand::<A>("input 1", a.dtype, &a.shape, &out.shape)?;
    check_operand::<B>("input 2", b.dtype, &b.shape, &out.shape)?;
    let n = out.numel();
    if n == 0 {
        return Ok(());
    }
    let l = coalesce(&out.shape, [&out.strides, &a.strides, &b.strides]);
    if flat_layout(&l) {
        // SAFETY: flat layout (see map1).
        let (o, fa, fb) = unsafe {
            (
                std::slice::from_raw_parts_mut(out.ptr as *mut O, n),
                flat::<A>(a.ptr, l.strides[1][0], n).unwrap(),
                flat::<B>(b.ptr, l.strides[2][0], n).unwrap(),
            )
        };
        // Specialize the common shapes so the dense loops stay branch-free.
        match (fa, fb) {
            (Flat::Dense(x), Flat::Dense(y)) => flat_loop!(n, o, |i| f(x[i], y[i])),
            (Flat::Dense(x), Flat::Splat(y)) => flat_loop!(n, o, |i| f(x[i], y)),
            (Flat::Splat(x), Flat::Dense(y)) => flat_loop!(n, o, |i| f(x, y[i])),
            (Flat::Splat(x), Flat::Splat(y)) => {
                let r = f(x, y);
                flat_loop!(n, o, |_i| r)
            }
        }
        return Ok(());
    }
    // SAFETY: as in map1.
    let (o, va, vb) = unsafe {
        (
            view_mut(out.ptr as *mut O, &l.shape, &l.strides[0]),
            view(a.ptr as *const A, &l.shape, &l.strides[1]),
            view(b.ptr as *const B, &l.shape, &l.strides[2]),
        )
    };
    let z = Zip::from(o).and(va).and(vb);
    if n < GRAIN {
        z.for_each(|o, &a, &b| *o = f(a, b));
    } else {
        z.par_for_each(|o, &a, &b| *o = f(a, b));
    }
    Ok(())
}

/// `out[i] = f(a[i], b[i], c[i])`.
pub fn map3<A: Element, B: Element, C: Element, O: Element>(
    out: &TensorMut,
    a: &TensorRef,
    b: &TensorRef,
    c: &TensorRef,
    f: impl Fn(A, B, C) -> O + Sync + Send,
) -> FooResult<()> {
    check_operand::<O>("output", out.dtype, &out.shape, &out.shape)?;
    check_operand::<A>("input 1", a.dtype, &a.shape, &out.shape)?;
    check_operand::<B>("input 2", b.dtype, &b.shape, &out.shape)?;
    check_operand::<C>("input 3", c.dtype, &c.shape, &out.shape)?;
    let n = out.numel();
    if n == 0 {
        return Ok(());
    }
    let l = coalesce(&out.shape, [&out.strides, &a.strides, &b.strides, &c.strides]);
    if flat_layout(&l) {
        // SAFETY: flat layout (see map1).
        let (o, fa, fb, fc) = unsafe {
            (
                std::slice::from_raw_parts_mut(out.ptr as *mut O, n),
                flat::<A>(a.ptr, l.strides[1][0], n).unwrap(),
                flat::<B>(b.ptr, l.strides[2][0], n).unwrap(),
                flat::<C>(c.ptr, l.strides[3][0], n).unwrap(),
            )
        };
        flat_loop!(n, o, |i| f(fa.get(i), fb.get(i), fc.get(i)));
        return Ok(());
    }
    // SAFETY: as in map1.
    let (o, va, vb, vc) = unsafe {
        (
            view_mut(out.ptr as *mut O, &l.shape, &l.strides[0]),
            view(a.ptr as *const A, &l.shape, &l.strides[1]),
            view(b.ptr as *const B, &l.shape, &l.strides[2]),
            view(c.ptr as *const C, &l.shape, &l.strides[3]),
        )
    };
    let z = Zip::from(o).and(va).and(vb).and(vc);
    if n < GRAIN {
        z.for_each(|o, &a, &b, &c| *o = f(a, b, c));
    } else {
        z.par_for_each(|o, &a, &b, &c| *o = f(a, b, c));
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod testing {
    //! Owned test tensors for kernel unit tests.
    use crate::dtype::DType;
    use crate::kernels::element::Element;
    use crate::tensor::{contiguous_strides, TensorMut, TensorRef};

    pub struct Owned<T> {
        pub data: Vec<T>,
        pub shape: Vec<usize>,
    }

    impl<T: Element> Owned<T> {
        pub fn new(data: Vec<T>, shape: &[usize]) -> Self {
            assert_eq!(data.len(), shape.iter().product::<usize>());
            Owned { data, shape: shape.to_vec() }
        }
        pub fn zeros(shape: &[usize]) -> Self {
            Owned::new(vec![T::default(); shape.iter().product()], shape)
        }
        pub fn r(&self) -> TensorRef {
            TensorRef { ptr: self.data.as_ptr() as *const u8, shape: self.shape.clone(), strides: contiguous_strides(&self.shape), dtype: T::DTYPE }
        }
        /// A broadcast view of this tensor to `shape` (numpy rules, trailing alignment).
        pub fn bcast(&self, shape: &[usize]) -> TensorRef {
            let own = contiguous_strides(&self.shape);
            let off = shape.len() - self.shape.len();
            let strides = (0..shape.len())
                .map(|d| if d < off || self.shape[d - off] == 1 { 0 } else { own[d - off] })
                .collect();
            TensorRef { ptr: self.data.as_ptr() as *const u8, shape: shape.to_vec(), strides, dtype: T::DTYPE }
        }
        pub fn m(&mut self) -> TensorMut {
            TensorMut { ptr: self.data.as_mut_ptr() as *mut u8, shape: self.shape.clone(), strides: contiguous_strides(&self.shape), dtype: T::DTYPE }
        }
    }

    pub fn dtype_of<T: Element>() -> DType {
        T::DTYPE
    }
}

#[cfg(test)]
mod tests {
    use super::testing::Owned;
    use super::*;

    #[test]
    fn map2_broadcast_and_parallel() {
        let a = Owned::new((0..6).map(|x| x as f32).collect(), &[2, 3]);
        let b = Owned::new(vec![10.0f32, 20.0, 30.0], &[3]);
        let mut o = Owned::<f32>::zeros(&[2, 3]);
        map2(&o.m(), &a.r(), &b.bcast(&[2, 3]), |x: f32, y: f32| x + y).unwrap();
        assert_eq!(o.data, vec![10.0, 21.0, 32.0, 13.0, 24.0, 35.0]);

        let n = 2 * GRAIN + 3;
        let a = Owned::new((0..n).map(|x| x as f64).collect(), &[n]);
        let s = Owned::new(vec![2.0f64], &[1]);
        let mut o = Owned::<f64>::zeros(&[n]);
        map2(&o.m(), &a.r(), &s.bcast(&[n]), |x: f64, y: f64| x * y).unwrap();
        assert!(o.data.iter().enumerate().all(|(i, &v)| v == 2.0 * i as f64));
    }

    #[test]
    fn map1_strided_and_dtype_check() {
        // Column of a 3x2 matrix.
        let a = Owned::new(vec![1i32, 2, 3, 4, 5, 6], &[3, 2]);
        let col = TensorRef { ptr: a.data.as_ptr() as *const u8, shape: vec![3], strides: vec![2], dtype: DType::I32 };
        let mut o = Owned::<bool>::zeros(&[3]);
        map1(&o.m(), &col, |x: i32| x > 2).unwrap();
        assert_eq!(o.data, vec![false, true, true]);
        assert!(map1(&o.m(), &col, |x: f32| x > 2.0).is_err());
    }

    use crate::DType;
}
