//! Integer element types: PyTorch's integer semantics (wrapping arithmetic, floor division).

use super::element::Element;
use num_traits::{CheckedRem, PrimInt, WrappingAdd, WrappingMul, WrappingNeg, WrappingSub};

pub trait IntElem:
    Element
    + PrimInt
    + CheckedRem
    + WrappingAdd
    + WrappingSub
    + WrappingMul
    + WrappingNeg
    + std::hash::Hash
{
    const SIGNED: bool;
    #[inline(always)]
    fn wabs(self) -> Self {
        if Self::SIGNED && self < Self::zero() {
            self.wrapping_neg()
        } else {
            self
        }
    }
    #[inline(always)]
    fn sign(self) -> Self {
        if self > Self::zero() {
            Self::one()
        } else if Self::SIGNED && self < Self::zero() {
            Self::zero().wrapping_sub(&Self::one())
        } else {
            Self::zero()
        }
    }
    /// Truncating division; `None` for division by zero. MIN / -1 wraps like the hardware.
    #[inline(always)]
    fn div_trunc_torch(self, b: Self) -> Option<Self> {
        if b == Self::zero() {
            return None;
        }
        Some(self.checked_div(&b).unwrap_or(self.wrapping_neg()))
    }
    /// Python-style floor division.
    #[inline(always)]
    fn div_floor_torch(self, b: Self) -> Option<Self> {
        let q = self.div_trunc_torch(b)?;
        let r = self.wrapping_sub(&q.wrapping_mul(&b));
        if Self::SIGNED && r != Self::zero() && ((r < Self::zero()) != (b < Self::zero())) {
            Some(q.wrapping_sub(&Self::one()))
        } else {
            Some(q)
        }
    }
    /// C-style remainder (sign of the dividend), as torch.fmod.
    #[inline(always)]
    fn fmod(self, b: Self) -> Option<Self> {
        if b == Self::zero() {
            return None;
        }
        Some(self.checked_rem(&b).unwrap_or(Self::zero()))
    }
    /// Python-style remainder (sign of the divisor), as torch.remainder.
    #[inline(always)]
    fn remainder(self, b: Self) -> Option<Self> {
        let r = self.fmod(b)?;
        if Self::SIGNED && r != Self::zero() && ((r < Self::zero()) != (b < Self::zero())) {
            Some(r.wrapping_add(&b))
        } else {
            Some(r)
        }
    }
    /// Integer power by squaring (wrapping). Negative exponents give 0 except for bases ±1.
    #[inline(always)]
    fn ipow(self, e: Self) -> Self {
        if Self::SIGNED && e < Self::zero() {
            if self == Self::one() {
                return Self::one();
            }
            if self == Self::zero().wrapping_sub(&Self::one()) {
                let odd = (e & Self::one()) != Self::zero();
                return if odd { self } else { Self::one() };
            }
            return Self::zero();
        }
        let mut base = self;
        let mut exp = e;
        let mut acc = Self::one();
        while exp != Self::zero() {
            if exp & Self::one() != Self::zero() {
                acc = acc.wrapping_mul(&base);
            }
            base = base.wrapping_mul(&base);
            exp = exp.unsigned_shr(1);
        }
        acc
    }
    /// Shifts as PyTorch defines them: a shift by >= the bit width gives 0 (or -1 for a right
    /// shift of a negative value); negative shift amounts give 0.
    #[inline(always)]
    fn shl_torch(self, s: Self) -> Self {
        let bits = (std::mem::size_of::<Self>() * 8) as i64;
        let s = Element::to_i64(s);
        if s < 0 || s >= bits {
            Self::zero()
        } else {
            self.unsigned_shl(s as u32)
        }
    }
    #[inline(always)]
    fn shr_torch(self, s: Self) -> Self {
        let bits = (std::mem::size_of::<Self>() * 8) as i64;
        let s = Element::to_i64(s);
        let neg = Self::SIGNED && self < Self::zero();
        if s < 0 || s >= bits {
            if neg {
                Self::zero().wrapping_sub(&Self::one())
            } else {
                Self::zero()
            }
        } else if Self::SIGNED {
            self.signed_shr(s as u32)
        } else {
            // `signed_shr` copies the top bit even for unsigned types: uint8 200 >> 3 was 249.
            self.unsigned_shr(s as u32)
        }
    }
}

macro_rules! int_elem {
    ($($t:ty: $signed:expr),*) => { $(impl IntElem for $t { const SIGNED: bool = $signed; })* };
}
int_elem!(i8: true, i16: true, i32: true, i64: true, u8: false, u16: false, u32: false, u64: false);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn division_semantics() {
        assert_eq!((-7i32).div_floor_torch(2), Some(-4));
        assert_eq!((-7i32).div_trunc_torch(2), Some(-3));
        assert_eq!((-7i32).remainder(2), Some(1));
        assert_eq!((-7i32).fmod(2), Some(-1));
        assert_eq!(7i32.remainder(-2), Some(-1));
        assert_eq!(5u8.div_floor_torch(0), None);
        assert_eq!(i32::MIN.div_trunc_torch(-1), Some(i32::MIN));
        assert_eq!(3i64.ipow(4), 81);
        assert_eq!(2i64.ipow(-1), 0);
        assert_eq!((-1i64).ipow(-3), -1);
        assert_eq!(1i8.shl_torch(9), 0);
        assert_eq!((-8i8).shr_torch(10), -1);
        assert_eq!(200u8.shr_torch(3), 25);
        assert_eq!(u64::MAX.shr_torch(60), 15);
        assert_eq!((-128i8).shr_torch(3), -16);
        assert_eq!((-5i16).wabs(), 5);
        assert_eq!(0u8.sign(), 0);
    }
}
