// Device and pinned-host allocators: thin handles onto the Rust caching allocator.
#include <ATen/core/CachingHostAllocator.h>
#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cstdio>

#include "allocator.h"
#include "common.h"
#include "memory_history.h"

namespace foo {
namespace {

void delete_device_block(void* ptr) {
  // Deleters must not throw; a failure here means a foreign pointer, which Rust refused.
  const bool observed = ptr != nullptr && memory::observed();
  const memory::FreeNote note = observed ? memory::before_free(ptr) : memory::FreeNote{};
  if (foo_free(ptr) != FOO_STATUS_OK) {
    std::fprintf(stderr, "foo_rs: %s\n", foo_last_error());
    return;
  }
  if (observed) memory::after_free(ptr, note);
}

void copy_stat(c10::CachingAllocator::Stat& to, const FooStat& from) {
  to.current = from.current;
  to.peak = from.peak;
  to.allocated = from.allocated;
  to.freed = from.freed;
}

void copy_stats(c10::CachingAllocator::StatArray& to, const FooStatArray& from) {
  using c10::CachingAllocator::StatType;
  copy_stat(to[static_cast<size_t>(StatType::AGGREGATE)], from.all);
  copy_stat(to[static_cast<size_t>(StatType::SMALL_POOL)], from.small);
  copy_stat(to[static_cast<size_t>(StatType::LARGE_POOL)], from.large);
}

class FooDeviceAllocator final : public c10::DeviceAllocator {
 public:
  at::DataPtr allocate(size_t nbytes) override {
    const auto device = static_cast<int32_t>(foo_current_device());
    void* ptr = nullptr;
    const int32_t status = foo_alloc(device, nbytes, &ptr);
    if (status != FOO_STATUS_OK) {
      // on_oom's calls into Rust succeed (the device is valid), so foo_last_error() still holds
      // the allocation's message when raise_status reads it.
      if (status == FOO_STATUS_OUT_OF_MEMORY && memory::observed()) {
        memory::on_oom(static_cast<c10::DeviceIndex>(device), nbytes);
      }
      raise_status(status, "foo allocate");
    }
    if (ptr != nullptr && memory::observed()) memory::on_alloc(ptr, static_cast<c10::DeviceIndex>(device));
    return {ptr, ptr, &delete_device_block, c10::Device(kFoo, static_cast<c10::DeviceIndex>(device))};
  }

  at::DeleterFnPtr raw_deleter() const override { return &delete_device_block; }

  void copy_data(void* dest, const void* src, std::size_t count) const override { copy_bytes(dest, src, count); }

  bool initialized() override { return true; }

  void emptyCache(c10::MempoolId_t /*mempool_id*/) override { check(foo_empty_cache(-1), "foo empty_cache"); }

  // Every stream is always complete in foo's synchronous model: nothing to track.
  void recordStream(const at::DataPtr& /*ptr*/, c10::Stream /*stream*/) override {}

  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    FooMemoryStats s{};
    check(foo_memory_stats(device, &s), "foo memory_stats");
    c10::CachingDeviceAllocator::DeviceStats out;
    copy_stats(out.allocation, s.allocation);
    copy_stats(out.segment, s.segment);
    copy_stats(out.active, s.active);
    copy_stats(out.allocated_bytes, s.allocated_bytes);
    copy_stats(out.reserved_bytes, s.reserved_bytes);
    copy_stats(out.active_bytes, s.active_bytes);
    copy_stats(out.requested_bytes, s.requested_bytes);
    out.num_alloc_retries = s.num_alloc_retries;
    out.num_ooms = s.num_ooms;
    out.num_device_alloc = s.num_device_alloc;
    out.num_device_free = s.num_device_free;
    return out;
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    check(foo_reset_accumulated_stats(device), "foo reset_accumulated_memory_stats");
  }

  void resetPeakStats(c10::DeviceIndex device) override { check(foo_reset_peak_stats(device), "foo reset_peak_memory_stats"); }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    size_t free_bytes = 0, total_bytes = 0;
    check(foo_memory_info(device, &free_bytes, &total_bytes), "foo mem_get_info");
    return {free_bytes, total_bytes};
  }
};

void delete_host_block(void* ptr) {
  if (foo_host_free(ptr) != FOO_STATUS_OK) {
    std::fprintf(stderr, "foo_rs: %s\n", foo_last_error());
  }
}

// Pinned host memory for pin_memory(): plain host RAM from Rust, recognised by isPinnedPtr.
class FooHostAllocator final : public at::HostAllocator {
 public:
  at::DataPtr allocate(size_t nbytes) override {
    void* ptr = nullptr;
    check(foo_host_alloc(nbytes, &ptr), "foo pinned allocate");
    return {ptr, ptr, &delete_host_block, c10::Device(c10::DeviceType::CPU)};
  }
  at::DeleterFnPtr raw_deleter() const override { return &delete_host_block; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { copy_bytes(dest, src, count); }
  bool record_event(void* /*ptr*/, void* /*ctx*/, c10::Stream /*stream*/) override { return true; }
  void empty_cache() override {}
  at::HostStats get_stats() override { return {}; }
  void reset_accumulated_stats() override {}
  void reset_peak_stats() override {}
};

FooDeviceAllocator g_device_allocator;
FooHostAllocator g_host_allocator;

}  // namespace

c10::Allocator* host_allocator() { return &g_host_allocator; }

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_device_allocator);
REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &g_host_allocator);

}  // namespace foo
