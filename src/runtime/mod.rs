//! Runtime services: devices, memory, generator state, op accounting, fork safety.

pub mod counters;
pub mod cpu;
pub mod device;
pub mod memory;
pub mod pool;
pub mod rng;
pub mod team;
