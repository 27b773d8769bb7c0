// Kernel timing for the profilers, and the PrivateUse1 profiler stubs.
//
// Every native kernel runs through prof::KernelScope (FOO_IMPL, common.h). While a profiler is
// collecting, the outermost kernel on a thread is timed: its duration goes into a per-thread
// running total of kernel time, and, while the kineto session of profiler_kineto.cpp records,
// into a list of kernel records that becomes the device rows of the trace.
//
// The stubs serve `torch.autograd.profiler.profile(use_device="foo")` (ProfilerState
// KINETO_PRIVATEUSE1_FALLBACK): the profiler records an "event" when each op starts and ends
// and asks for the device time between the two. foo's event is the thread's running total of
// kernel time, so the elapsed time of an op is the time foo's kernels ran inside it: measured,
// never the op's CPU time.
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/ApproximateClock.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

#include "common.h"
#include "profiler.h"
#include "profiler_records.h"

namespace foo::prof {
namespace {

thread_local int t_depth = 0;           // native kernels running on this thread (nesting)
thread_local int64_t t_kernel_ns = 0;   // kernel time of this thread while profiled, running total
thread_local std::vector<uint64_t> t_correlation;

std::atomic<bool> g_collecting{false};
std::mutex g_records_mutex;
std::vector<KernelRecord> g_records;

// A profiler of this thread (torch.profiler, torch.autograd.profiler) is collecting.
bool thread_profiled() noexcept {
  return c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PROFILER_STATE) != nullptr;
}

// The OS id of this thread, asked once per thread (a system call costs about a microsecond here)
// and again in a forked child, whose threads have new ids.
std::atomic<uint32_t> g_fork_generation{0};
thread_local uint32_t t_tid_generation = UINT32_MAX;
thread_local int32_t t_tid = 0;

int32_t system_thread_id() noexcept {
  const uint32_t generation = g_fork_generation.load(std::memory_order_relaxed);
  if (t_tid_generation != generation) {
    t_tid = static_cast<int32_t>(::syscall(SYS_gettid));
    t_tid_generation = generation;
  }
  return t_tid;
}

struct ForkHandler {
  ForkHandler() {
    ::pthread_atfork(nullptr, nullptr, [] { g_fork_generation.fetch_add(1, std::memory_order_relaxed); });
  }
};
const ForkHandler g_fork_handler;

int64_t current_stream_id(int device) {
  const auto* impl = c10::impl::getDeviceGuardImpl(kFoo);
  return impl->getStream(c10::Device(kFoo, static_cast<c10::DeviceIndex>(device))).id();
}

}  // namespace

int64_t kernel_begin() noexcept {
  if (t_depth++ != 0) return -1;
  if (!g_collecting.load(std::memory_order_relaxed) && !thread_profiled()) return -1;
  return c10::getTime();
}

void kernel_end(int64_t start, const char* op, int device) noexcept {
  --t_depth;
  if (start < 0) return;
  const int64_t end = c10::getTime();
  t_kernel_ns += end - start;
  if (!g_collecting.load(std::memory_order_relaxed)) return;
  try {
    const int dev = device >= 0 ? device : foo_current_device();
    KernelRecord r{op, dev, current_stream_id(dev), start, end,
                   t_correlation.empty() ? 0 : t_correlation.back(), system_thread_id()};
    std::lock_guard<std::mutex> lock(g_records_mutex);
    g_records.push_back(r);
  } catch (...) {
    // A record that cannot be stored (out of memory) is lost; the kernel's result is not.
  }
}

void start_collecting() noexcept {
  {
    std::lock_guard<std::mutex> lock(g_records_mutex);
    g_records.clear();
  }
  g_collecting.store(true);
}

std::vector<KernelRecord> stop_collecting() {
  g_collecting.store(false);
  std::lock_guard<std::mutex> lock(g_records_mutex);
  return std::exchange(g_records, {});
}

void push_correlation(uint64_t id) { t_correlation.push_back(id); }

void pop_correlation() noexcept {
  // A session that starts inside an op sees its pop without its push.
  if (!t_correlation.empty()) t_correlation.pop_back();
}

namespace {

// The stubs' event: which thread recorded it (the address of its running total, unique among
// live threads), and that thread's kernel time then.
struct KernelClock {
  const int64_t* thread;
  int64_t kernel_ns;
};

struct FooProfilerStubs final : public torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    if (device != nullptr) *device = static_cast<c10::DeviceIndex>(foo_current_device());
    *event = std::make_shared<KernelClock>(KernelClock{&t_kernel_ns, t_kernel_ns});
    if (cpu_ns != nullptr) *cpu_ns = c10::getTime();
  }

  // Microseconds of foo kernel time between the two events (0 when another thread recorded
  // the end: the running totals of two threads do not compare).
  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* event,
                const torch::profiler::impl::ProfilerVoidEventStub* event2) const override {
    if (event == nullptr || event2 == nullptr || !*event || !*event2) return 0.0f;
    const auto* a = static_cast<const KernelClock*>(event->get());
    const auto* b = static_cast<const KernelClock*>(event2->get());
    if (a->thread != b->thread || b->kernel_ns < a->kernel_ns) return 0.0f;
    return static_cast<float>(b->kernel_ns - a->kernel_ns) / 1000.0f;
  }

  // No external annotation tool (NVTX's counterpart) exists for foo.
  void mark(const char* /*name*/) const override {}
  void rangePush(const char* /*name*/) const override {}
  void rangePop() const override {}

  bool enabled() const override { return true; }

  void onEachDevice(std::function<void(int)> op) const override {
    const int n = foo_device_count();
    if (n == 0) return;
    c10::DeviceGuard guard(c10::Device(kFoo, 0));
    for (int i = 0; i < n; ++i) {
      guard.set_index(static_cast<c10::DeviceIndex>(i));
      op(i);
    }
  }

  // Kernels finish before they return: nothing is ever in flight.
  void synchronize() const override {}
};

struct RegisterStubs {
  RegisterStubs() {
    static FooProfilerStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
};
const RegisterStubs g_register_stubs;

}  // namespace
}  // namespace foo::prof
