// Memory history for torch.foo.memory._record_memory_history / _snapshot (memory_history.cpp),
// and the allocator's reports to the profiler (profile_memory=True).
#pragma once

#include <c10/core/Device.h>

#include <cstddef>

namespace foo::memory {

// Whether the allocator must call the hooks below: memory history is on, or a profiler of this
// thread records memory. One relaxed load and a thread-local lookup when neither is.
bool observed() noexcept;

// A foo block was just allocated (`ptr` non-null) on `device`.
void on_alloc(void* ptr, c10::DeviceIndex device) noexcept;
// A foo block is about to go back to the allocator; `after_free` runs once it has.
struct FreeNote {
  bool known = false;
  c10::DeviceIndex device = 0;
  size_t size = 0;
};
FreeNote before_free(void* ptr) noexcept;
void after_free(void* ptr, const FreeNote& note) noexcept;
// The allocator refused `nbytes` on `device`.
void on_oom(c10::DeviceIndex device, size_t nbytes) noexcept;

}  // namespace foo::memory
