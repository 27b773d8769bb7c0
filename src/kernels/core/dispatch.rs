//! The one dtype-dispatch facility: [`dispatch!`](crate::dispatch) runs a body with a type alias
//! bound to the Rust type of a dtype, for one of these element sets:
//!
//! | arm | dtypes | otherwise |
//! |---|---|---|
//! | `all` | every dtype foo supports | (none) |
//! | `float` | float32, float64, float16, bfloat16 | `_ => expr` |
//! | `int` | the eight integer types | `_ => expr` |
//! | `real` | `int`, `float` and bool (everything but complex) | `_ => expr` |
//! | `size` | by element size in bytes: `u8`, `u16`, `u32`, `u64`, [`B16`] | (none) |
//!
//! `size` is for pure data movement, which needs one instantiation per element size, not per
//! dtype. Each arm is one flat `match`: the body is instantiated once per type of the set.

/// A 16-byte element (complex128) for moves by size.
#[derive(Clone, Copy, Default, Debug, PartialEq)]
#[repr(C)]
pub struct B16(pub [u64; 2]);

/// Runs `$body` with `$T` bound to the Rust type of `$dtype` (see [`crate::kernels::core::dispatch`]
/// for the element sets):
///
/// ```ignore
/// dispatch!(all: t.dtype, T => fill_typed::<T>(t, v))
/// dispatch!(float: t.dtype, F => kernel::<F>(t), _ => not_implemented!("..."))
/// dispatch!(size: t.dtype.size(), T => move_typed::<T>(t))
/// ```
#[macro_export]
macro_rules! dispatch {
    (all: $dtype:expr, $T:ident => $body:expr) => {
        $crate::dispatch!(@match $dtype, $T => $body;
            U8: u8, I8: i8, I16: i16, I32: i32, I64: i64, U16: u16, U32: u32, U64: u64,
            F16: half::f16, BF16: half::bf16, F32: f32, F64: f64,
            C64: num_complex::Complex32, C128: num_complex::Complex64, Bool: bool;)
    };
    (float: $dtype:expr, $T:ident => $body:expr, _ => $other:expr) => {
        $crate::dispatch!(@match $dtype, $T => $body;
            F32: f32, F64: f64, F16: half::f16, BF16: half::bf16;
            _ => $other)
    };
    (int: $dtype:expr, $T:ident => $body:expr, _ => $other:expr) => {
        $crate::dispatch!(@match $dtype, $T => $body;
            U8: u8, I8: i8, I16: i16, I32: i32, I64: i64, U16: u16, U32: u32, U64: u64;
            _ => $other)
    };
    (real: $dtype:expr, $T:ident => $body:expr, _ => $other:expr) => {
        $crate::dispatch!(@match $dtype, $T => $body;
            U8: u8, I8: i8, I16: i16, I32: i32, I64: i64, U16: u16, U32: u32, U64: u64,
            F16: half::f16, BF16: half::bf16, F32: f32, F64: f64, Bool: bool;
            _ => $other)
    };
    (size: $size:expr, $T:ident => $body:expr) => {{
        match $size {
            1 => {
                type $T = u8;
                $body
            }
            2 => {
                type $T = u16;
                $body
            }
            4 => {
                type $T = u32;
                $body
            }
            8 => {
                type $T = u64;
                $body
            }
            _ => {
                type $T = $crate::kernels::core::dispatch::B16;
                $body
            }
        }
    }};
    (@match $dtype:expr, $T:ident => $body:expr; $($V:ident: $t:ty),+; $($other:tt)*) => {{
        match $dtype {
            $($crate::dtype::DType::$V => {
                type $T = $t;
                $body
            })+
            $($other)*
        }
    }};
}

#[cfg(test)]
mod tests {
    use crate::dtype::DType;
    use crate::kernels::core::element::Element;

    #[test]
    fn every_arm_binds_the_dtypes_type() {
        for dt in [DType::U8, DType::I64, DType::F16, DType::C128, DType::Bool] {
            assert_eq!(crate::dispatch!(all: dt, T => T::DTYPE), dt);
        }
        assert_eq!(
            crate::dispatch!(float: DType::BF16, F => F::DTYPE, _ => DType::Bool),
            DType::BF16
        );
        assert_eq!(
            crate::dispatch!(float: DType::I8, F => F::DTYPE, _ => DType::Bool),
            DType::Bool
        );
        assert_eq!(
            crate::dispatch!(int: DType::U32, I => I::DTYPE, _ => DType::Bool),
            DType::U32
        );
        assert_eq!(
            crate::dispatch!(int: DType::F32, I => I::DTYPE, _ => DType::U8),
            DType::U8
        );
        assert_eq!(
            crate::dispatch!(real: DType::Bool, R => R::DTYPE, _ => DType::U8),
            DType::Bool
        );
        assert_eq!(
            crate::dispatch!(real: DType::C64, R => R::DTYPE, _ => DType::U8),
            DType::U8
        );
        for (size, want) in [(1, 1), (2, 2), (4, 4), (8, 8), (16, 16)] {
            assert_eq!(
                crate::dispatch!(size: size, T => std::mem::size_of::<T>()),
                want
            );
        }
    }
}
