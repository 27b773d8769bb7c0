// AOTInductor's model runner for foo: what torch._inductor.aoti_load_package (and C++'s
// AOTIModelPackageLoader) builds to run a package compiled for foo.
//
// Why C++: the loader looks the package's device ("foo", the AOTI_DEVICE_KEY of its metadata)
// up in a registry only C++ can add to (torch::inductor::RegisterAOTIModelRunner); PyTorch
// registers cpu, cuda, xpu and mps. Nothing else of the runner differs from the CPU's: foo
// memory is host memory, so the model container runs the package's code on the calling thread
// with no stream, as on the CPU.
//
// The device string: the container hands it to AOTInductorModelBase, whose parse_device_str
// (aoti_runtime/model_base.h) accepts cpu|cuda|xpu|mps only. foo's runner passes "cpu:N" (N the
// foo device's index): the runtime then loads the model's constants as host tensors over its
// constants blob, as for a CPU model, and the code foo's C++ wrapper generates
// (python/foo_rs/compile/aoti.py) allocates its buffers on foo:N (this->device_idx_), uploads
// the constants to foo:N at the first run, and calls extern kernels and fallback ops as foo's
// native ops through the dispatcher.
#include <c10/core/Device.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/inductor/aoti_runner/model_container_runner.h>

#include <memory>
#include <string>

namespace foo {
namespace {

class FooAOTIRunner : public torch::inductor::AOTIModelContainerRunner {
 public:
  FooAOTIRunner(const std::string& model_so_path, size_t num_models, const std::string& container_device,
                const std::string& bin_dir, bool run_single_threaded)
      : AOTIModelContainerRunner(model_so_path, num_models, container_device, bin_dir, run_single_threaded) {}
};

// "foo" or "foo:N" -> "cpu:N", N the current foo device where the string names none.
std::string container_device(const std::string& device_str) {
  const c10::Device device(device_str);
  TORCH_CHECK(device.type() == c10::DeviceType::PrivateUse1, "foo's AOTInductor runner got device '", device_str,
              "'");
  const c10::DeviceIndex index =
      device.has_index() ? device.index()
                         : c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->getDevice().index();
  return "cpu:" + std::to_string(index);
}

std::unique_ptr<torch::inductor::AOTIModelContainerRunner> create_foo_runner(const std::string& model_so_path,
                                                                             size_t num_models,
                                                                             const std::string& device_str,
                                                                             const std::string& bin_dir,
                                                                             const bool run_single_threaded) {
  return std::make_unique<FooAOTIRunner>(model_so_path, num_models, container_device(device_str), bin_dir,
                                         run_single_threaded);
}

const torch::inductor::RegisterAOTIModelRunner register_foo_runner("foo", &create_foo_runner);

}  // namespace
}  // namespace foo
