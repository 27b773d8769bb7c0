//! Runtime services: devices, memory, generator state, op accounting, fork safety.

pub mod counters;
pub mod device;
pub mod pool;
pub mod memory;
pub mod rng;
