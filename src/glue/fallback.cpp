// The one place foo computes on the CPU: ops without a native kernel are boxed, copied to the
// CPU, run by ATen's CPU kernel and copied back. Every call is counted (foo_rs.fallback_counts),
// the first call of each op warns, and FOO_RS_STRICT=1 turns it into NotImplementedError.
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include "common.h"

namespace foo {
namespace {

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& name = op.schema().operator_name();
  std::string full = name.name;
  if (!name.overload_name.empty()) full += "." + name.overload_name;
  const int32_t verdict = foo_fallback_hit(full.c_str());
  TORCH_CHECK_NOT_IMPLEMENTED(verdict >= 0, "foo_rs strict mode (FOO_RS_STRICT=1): '", full,
                              "' has no native foo kernel, and the CPU fallback is disabled");
  if (verdict == 1) {
    TORCH_WARN("foo_rs: '", full,
               "' has no native foo kernel; it runs on the CPU through the fallback (copied there and back). "
               "FOO_RS_STRICT=1 makes this an error.");
  }
  at::native::cpu_fallback(op, stack);
}

}  // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>()); }

// Autocast: ops without a foo autocast rule run unchanged.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

}  // namespace foo
