#pragma once

#include <c10/core/Allocator.h>

namespace foo {
// The pinned-host allocator (returned by the hooks' getPinnedMemoryAllocator).
c10::Allocator* host_allocator();
}  // namespace foo
