//! `Element`: what a kernel needs to know about a dtype's Rust type, and value conversion
//! between dtypes with c10's `static_cast` semantics (complex -> real keeps the real part,
//! anything -> bool is `!= 0`, float -> integer truncates toward zero).

use crate::dtype::{DType, Kind};
use crate::tensor::Scalar;
use half::{bf16, f16};
use num_complex::{Complex32, Complex64};

pub trait Element: Copy + Send + Sync + Default + PartialEq + std::fmt::Debug + 'static {
    const DTYPE: DType;
    const KIND: Kind;

    fn to_f64(self) -> f64;
    fn to_i64(self) -> i64;
    fn to_u64(self) -> u64;
    fn to_bool(self) -> bool;
    fn to_c64(self) -> Complex64;
    fn from_f64(v: f64) -> Self;
    fn from_i64(v: i64) -> Self;
    fn from_u64(v: u64) -> Self;
    fn from_bool(v: bool) -> Self;
    fn from_c64(v: Complex64) -> Self;

    /// Converts to another element type the way `c10::convert<D>(self)` does.
    #[inline(always)]
    fn cast<D: Element>(self) -> D {
        // The match is on associated consts, so each monomorphization keeps one arm.
        match (Self::KIND, D::KIND) {
            (_, Kind::Bool) => D::from_bool(self.to_bool()),
            (Kind::Complex, _) | (_, Kind::Complex) => D::from_c64(self.to_c64()),
            (Kind::Float, _) => D::from_f64(self.to_f64()),
            (Kind::Unsigned, _) => D::from_u64(self.to_u64()),
            (Kind::Signed | Kind::Bool, _) => D::from_i64(self.to_i64()),
        }
    }

    /// The value of a C-ABI scalar in this type.
    fn from_scalar(s: &Scalar) -> Self {
        match s.tag {
            Scalar::TAG_BOOL => Self::from_bool(s.i != 0),
            Scalar::TAG_INT => Self::from_i64(s.i),
            Scalar::TAG_UINT => Self::from_u64(s.i as u64),
            Scalar::TAG_COMPLEX => Self::from_c64(Complex64::new(s.f, s.imag)),
            _ => Self::from_f64(s.f),
        }
    }

    /// This value as a C-ABI scalar of the matching kind.
    fn to_scalar(self) -> Scalar {
        match Self::KIND {
            Kind::Bool => Scalar::from_bool(self.to_bool()),
            Kind::Signed => Scalar::from_i64(self.to_i64()),
            Kind::Unsigned => Scalar::from_u64(self.to_u64()),
            Kind::Float => Scalar::from_f64(self.to_f64()),
            Kind::Complex => {
                let c = self.to_c64();
                Scalar::from_complex(c.re, c.im)
            }
        }
    }
}

/// 2^63 (exact in f64).
const TWO_63: f64 = 9_223_372_036_854_775_808.0;

/// `(int64_t)v` as x86-64 computes it (cvttsd2si): truncation toward zero, and the "integer
/// indefinite" value i64::MIN for nan and out-of-range values (Rust's `as` saturates instead).
#[inline(always)]
fn trunc_i64_x86(v: f64) -> i64 {
    if (-TWO_63..TWO_63).contains(&v) {
        v as i64
    } else {
        i64::MIN
    }
}

/// `(int32_t)v` as x86-64 computes it (cvttss2si/cvttsd2si 32-bit): i32::MIN when out of range.
#[inline(always)]
fn trunc_i32_x86(v: f64) -> i64 {
    if v > -2_147_483_649.0 && v < 2_147_483_648.0 {
        v as i64
    } else {
        i32::MIN as i64
    }
}

/// `(uint64_t)v` as compilers emit it on x86-64: values from 2^63 up go through v - 2^63.
#[inline(always)]
fn trunc_u64_x86(v: f64) -> i64 {
    if (TWO_63..2.0 * TWO_63).contains(&v) {
        ((v - TWO_63) as i64) ^ i64::MIN
    } else {
        trunc_i64_x86(v)
    }
}

// Float -> integer conversions follow what the CPU backend's C++ casts give on x86-64, nan and
// out-of-range values included: int8/int16/int32 through a 32-bit conversion, uint8 through
// int64 (c10's static_cast_with_inter_type), the others through 64-bit conversions, then the low
// bits (C's narrowing wrap).
macro_rules! int_element {
    ($t:ty, $dtype:expr, $kind:expr, $trunc:ident) => {
        impl Element for $t {
            const DTYPE: DType = $dtype;
            const KIND: Kind = $kind;
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn to_i64(self) -> i64 {
                self as i64
            }
            #[inline(always)]
            fn to_u64(self) -> u64 {
                self as u64
            }
            #[inline(always)]
            fn to_bool(self) -> bool {
                self != 0
            }
            #[inline(always)]
            fn to_c64(self) -> Complex64 {
                Complex64::new(self as f64, 0.0)
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                // Truncate toward zero as x86 does, then wrap like a C narrowing conversion.
                $trunc(v) as $t
            }
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_u64(v: u64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_bool(v: bool) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_c64(v: Complex64) -> Self {
                Self::from_f64(v.re)
            }
        }
    };
}

int_element!(u8, DType::U8, Kind::Unsigned, trunc_i64_x86);
int_element!(u16, DType::U16, Kind::Unsigned, trunc_i64_x86);
int_element!(u32, DType::U32, Kind::Unsigned, trunc_i64_x86);
int_element!(u64, DType::U64, Kind::Unsigned, trunc_u64_x86);
int_element!(i8, DType::I8, Kind::Signed, trunc_i32_x86);
int_element!(i16, DType::I16, Kind::Signed, trunc_i32_x86);
int_element!(i32, DType::I32, Kind::Signed, trunc_i32_x86);
int_element!(i64, DType::I64, Kind::Signed, trunc_i64_x86);

macro_rules! float_element {
    ($t:ty, $dtype:expr, $from_f64:expr, $to_f64:expr, $from_f32:expr) => {
        impl Element for $t {
            const DTYPE: DType = $dtype;
            const KIND: Kind = Kind::Float;
            #[inline(always)]
            fn to_f64(self) -> f64 {
                $to_f64(self)
            }
            #[inline(always)]
            fn to_i64(self) -> i64 {
                $to_f64(self) as i64
            }
            #[inline(always)]
            fn to_u64(self) -> u64 {
                $to_f64(self) as i64 as u64
            }
            #[inline(always)]
            fn to_bool(self) -> bool {
                $to_f64(self) != 0.0
            }
            #[inline(always)]
            fn to_c64(self) -> Complex64 {
                Complex64::new($to_f64(self), 0.0)
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                $from_f64(v)
            }
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                // One rounding step from the integer, as static_cast does.
                $from_f32(v as f32, v as f64)
            }
            #[inline(always)]
            fn from_u64(v: u64) -> Self {
                $from_f32(v as f32, v as f64)
            }
            #[inline(always)]
            fn from_bool(v: bool) -> Self {
                $from_f64(v as u8 as f64)
            }
            #[inline(always)]
            fn from_c64(v: Complex64) -> Self {
                $from_f64(v.re)
            }
        }
    };
}

float_element!(f64, DType::F64, |v: f64| v, |v: f64| v, |_f: f32, d: f64| d);
float_element!(
    f32,
    DType::F32,
    |v: f64| v as f32,
    |v: f32| v as f64,
    |f: f32, _d: f64| f
);
// c10's Half and BFloat16 are built from a float only, so a double or an integer is rounded to
// float first, then to 16 bits. (`half`'s own `from_f64` drops the double's low mantissa bits
// before rounding, so a float just above a rounding tie came out rounded down: 192.50006 became
// 192 in bfloat16 where the CPU gives 193.)
float_element!(
    f16,
    DType::F16,
    |v: f64| f16::from_f32(v as f32),
    f16::to_f64,
    |f: f32, _d: f64| f16::from_f32(f)
);
float_element!(
    bf16,
    DType::BF16,
    |v: f64| bf16::from_f32(v as f32),
    bf16::to_f64,
    |f: f32, _d: f64| bf16::from_f32(f)
);

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    const KIND: Kind = Kind::Bool;
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
    #[inline(always)]
    fn to_i64(self) -> i64 {
        self as i64
    }
    #[inline(always)]
    fn to_u64(self) -> u64 {
        self as u64
    }
    #[inline(always)]
    fn to_bool(self) -> bool {
        self
    }
    #[inline(always)]
    fn to_c64(self) -> Complex64 {
        Complex64::new(self as u8 as f64, 0.0)
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v != 0.0
    }
    #[inline(always)]
    fn from_i64(v: i64) -> Self {
        v != 0
    }
    #[inline(always)]
    fn from_u64(v: u64) -> Self {
        v != 0
    }
    #[inline(always)]
    fn from_bool(v: bool) -> Self {
        v
    }
    #[inline(always)]
    fn from_c64(v: Complex64) -> Self {
        v.re != 0.0 || v.im != 0.0
    }
}

macro_rules! complex_element {
    ($t:ty, $dtype:expr, $real:ty) => {
        impl Element for $t {
            const DTYPE: DType = $dtype;
            const KIND: Kind = Kind::Complex;
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self.re as f64
            }
            #[inline(always)]
            fn to_i64(self) -> i64 {
                self.re as i64
            }
            #[inline(always)]
            fn to_u64(self) -> u64 {
                self.re as i64 as u64
            }
            #[inline(always)]
            fn to_bool(self) -> bool {
                self.re != 0.0 || self.im != 0.0
            }
            #[inline(always)]
            fn to_c64(self) -> Complex64 {
                Complex64::new(self.re as f64, self.im as f64)
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                <$t>::new(v as $real, 0.0)
            }
            #[inline(always)]
            fn from_i64(v: i64) -> Self {
                <$t>::new(v as $real, 0.0)
            }
            #[inline(always)]
            fn from_u64(v: u64) -> Self {
                <$t>::new(v as $real, 0.0)
            }
            #[inline(always)]
            fn from_bool(v: bool) -> Self {
                <$t>::new(v as u8 as $real, 0.0)
            }
            #[inline(always)]
            fn from_c64(v: Complex64) -> Self {
                <$t>::new(v.re as $real, v.im as $real)
            }
        }
    };
}

complex_element!(Complex32, DType::C64, f32);
complex_element!(Complex64, DType::C128, f64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn casts_follow_static_cast() {
        assert_eq!(2.9f32.cast::<i32>(), 2);
        assert_eq!((-2.9f64).cast::<i64>(), -2);
        assert_eq!(300i32.cast::<u8>(), 44);
        assert!(0.5f32.cast::<bool>());
        assert!(!0.0f64.cast::<bool>());
        assert_eq!(true.cast::<f32>(), 1.0);
        assert_eq!(Complex64::new(3.5, 1.0).cast::<f32>(), 3.5);
        assert!(Complex32::new(0.0, 1.0).cast::<bool>());
        assert_eq!(1.5f32.cast::<f16>(), f16::from_f32(1.5));
        assert_eq!(u64::MAX.cast::<u64>(), u64::MAX);
        assert_eq!(i64::MAX.cast::<i64>(), i64::MAX);
        assert_eq!(16777217i64.cast::<f32>(), 16777216.0);
    }

    /// Just above a rounding tie, the low bits of a float decide: CPU-computed bit patterns.
    #[test]
    fn half_types_round_from_float_as_c10() {
        let above_tie_bf16 = f32::from_bits(0x4340_8001); // 192.50002
        assert_eq!(above_tie_bf16.cast::<bf16>().to_bits(), 0x4341); // 193
        assert_eq!((above_tie_bf16 as f64).cast::<bf16>().to_bits(), 0x4341);
        let above_tie_f16 = f32::from_bits(0x3f80_1001); // 1 + 2^-11 + 2^-23
        assert_eq!(above_tie_f16.cast::<f16>().to_bits(), 0x3c01);
        // A double rounds to float first: 1 + 2^-8 + 2^-30 is float 1 + 2^-8, a tie, to even.
        assert_eq!(
            (1.0 + 2f64.powi(-8) + 2f64.powi(-30))
                .cast::<bf16>()
                .to_bits(),
            0x3f80
        );
        // An integer, too: 16777217 is float 16777216.
        assert_eq!(16_777_217i64.cast::<bf16>().to_bits(), 0x4b80);
    }

    #[test]
    fn float_to_int_out_of_range_as_x86() {
        assert_eq!(f32::NAN.cast::<i32>(), i32::MIN);
        assert_eq!(3e9f64.cast::<i32>(), i32::MIN);
        assert_eq!((-2147483648.5f64).cast::<i32>(), i32::MIN);
        assert_eq!(f64::INFINITY.cast::<i64>(), i64::MIN);
        assert_eq!(1e30f32.cast::<u8>(), 0);
        assert_eq!(300.7f32.cast::<u8>(), 44);
        assert_eq!((-1.5f32).cast::<u8>(), 255);
        assert_eq!(1.5e19f64.cast::<u64>(), 15_000_000_000_000_000_000);
        assert_eq!(f32::NAN.cast::<i8>(), 0);
    }

    #[test]
    fn scalar_round_trip() {
        assert_eq!(f32::from_scalar(&Scalar::from_f64(2.5)), 2.5);
        assert_eq!(i64::from_scalar(&Scalar::from_i64(-7)), -7);
        assert_eq!(u64::from_scalar(&Scalar::from_u64(u64::MAX)), u64::MAX);
        assert_eq!((-7i16).to_scalar(), Scalar::from_i64(-7));
        assert_eq!(true.to_scalar(), Scalar::from_bool(true));
    }
}
