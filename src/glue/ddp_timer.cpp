// DDP's step timer for foo tensors (the avg_*_time fields of DDP's logging data, the
// "Time stats are currently only collected for CPU and CUDA devices" warning without one).
// foo's kernels run on the calling thread and are done when the op returns, so the host-side
// timestamps DDP's Timer records (c10::getTime) are when the device work started and ended: the
// same honest measure as the CPU's timer (CpuTimer in torch/csrc/distributed/c10d/reducer.cpp).
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>

namespace foo {
namespace {

class FooTimer : public c10d::Timer {
 public:
  explicit FooTimer(c10::Device /* unused: one clock for every foo device */) {}

  std::optional<int64_t> measureDifference(Event start, Event end) override {
    const int64_t start_ns = getTimeRef(start);
    const int64_t end_ns = getTimeRef(end);
    // An event may be unset (-1) or from an earlier iteration: no measurement, as on the CPU.
    if (start_ns == c10d::kUnsetTime || end_ns == c10d::kUnsetTime || end_ns < start_ns) return std::nullopt;
    return end_ns - start_ns;
  }
};

}  // namespace
}  // namespace foo

namespace c10d {
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::kPrivateUse1, foo::FooTimer);
}  // namespace c10d
