// Tensor.record_stream(stream) on foo. CUDA's marks the block as in use by `stream`, so that the
// caching allocator does not hand it out again before the work queued there has run. foo runs
// every kernel to completion before it returns, so the work of any stream is done by the time
// record_stream is called: nothing can still use the block, and the caching allocator may reuse
// it as soon as its tensors are gone. What remains is the check of the stream's device type.
#include <torch/library.h>

#include "common.h"

namespace foo::ops {

void record_stream(at::Tensor& self, c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == kFoo, "record_stream: expected a foo stream for a foo tensor, got a stream of ",
              stream.device());
  // Like CUDA's, a stream of another foo device is accepted: the tensor's device runs nothing
  // asynchronously either.
  (void)self;
}

}  // namespace foo::ops

namespace foo {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { FOO_IMPL_META(m, "record_stream", ops::record_stream); }

}  // namespace foo
