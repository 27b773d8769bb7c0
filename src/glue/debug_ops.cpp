// foo_rs's own operators (namespace foo_rs), for tests and diagnostics.
#include <torch/library.h>

#include "common.h"

namespace foo {
namespace {

// Makes Rust panic behind the C ABI; the panic must come back as a RuntimeError.
at::Tensor debug_panic(const at::Tensor& self) {
  check(foo_debug_panic(), "foo_rs::_debug_panic");
  return self;
}

}  // namespace

TORCH_LIBRARY(foo_rs, m) { m.def("_debug_panic(Tensor self) -> Tensor"); }

TORCH_LIBRARY_IMPL(foo_rs, PrivateUse1, m) { m.impl("_debug_panic", debug_panic); }

}  // namespace foo
