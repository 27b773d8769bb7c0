// The PrivateUse1 hooks: what PyTorch asks any accelerator (device count, current device,
// generators, pinned memory, pointer ownership, storage resizing).
#include <ATen/Parallel.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/StorageImpl.h>

#include "allocator.h"
#include "common.h"
#include "generator.h"

namespace foo {
namespace {

struct FooHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return foo_device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex device_index) const override {
    return device_index >= 0 && device_index < foo_device_count();
  }
  void init() const override {}
  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(foo_device_count()); }
  void setCurrentDevice(c10::DeviceIndex device) const override { check(foo_set_device(device), "foo set_device"); }
  c10::DeviceIndex getCurrentDevice() const override { return static_cast<c10::DeviceIndex>(foo_current_device()); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    int32_t previous = 0;
    check(foo_exchange_device(device, &previous), "foo exchange_device");
    return static_cast<c10::DeviceIndex>(previous);
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    if (device < 0 || device >= foo_device_count()) return getCurrentDevice();
    return exchangeDevice(device);
  }
  at::Allocator* getPinnedMemoryAllocator() const override { return host_allocator(); }
  bool isPinnedPtr(const void* data) const override { return foo_is_pinned(data); }
  at::Device getDeviceFromPtr(void* data) const override {
    const int32_t device = foo_device_of_ptr(data);
    TORCH_CHECK(device >= 0, "pointer ", data, " does not belong to foo device memory");
    return {kFoo, static_cast<c10::DeviceIndex>(device)};
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return default_generator(device_index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override {
    return at::make_generator<FooGeneratorImpl>(device_index);
  }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_storage_bytes(storage.unsafeGetStorageImpl(), newsize);
  }
};

// PyTorch's intra-op thread count (torch.set_num_threads, OMP_NUM_THREADS): foo's kernels use as
// many threads unless FOO_RS_NUM_THREADS says otherwise (src/runtime/pool.rs).
int32_t torch_num_threads() noexcept {
  try {
    return at::get_num_threads();
  } catch (...) {
    return 1;
  }
}

// Registered at load time, before Python can ask anything of the device.
struct RegisterHooks {
  RegisterHooks() {
    at::RegisterPrivateUse1HooksInterface(new FooHooks());
    foo_follow_thread_count(&torch_num_threads);
  }
};
const RegisterHooks g_register_hooks;

}  // namespace
}  // namespace foo
