// Device guard: device switching (thread-local current device, kept in Rust), streams and
// events. foo executes every kernel synchronously on the calling thread, so a stream is always
// complete, waiting is a no-op, and an event records the host time at which it was reached.
#include <c10/core/DeviceGuard.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <array>
#include <atomic>
#include <chrono>

#include "common.h"

namespace foo {
namespace {

constexpr int kMaxDevices = 64;

struct FooEvent {
  c10::DeviceIndex device;
  bool timing;
  bool recorded = false;
  std::chrono::steady_clock::time_point when{};
};

// Per thread and device: the id of the current stream (0 = the default stream).
thread_local std::array<c10::StreamId, kMaxDevices> t_current_stream{};
std::atomic<c10::StreamId> g_next_stream_id{1};

c10::DeviceIndex checked_index(c10::Device d) {
  TORCH_CHECK(d.is_privateuseone(), "expected a foo device, got ", d);
  return d.index();
}

c10::DeviceIndex resolve(c10::DeviceIndex index) { return index < 0 ? static_cast<c10::DeviceIndex>(foo_current_device()) : index; }

struct FooGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  FooGuardImpl() = default;
  explicit FooGuardImpl(c10::DeviceType t) { TORCH_CHECK(t == kFoo, "FooGuardImpl got device type ", t); }

  c10::DeviceType type() const override { return kFoo; }

  c10::Device exchangeDevice(c10::Device d) const override {
    int32_t previous = 0;
    check(foo_exchange_device(checked_index(d), &previous), "foo set device");
    return {kFoo, static_cast<c10::DeviceIndex>(previous)};
  }

  c10::Device getDevice() const override { return {kFoo, static_cast<c10::DeviceIndex>(foo_current_device())}; }

  void setDevice(c10::Device d) const override { check(foo_set_device(checked_index(d)), "foo set device"); }

  void uncheckedSetDevice(c10::Device d) const noexcept override { (void)foo_set_device(d.index()); }

  c10::Stream getStream(c10::Device d) const override {
    const auto index = resolve(d.index());
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kFoo, index), t_current_stream.at(index));
  }

  c10::Stream getDefaultStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kFoo, resolve(d.index())), 0);
  }

  c10::Stream getNewStream(c10::Device d, int /*priority*/) const override {
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kFoo, resolve(d.index())), g_next_stream_id++);
  }

  c10::Stream getStreamFromGlobalPool(c10::Device d, bool /*isHighPriority*/) const override {
    return getNewStream(d, 0);
  }

  c10::Stream exchangeStream(c10::Stream s) const override {
    const auto index = resolve(s.device_index());
    auto& slot = t_current_stream.at(index);
    c10::Stream previous(c10::Stream::UNSAFE, c10::Device(kFoo, index), slot);
    slot = s.id();
    return previous;
  }

  // The dtypes a foo tensor can have (allocation and conversion; the kernels' own coverage is
  // foo_rs.SUPPORTED_DTYPES' business): is_supported_dtype, which empty() and to() enforce.
  c10::DeviceCapability getDeviceCapability(c10::Device d) const override {
    const auto index = resolve(d.index());
    TORCH_CHECK(index >= 0 && index < foo_device_count(), "Invalid device index ", static_cast<int>(index), ": foo has ",
                foo_device_count(), " device(s)");
    c10::DeviceCapability cap;
    cap.capability_data.capability_bits = 0;
    for (int i = 0; i < static_cast<int>(c10::NumScalarTypes) && i < 64; ++i) {
      if (is_supported_dtype(static_cast<c10::ScalarType>(i))) cap.capability_data.capability_bits |= 1ULL << i;
    }
    return cap;
  }

  c10::DeviceIndex deviceCount() const noexcept override { return static_cast<c10::DeviceIndex>(foo_device_count()); }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(), "Event device index ", device_index,
                " does not match recording stream's device index ", stream.device_index(), ".");
    auto* ev = static_cast<FooEvent*>(*event);
    if (ev == nullptr) {
      ev = new FooEvent{stream.device_index(), flag == c10::EventFlag::BACKEND_DEFAULT};
      *event = ev;
    }
    ev->recorded = true;
    ev->when = std::chrono::steady_clock::now();
  }

  void block(void* /*event*/, const c10::Stream& /*stream*/) const override {}

  bool queryEvent(void* /*event*/) const override { return true; }

  void destroyEvent(void* event, const c10::DeviceIndex /*device_index*/) const noexcept override {
    delete static_cast<FooEvent*>(event);
  }

  bool queryStream(const c10::Stream& /*stream*/) const override { return true; }

  void synchronizeStream(const c10::Stream& /*stream*/) const override {}

  void synchronizeEvent(void* /*event*/) const override {}

  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    if (device_index >= 0) {
      TORCH_CHECK(device_index < foo_device_count(), "Invalid device index ", static_cast<int>(device_index),
                  ": foo has ", foo_device_count(), " device(s)");
    }
  }

  void recordDataPtrOnStream(const c10::DataPtr& /*data_ptr*/, const c10::Stream& /*stream*/) const override {}

  double elapsedTime(void* event1, void* event2, const c10::DeviceIndex /*device_index*/) const override {
    auto* a = static_cast<FooEvent*>(event1);
    auto* b = static_cast<FooEvent*>(event2);
    TORCH_CHECK(a && b && a->recorded && b->recorded, "Both events must be recorded before calculating elapsed time.");
    TORCH_CHECK(a->timing && b->timing, "Both events must be created with argument 'enable_timing=True'.");
    return std::chrono::duration<double, std::milli>(b->when - a->when).count();
  }
};

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, FooGuardImpl);

}  // namespace foo
