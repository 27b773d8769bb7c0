// The C side of src/ffi.rs: the only way the C++ glue reaches Rust. Keep in step with ffi.rs,
// tensor.rs (FooTensor, FooScalar) and runtime/memory.rs (FooMemoryStats).
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum FooStatus {
  FOO_OK = 0,
  FOO_ERROR = 1,
  FOO_OUT_OF_MEMORY = 2,
  FOO_INVALID_ARGUMENT = 3,
  FOO_NOT_IMPLEMENTED = 4,
  FOO_PANIC = 5,
  FOO_INVALID_DEVICE = 6,
  FOO_UNSUPPORTED = 7,  // no kernel for these (valid) inputs: the glue uses the CPU fallback
};

// data points at element 0; sizes/strides (in elements) have ndim entries; dtype is the
// c10::ScalarType code.
typedef struct FooTensor {
  void* data;
  const int64_t* sizes;
  const int64_t* strides;
  int32_t ndim;
  int32_t dtype;
  int32_t device;
} FooTensor;

enum FooScalarTag { FOO_SCALAR_BOOL = 0, FOO_SCALAR_INT = 1, FOO_SCALAR_FLOAT = 2, FOO_SCALAR_COMPLEX = 3, FOO_SCALAR_UINT = 4 };

typedef struct FooScalar {
  int32_t tag;
  int64_t i;
  double f;
  double imag;
} FooScalar;

typedef struct FooStat {
  int64_t current, peak, allocated, freed;
} FooStat;

typedef struct FooStatArray {
  FooStat all, small, large;
} FooStatArray;

typedef struct FooMemoryStats {
  FooStatArray allocation, segment, active, allocated_bytes, reserved_bytes, active_bytes, requested_bytes;
  int64_t num_alloc_retries, num_ooms, num_device_alloc, num_device_free;
} FooMemoryStats;

const char* foo_last_error(void);

int32_t foo_device_count(void);
int32_t foo_current_device(void);
int32_t foo_set_device(int32_t index);
int32_t foo_exchange_device(int32_t index, int32_t* previous);

int32_t foo_alloc(int32_t device, size_t nbytes, void** ptr);
int32_t foo_free(void* ptr);
int32_t foo_device_of_ptr(const void* ptr);
int32_t foo_empty_cache(int32_t device);
int32_t foo_memory_stats(int32_t device, FooMemoryStats* stats);
int32_t foo_reset_peak_stats(int32_t device);
int32_t foo_reset_accumulated_stats(int32_t device);
int32_t foo_memory_info(int32_t device, size_t* free_bytes, size_t* total_bytes);
int32_t foo_block_info(const void* ptr, int32_t* device, size_t* size, size_t* requested);
// event 0: a segment was obtained from the system, 1: released to it. Runs under the
// allocator's lock: it must not call back into the allocator.
typedef void (*FooSegmentObserver)(int32_t event, int32_t device, size_t addr, size_t size);
void foo_set_segment_observer(FooSegmentObserver observer);
typedef struct FooBlock {
  int32_t device;
  bool live;
  size_t addr;
  size_t size;
  size_t requested;
} FooBlock;
typedef void (*FooBlockVisitor)(void* ctx, const FooBlock* block);
int32_t foo_memory_blocks(FooBlockVisitor visit, void* ctx);
int32_t foo_host_alloc(size_t nbytes, void** ptr);
int32_t foo_host_free(void* ptr);
bool foo_is_pinned(const void* ptr);

int32_t foo_copy(const FooTensor* dst, const FooTensor* src);
int32_t foo_fill(const FooTensor* dst, const FooScalar* value);
int32_t foo_read_scalar(const FooTensor* src, FooScalar* value);
int32_t foo_debug_panic(void);
void foo_follow_thread_count(int32_t (*source)(void));

const void* foo_native_slot(const char* name);
void foo_native_hit(const void* slot);
int32_t foo_fallback_hit(const char* name);

int32_t foo_generator_default(int32_t device, uint64_t* id);
int32_t foo_generator_new(int32_t device, uint64_t* id);
int32_t foo_generator_clone(uint64_t id, uint64_t* new_id);
void foo_generator_release(uint64_t id);
int32_t foo_generator_set_seed(uint64_t id, uint64_t seed);
int32_t foo_generator_get(uint64_t id, uint64_t* seed, uint64_t* offset);
int32_t foo_generator_set_offset(uint64_t id, uint64_t offset);
uint64_t foo_nondeterministic_seed(void);

#ifdef __cplusplus
}
#endif
