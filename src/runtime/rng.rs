//! Generator state, owned by Rust. A generator is (seed, offset): the counter-based kernels
//! (Philox4x32-10) derive element i of a random op from (seed, offset, i) only, and advance the
//! offset by what they consumed. The C++ `GeneratorImpl` and the Python API are handles onto
//! this state: generator `d` (for d < device_count) is device d's default generator, higher
//! ids are generators made by `torch.Generator(device="foo")`.

use super::device::{check_device, device_count};
use crate::error::{FooError, FooResult};
use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, OnceLock};

/// PyTorch's default seed (`c10::default_rng_seed_val`), so an unseeded foo generator starts
/// where an unseeded CPU/CUDA one does.
pub const DEFAULT_SEED: u64 = 67280421310721;
/// Bytes of a serialized state: seed then offset, both little-endian u64.
pub const STATE_BYTES: usize = 16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenState {
    pub seed: u64,
    pub offset: u64,
    pub device: usize,
}

struct Registry {
    gens: HashMap<u64, GenState>,
    next_id: u64,
}

fn registry() -> MutexGuard<'static, Registry> {
    static REG: OnceLock<Mutex<Registry>> = OnceLock::new();
    REG.get_or_init(|| {
        let n = device_count();
        let gens = (0..n as u64)
            .map(|d| {
                (
                    d,
                    GenState {
                        seed: DEFAULT_SEED,
                        offset: 0,
                        device: d as usize,
                    },
                )
            })
            .collect();
        Mutex::new(Registry {
            gens,
            next_id: n as u64,
        })
    })
    .lock()
    .unwrap_or_else(|e| e.into_inner())
}

fn unknown(id: u64) -> FooError {
    FooError::InvalidArgument(format!("foo generator {id} does not exist"))
}

/// The id of a device's default generator.
pub fn default_generator(device: i64) -> FooResult<u64> {
    Ok(check_device(device)? as u64)
}

/// Creates a generator for `device` with the default seed.
pub fn new_generator(device: i64) -> FooResult<u64> {
    let device = check_device(device)?;
    let mut r = registry();
    let id = r.next_id;
    r.next_id += 1;
    r.gens.insert(
        id,
        GenState {
            seed: DEFAULT_SEED,
            offset: 0,
            device,
        },
    );
    Ok(id)
}

/// Creates a generator with the same state as `id`.
pub fn clone_generator(id: u64) -> FooResult<u64> {
    let mut r = registry();
    let state = *r.gens.get(&id).ok_or_else(|| unknown(id))?;
    let new = r.next_id;
    r.next_id += 1;
    r.gens.insert(new, state);
    Ok(new)
}

/// Drops a non-default generator (default generators live as long as the process).
pub fn release_generator(id: u64) {
    if id >= device_count() as u64 {
        registry().gens.remove(&id);
    }
}

pub fn state(id: u64) -> FooResult<GenState> {
    registry().gens.get(&id).copied().ok_or_else(|| unknown(id))
}

/// Sets the seed and restarts the stream (offset 0), like `Generator.manual_seed`.
pub fn manual_seed(id: u64, seed: u64) -> FooResult<()> {
    let mut r = registry();
    let g = r.gens.get_mut(&id).ok_or_else(|| unknown(id))?;
    g.seed = seed;
    g.offset = 0;
    Ok(())
}

pub fn set_offset(id: u64, offset: u64) -> FooResult<()> {
    let mut r = registry();
    r.gens.get_mut(&id).ok_or_else(|| unknown(id))?.offset = offset;
    Ok(())
}

/// Reserves `count` counter values and returns (seed, first offset): the kernel draws from
/// counters `offset .. offset + count` (rounded up to whole Philox blocks of 4).
pub fn reserve(id: u64, count: u64) -> FooResult<(u64, u64)> {
    let mut r = registry();
    let g = r.gens.get_mut(&id).ok_or_else(|| unknown(id))?;
    let start = g.offset;
    g.offset = g.offset.wrapping_add(count.div_ceil(4) * 4);
    Ok((g.seed, start))
}

pub fn get_state_bytes(id: u64) -> FooResult<[u8; STATE_BYTES]> {
    let g = state(id)?;
    let mut out = [0u8; STATE_BYTES];
    out[..8].copy_from_slice(&g.seed.to_le_bytes());
    out[8..].copy_from_slice(&g.offset.to_le_bytes());
    Ok(out)
}

pub fn set_state_bytes(id: u64, bytes: &[u8]) -> FooResult<()> {
    if bytes.len() != STATE_BYTES {
        return Err(FooError::InvalidArgument(format!(
            "foo RNG state must be a uint8 tensor of {STATE_BYTES} bytes (seed, offset), got {} bytes",
            bytes.len()
        )));
    }
    let seed = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
    let offset = u64::from_le_bytes(bytes[8..].try_into().expect("8 bytes"));
    let mut r = registry();
    let g = r.gens.get_mut(&id).ok_or_else(|| unknown(id))?;
    g.seed = seed;
    g.offset = offset;
    Ok(())
}

pub(crate) const PHILOX_M0: u32 = 0xD251_1F53;
pub(crate) const PHILOX_M1: u32 = 0xCD9E_8D57;
pub(crate) const PHILOX_W0: u32 = 0x9E37_79B9;
pub(crate) const PHILOX_W1: u32 = 0xBB67_AE85;

/// Philox4x32-10 (Salmon et al., SC'11; the generator CUDA's curand uses): a bijection of the
/// 128-bit counter under a 64-bit key.
#[inline(always)]
pub fn philox4x32_10(mut ctr: [u32; 4], mut key: [u32; 2]) -> [u32; 4] {
    for round in 0..10 {
        if round > 0 {
            key[0] = key[0].wrapping_add(PHILOX_W0);
            key[1] = key[1].wrapping_add(PHILOX_W1);
        }
        let p0 = PHILOX_M0 as u64 * ctr[0] as u64;
        let p1 = PHILOX_M1 as u64 * ctr[2] as u64;
        ctr = [
            (p1 >> 32) as u32 ^ ctr[1] ^ key[0],
            p1 as u32,
            (p0 >> 32) as u32 ^ ctr[3] ^ key[1],
            p0 as u32,
        ];
    }
    ctr
}

/// A fresh non-deterministic seed (for `seed()` / `seed_all()`), from the OS's hasher keys
/// mixed with the time, like `c10::detail::getNonDeterministicRandom`.
pub fn nondeterministic_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    h.write_u128(nanos);
    h.write_u32(std::process::id());
    // Keep it within 53 bits like PyTorch's, so it round-trips through Python floats too.
    h.finish() & ((1u64 << 53) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn philox_known_answers() {
        // Known-answer vectors of the Random123 distribution (kat_vectors, philox4x32 R=10).
        assert_eq!(
            philox4x32_10([0; 4], [0; 2]),
            [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]
        );
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]
        );
        assert_eq!(
            philox4x32_10(
                [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
                [0xa4093822, 0x299f31d0]
            ),
            [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]
        );
    }

    #[test]
    fn state_round_trip_and_reserve() {
        let g = new_generator(0).unwrap();
        manual_seed(g, 42).unwrap();
        assert_eq!(reserve(g, 5).unwrap(), (42, 0));
        assert_eq!(reserve(g, 1).unwrap(), (42, 8));
        let bytes = get_state_bytes(g).unwrap();
        let h = clone_generator(g).unwrap();
        assert_eq!(state(h).unwrap().offset, 12);
        manual_seed(g, 7).unwrap();
        set_state_bytes(g, &bytes).unwrap();
        assert_eq!(
            state(g).unwrap(),
            GenState {
                seed: 42,
                offset: 12,
                device: 0
            }
        );
        assert!(set_state_bytes(g, &bytes[..3]).is_err());
        release_generator(g);
        release_generator(h);
        assert!(state(g).is_err());
        assert_eq!(state(default_generator(1).unwrap()).unwrap().device, 1);
        assert!(nondeterministic_seed() < (1 << 53));
    }
}
