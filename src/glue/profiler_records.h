// What profiler.cpp records about foo's kernels for the kineto session (profiler_kineto.cpp).
#pragma once

#include <cstdint>
#include <vector>

namespace foo::prof {

struct KernelRecord {
  const char* op;        // op name ("mm", "add.Tensor"): a static string of FOO_IMPL's
  int device;            // foo device index
  int64_t stream;        // id of the device's current stream on the launching thread
  int64_t start_ns;      // c10::getTime() (ns since the epoch)
  int64_t end_ns;
  uint64_t correlation;  // the innermost profiled op around the kernel (0: none)
  int32_t thread;        // system thread id of the launching thread
};

// The kineto session's window: kernels that end while collecting are kept.
void start_collecting() noexcept;
std::vector<KernelRecord> stop_collecting();

// The correlation ids kineto hands the session for each profiled op, per thread.
void push_correlation(uint64_t id);
void pop_correlation() noexcept;

}  // namespace foo::prof
