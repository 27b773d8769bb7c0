// The one place foo computes on the CPU: ops without a native kernel are boxed, copied to the
// CPU, run by ATen's CPU kernel and copied back. Every call is counted (foo_rs.fallback_counts),
// the first call of each op warns, and FOO_RS_STRICT=1 turns it into NotImplementedError. Native
// kernels hand over inputs they have no code for (NeedsFallback, common.h) the same way.
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include "common.h"

namespace foo {
namespace {

// `why` is empty for ops without a native kernel, else the native kernel's reason.
void run_on_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack, const std::string& why) {
  const auto& name = op.schema().operator_name();
  std::string full = name.name;
  if (!name.overload_name.empty()) full += "." + name.overload_name;
  const std::string kernel = why.empty() ? "' has no native foo kernel" : "' has no native foo kernel for these inputs (" + why + ")";
  const int32_t verdict = foo_fallback_hit(full.c_str());
  TORCH_CHECK_NOT_IMPLEMENTED(verdict >= 0, "foo_rs strict mode (FOO_RS_STRICT=1): '", full, kernel,
                              ", and the CPU fallback is disabled");
  if (verdict == 1) {
    TORCH_WARN("foo_rs: '", full, kernel,
               "; it runs on the CPU through the fallback (copied there and back). "
               "FOO_RS_STRICT=1 makes this an error.");
  }
  at::native::cpu_fallback(op, stack);
}

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  // Mixed devices are an error (as on CUDA), not something the copy to the CPU papers over.
  check_stack_devices(op, *stack);
  run_on_cpu(op, stack, "");
}

struct HandedOver final : c10::OperatorKernel {
  explicit HandedOver(std::string w) : why(std::move(w)) {}
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    run_on_cpu(op, stack, why);
  }
  std::string why;
};

}  // namespace

c10::BoxedKernel cpu_fallback_kernel(std::string why) {
  return c10::BoxedKernel::makeFromFunctor(std::make_unique<HandedOver>(std::move(why)));
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>()); }

// Autocast: ops without a foo autocast rule run unchanged.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

}  // namespace foo
