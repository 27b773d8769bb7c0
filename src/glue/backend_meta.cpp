// Backend metadata of foo tensors: the named flags of torch._utils.set_tensor_metadata, kept on the
// tensor's TensorImpl, so that they travel through torch.save/torch.load (the pickler asks the
// PrivateUse1 registry below for them) and into the fake tensors of torch.compile
// (torch._utils.get_tensor_metadata of a graph input). foo's kernels read none of them: the flags are
// for the code that sets them (a vendor's layout tag, a quantization marker).
#include <torch/csrc/jit/serialization/pickler_helper.h>

#include <string>
#include <unordered_map>

#include "common.h"

namespace foo {
namespace {

struct FooBackendMeta final : c10::BackendMeta {
  std::unordered_map<std::string, bool> flags;

  // A shallow copy of the tensor (detach, views, fake tensors) gets its own copy of the flags.
  c10::intrusive_ptr<c10::BackendMeta> clone(const c10::intrusive_ptr<c10::BackendMeta>& /*ptr*/) const override {
    auto copy = c10::make_intrusive<FooBackendMeta>();
    copy->flags = flags;
    return copy;
  }
};

// getTensorMetadata: adds the tensor's flags to the map (conj/neg bits are already there).
void get_flags(const at::Tensor& t, std::unordered_map<std::string, bool>& metadata) {
  if (auto* meta = dynamic_cast<FooBackendMeta*>(t.unsafeGetTensorImpl()->get_backend_meta())) {
    for (const auto& [key, value] : meta->flags) metadata[key] = value;
  }
}

// setTensorMetadata: the map becomes the tensor's flags (set_tensor_metadata replaces, as openreg's).
void set_flags(const at::Tensor& t, std::unordered_map<std::string, bool>& metadata) {
  auto meta = c10::make_intrusive<FooBackendMeta>();
  meta->flags = metadata;
  t.unsafeGetTensorImpl()->set_backend_meta(meta);
}

const bool registered = [] {
  torch::jit::TensorBackendMetaRegistry(c10::DeviceType::PrivateUse1, &get_flags, &set_flags);
  return true;
}();

}  // namespace
}  // namespace foo
