//! Element types: the one list of the dtypes foo supports. The discriminants are
//! c10::ScalarType's, so the C++ glue passes `static_cast<int>(tensor.scalar_type())` straight
//! through; the glue's `is_supported_dtype` reads [`DType::supported_mask`] (through
//! `foo_supported_dtype_mask`) and Python's `foo_rs.SUPPORTED_DTYPES` is built from
//! [`DType::name`] (`foo_rs._C.SUPPORTED_DTYPE_NAMES`), so a dtype is added here and nowhere else.
//! tests/test_device_capability.py checks that codes and names agree with torch's.

use crate::error::{FooError, FooResult};

#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DType {
    U8 = 0,
    I8 = 1,
    I16 = 2,
    I32 = 3,
    I64 = 4,
    F16 = 5,
    F32 = 6,
    F64 = 7,
    C64 = 9,
    C128 = 10,
    Bool = 11,
    BF16 = 15,
    U16 = 27,
    U32 = 28,
    U64 = 29,
}

/// Which family a dtype belongs to; decides how values convert between dtypes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Bool,
    Signed,
    Unsigned,
    Float,
    Complex,
}

impl DType {
    /// Every supported dtype, by kind (the order of `foo_rs.SUPPORTED_DTYPES`).
    pub const ALL: [DType; 15] = [
        DType::U8,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::C64,
        DType::C128,
        DType::Bool,
    ];

    /// Bit `code` is set for each supported c10::ScalarType code.
    pub const fn supported_mask() -> u64 {
        let mut mask = 0u64;
        let mut i = 0;
        while i < DType::ALL.len() {
            mask |= 1u64 << (DType::ALL[i] as i32);
            i += 1;
        }
        mask
    }

    pub fn from_code(code: i32) -> FooResult<DType> {
        DType::ALL
            .iter()
            .copied()
            .find(|d| *d as i32 == code)
            .ok_or_else(|| {
                FooError::NotImplemented(format!(
                    "dtype code {code} (c10::ScalarType) is not supported by foo kernels"
                ))
            })
    }

    pub fn size(self) -> usize {
        match self {
            DType::U8 | DType::I8 | DType::Bool => 1,
            DType::I16 | DType::U16 | DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 | DType::C64 => 8,
            DType::C128 => 16,
        }
    }

    pub fn kind(self) -> Kind {
        match self {
            DType::Bool => Kind::Bool,
            DType::I8 | DType::I16 | DType::I32 | DType::I64 => Kind::Signed,
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => Kind::Unsigned,
            DType::F16 | DType::BF16 | DType::F32 | DType::F64 => Kind::Float,
            DType::C64 | DType::C128 => Kind::Complex,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DType::U8 => "uint8",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::F16 => "float16",
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::C64 => "complex64",
            DType::C128 => "complex128",
            DType::Bool => "bool",
            DType::BF16 => "bfloat16",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_code(d as i32).unwrap(), d);
        }
        assert!(DType::from_code(12).is_err()); // QInt8
        assert!(DType::from_code(24).is_err()); // Float8_e4m3fn
    }

    #[test]
    fn mask_has_one_bit_per_dtype() {
        let mask = DType::supported_mask();
        assert_eq!(mask.count_ones() as usize, DType::ALL.len());
        for d in DType::ALL {
            assert_ne!(mask & (1 << d as i32), 0, "{}", d.name());
        }
    }
}
