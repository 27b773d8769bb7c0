// The one place foo computes on the CPU: ops without a native kernel are boxed, copied to the
// CPU, run by ATen's CPU kernel and copied back. Every call is counted (foo_rs.fallback_counts),
// the first call of each op warns, and FOO_RS_STRICT=1 turns it into NotImplementedError. Native
// kernels hand over inputs they have no code for (NeedsFallback, common.h) the same way.
#include <ATen/MemoryOverlap.h>
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <optional>

#include "common.h"

namespace foo {

void count_fallback(const std::string& op, const std::string& why) {
  const std::string kernel = why.empty() ? "' has no native foo kernel" : "' has no native foo kernel for these inputs (" + why + ")";
  const int32_t verdict = foo_fallback_hit(op.c_str());
  TORCH_CHECK_NOT_IMPLEMENTED(verdict >= 0, "foo_rs strict mode (FOO_RS_STRICT=1): '", op, kernel,
                              ", and the CPU fallback is disabled");
  if (verdict == 1) {
    TORCH_WARN("foo_rs: '", op, kernel,
               "; it runs on the CPU through the fallback (copied there and back). "
               "FOO_RS_STRICT=1 makes this an error.");
  }
}

namespace {

// The device of the first foo tensor among the op's arguments, if any.
std::optional<c10::Device> first_foo_device(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const auto& args = op.schema().arguments();
  const size_t n = args.size();
  for (size_t i = stack.size() - n; i < stack.size(); ++i) {
    const auto& v = stack[i];
    // An op told where to put its result (`_to_copy(device=...)`, factories) is left alone.
    if (args[i - (stack.size() - n)].name() == "device" && !v.isNone()) return std::nullopt;
    if (v.isTensor()) {
      const auto& t = v.toTensor();
      if (t.defined() && t.device().is_privateuseone()) return t.device();
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) {
        if (t.defined() && t.device().is_privateuseone()) return t.device();
      }
    }
  }
  return std::nullopt;
}

// ATen's cpu_fallback sends new results to the device of the *first* tensor argument; when that
// is a CPU 0-dim tensor (`torch.tensor(2.) * z`, or `2 - z`, which rsub turns into a CPU scalar
// minus z) the result of a foo op would land on the CPU. Results that alias no argument go to the
// foo device instead, as CUDA's kernels put them on CUDA.
void return_to_foo(const c10::OperatorHandle& op, torch::jit::Stack& stack, c10::Device device) {
  const auto& returns = op.schema().returns();
  const size_t n = returns.size();
  for (size_t i = 0; i < n; ++i) {
    if (returns[i].alias_info() != nullptr) continue;  // in-place/out: already the argument itself
    auto& v = stack[stack.size() - n + i];
    if (v.isTensor()) {
      const auto& t = v.toTensor();
      if (t.defined() && t.device().is_cpu()) v = t.to(device);
    } else if (v.isTensorList()) {
      auto list = v.toTensorList();
      for (size_t j = 0; j < list.size(); ++j) {
        const at::Tensor t = list[j];
        if (t.defined() && t.device().is_cpu()) list[j] = t.to(device);
      }
    }
  }
}

// Replaces each foo tensor the op only reads (an out= tensor replaced by a copy would never
// receive the result) by `swap(t)`, where that gives one.
template <typename Swap>
void for_each_foo_input(const c10::OperatorHandle& op, torch::jit::Stack& stack, const Swap& swap) {
  const auto& args = op.schema().arguments();
  const size_t n = args.size();
  for (size_t i = stack.size() - n; i < stack.size(); ++i) {
    const c10::AliasInfo* alias = args[i - (stack.size() - n)].alias_info();
    if (!stack[i].isTensor() || (alias != nullptr && alias->isWrite())) continue;
    const at::Tensor t = stack[i].toTensor();
    if (!t.defined() || !t.device().is_privateuseone()) continue;
    if (std::optional<at::Tensor> r = swap(t)) stack[i] = std::move(*r);
  }
}

// ATen's LU-based ops factor A^T when A is contiguous and A otherwise, and their backward
// formulas read the factors the same way, from the foo tensor's own is_contiguous(). The copy to
// the CPU makes a strided (non-dense) A contiguous, so the CPU would factor A^T while the backward
// expects A (det's gradient came out transposed). Such an A goes over column-major instead: the
// same values, and as non-contiguous as on foo. Only inputs: an out= tensor replaced by a copy
// would never receive the result.
void keep_noncontiguous_matrices(const c10::OperatorHandle& op, torch::jit::Stack& stack) {
  const std::string& name = op.schema().operator_name().name;
  if (name != "aten::_linalg_det" && name != "aten::_linalg_slogdet" && name != "aten::_linalg_solve_ex") return;
  for_each_foo_input(op, stack, [](const at::Tensor& t) -> std::optional<at::Tensor> {
    if (t.dim() < 2 || t.is_contiguous() || t.is_non_overlapping_and_dense()) return std::nullopt;
    return t.mT().contiguous().mT();
  });
}

// The copy to the CPU (`t.cpu()`) gives a non-dense input dense strides, and ATen's CPU kernels
// take other paths for other layouts: elu's backward of nan is nan on its vectorised (dense) path
// and 1 on its strided one, so foo's fallback answered nan where the CPU, given the same strided
// tensor, answers 1. Such an input goes over with its own strides instead: the storage span it
// reaches is copied and viewed as on foo. Only inputs (an out= copy would never receive the
// result), and only spans up to 4x the elements (a column of a huge matrix still goes dense).
void keep_exact_layouts(const c10::OperatorHandle& op, torch::jit::Stack& stack) {
  for_each_foo_input(op, stack, [](const at::Tensor& t) -> std::optional<at::Tensor> {
    if (t.numel() == 0 || t.is_non_overlapping_and_dense() || t.is_conj() || t.is_neg() ||
        t.layout() != at::kStrided) {
      return std::nullopt;
    }
    int64_t span = 1;
    for (int64_t d = 0; d < t.dim(); ++d) span += (t.size(d) - 1) * t.stride(d);
    if (span > 4 * t.numel()) return std::nullopt;
    const at::Tensor flat = t.as_strided({span}, {1}, t.storage_offset()).cpu();
    return flat.as_strided(t.sizes(), t.strides(), 0);
  });
}

// The fallback hands the CPU kernel copies, so aliasing between an out= tensor and an input is
// lost; the CPU kernels that refuse such aliasing are checked here first.
void check_out_aliasing(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const auto& schema = op.schema();
  if (schema.operator_name().name != "aten::kthvalue" || schema.overload_name() != "values") return;
  const size_t n = schema.arguments().size();
  const at::Tensor& self = stack[stack.size() - n].toTensor();
  for (size_t i = stack.size() - 2; i < stack.size(); ++i) at::assert_no_overlap(stack[i].toTensor(), self);
}

// `why` is empty for ops without a native kernel, else the native kernel's reason.
void run_on_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack, const std::string& why) {
  const auto& name = op.schema().operator_name();
  std::string full = name.name;
  if (!name.overload_name.empty()) full += "." + name.overload_name;
  count_fallback(full, why);
  const std::optional<c10::Device> foo_device = first_foo_device(op, *stack);
  keep_exact_layouts(op, *stack);
  keep_noncontiguous_matrices(op, *stack);
  check_out_aliasing(op, *stack);
  at::native::cpu_fallback(op, stack);
  if (foo_device) return_to_foo(op, *stack, *foo_device);
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

// Out variants whose CompositeExplicitAutograd kernel accepts only CPU, CUDA and XPU tensors
// (mode.values: "mode only supports CPU, CUDA and XPU device type"): foo sends them through the
// counted CPU fallback explicitly.
//
// Structured ops without a foo kernel reach the fallback through their out= variant, with an out
// tensor the composite allocated row-major, so the CPU's layout rule (channels-last in, channels-last
// out) was lost. The padding ops go over as functional ops: the CPU allocates the result and its
// strides come back with it.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("mode.values", torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
  for (const char* op : {"reflection_pad1d", "reflection_pad2d", "reflection_pad3d", "replication_pad1d",
                         "replication_pad2d", "replication_pad3d", "reflection_pad1d_backward",
                         "reflection_pad2d_backward", "reflection_pad3d_backward", "replication_pad1d_backward",
                         "replication_pad2d_backward", "replication_pad3d_backward"}) {
    m.impl(op, torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
  }
}

// Autocast: ops without a foo autocast rule run unchanged.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

}  // namespace foo
