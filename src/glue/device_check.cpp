// The device check of PyTorch's generated CUDA wrappers, for foo's kernels (FOO_IMPL) and the
// CPU fallback: which arguments of an op must share one device (see common.h).
#include <algorithm>
#include <iterator>
#include <string_view>

#include "common.h"

namespace foo {
namespace {

// Ops whose native_functions.yaml entry says `device_check: NoCheck`, sorted (build.rs writes
// the list from the installed torch).
constexpr std::string_view kNoCheck[] = {
#include "device_check_nocheck.inc"
};

// Copies between devices by definition (no CUDA kernel, so no entry says NoCheck).
constexpr std::string_view kCrossDevice[] = {"_copy_from", "_copy_from_and_resize"};

bool skips_check(std::string_view name) {
  return std::binary_search(std::begin(kNoCheck), std::end(kNoCheck), name) ||
         std::find(std::begin(kCrossDevice), std::end(kCrossDevice), name) != std::end(kCrossDevice);
}

}  // namespace

DeviceCheck device_check_for(const c10::OperatorHandle& op) {
  const c10::FunctionSchema& schema = op.schema();
  std::string name = schema.name();
  if (name.rfind("aten::", 0) == 0) name = name.substr(6);
  if (!schema.overload_name().empty()) name += "." + schema.overload_name();
  DeviceCheck c;
  c.schema = &schema;
  c.method = "aten::" + name;
  // Ops of other namespaces (none has a CUDA wrapper to copy) and the NoCheck ones are skipped.
  c.enabled = schema.name().rfind("aten::", 0) == 0 && !skips_check(name);
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size() && i < 64; ++i) {
    if (args[i].is_out()) c.out |= uint64_t{1} << i;
    if (!args[i].kwarg_only()) c.positional |= uint64_t{1} << i;
  }
  return c;
}

void out_off_device(const DeviceCheck& c, size_t i, const at::Tensor& t) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, foo:0 and ",
              t.device(), "! (when checking argument ", c.schema->arguments()[i].name(), " of ", c.method, ")");
}

namespace {
// TensorIterator's rule for the `NoCheck` ops with out= arguments that reach the fallback: the out=
// tensors and every input of one or more dims share one device (a CPU 0-dim input is a scalar).
// The CPU copy would otherwise accept lgamma(cpu_x, out=foo_y) or cumsum(foo_x, out=cpu_y).
void check_out_and_inputs(const DeviceCheck& c, const c10::IValue* args, size_t n) {
  std::optional<c10::Device> common;
  for (size_t i = 0; i < n && i < 64; ++i) {
    if (!(c.out >> i & 1) || !args[i].isTensor()) continue;
    const at::Tensor& t = args[i].toTensor();
    if (!t.defined()) continue;
    if (!t.device().is_privateuseone()) out_off_device(c, i, t);
    common = t.device();
  }
  if (!common) return;
  for (size_t i = 0; i < n && i < 64; ++i) {
    if ((c.out >> i & 1) || !args[i].isTensor()) continue;
    const at::Tensor& t = args[i].toTensor();
    if (!t.defined() || t.device() == *common || (t.device().is_cpu() && t.dim() == 0)) continue;
    TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ", *common,
                " and ", t.device(), "! (when checking argument ", c.schema->arguments()[i].name(), " of ", c.method,
                ")");
  }
}
}  // namespace

void check_stack_devices(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const DeviceCheck c = device_check_for(op);
  const size_t n = c.schema->arguments().size();
  TORCH_INTERNAL_ASSERT(stack.size() >= n);
  const c10::IValue* args = stack.data() + (stack.size() - n);
  if (!c.enabled) {
    if (c.out != 0 && c.schema->name().rfind("aten::", 0) == 0) check_out_and_inputs(c, args, n);
    return;
  }
  std::optional<c10::Device> common;
  auto visit = [&](size_t i) {
    const char* arg = c.schema->arguments()[i].name().c_str();
    const c10::IValue& v = args[i];
    if (v.isTensor()) {
      c10::impl::check_and_update_common_device(common, v.toTensor(), c.method.c_str(), arg);
    } else if (v.isList()) {  // Tensor[] and Tensor?[]
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor()) c10::impl::check_and_update_common_device(common, e.toTensor(), c.method.c_str(), arg);
      }
    }
  };
  for (size_t i = 0; i < n && i < 64; ++i) {
    if (c.out >> i & 1) visit(i);
  }
  for (size_t i = 0; i < n && i < 64; ++i) {
    if (c.positional >> i & 1) visit(i);
  }
}

void check_same_device(const at::Tensor& self, std::initializer_list<std::reference_wrapper<const at::Tensor>> others,
                       bool cpu_scalars) {
  for (const at::Tensor& t : others) {
    if (!t.defined() || t.device() == self.device()) continue;
    if (cpu_scalars && t.device().is_cpu() && t.dim() == 0) continue;
    TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ", self.device(),
                " and ", t.device(), "!");
  }
}

NativeOp native_op(const char* name, size_t arity) {
  const std::string_view full(name);
  const size_t dot = full.find('.');
  const std::string base = "aten::" + std::string(full.substr(0, dot));
  const std::string overload = dot == std::string_view::npos ? "" : std::string(full.substr(dot + 1));
  NativeOp op{c10::Dispatcher::singleton().findSchemaOrThrow(base.c_str(), overload.c_str()),
              foo_native_slot(("aten::" + std::string(full)).c_str()), {}};
  op.devices = device_check_for(op.handle);
  TORCH_INTERNAL_ASSERT(op.handle.schema().arguments().size() == arity, "foo kernel for ", name, " takes ", arity,
                        " arguments, its schema ", op.handle.schema().arguments().size());
  return op;
}

}  // namespace foo
