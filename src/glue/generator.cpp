#include "generator.h"

#include <ATen/ATen.h>
#include <ATen/core/GeneratorForPrivateuseone.h>

#include <cstring>
#include <mutex>
#include <vector>

#include "common.h"

namespace foo {

namespace {
constexpr size_t kStateBytes = 16;  // seed then offset, little-endian u64 (rng.rs STATE_BYTES)

uint64_t new_rust_generator(c10::DeviceIndex device) {
  uint64_t id = 0;
  check(foo_generator_new(device < 0 ? foo_current_device() : device, &id), "foo Generator");
  return id;
}
}  // namespace

FooGeneratorImpl::FooGeneratorImpl(c10::DeviceIndex device)
    : FooGeneratorImpl(device < 0 ? static_cast<c10::DeviceIndex>(foo_current_device()) : device,
                       new_rust_generator(device), true) {}

FooGeneratorImpl::FooGeneratorImpl(c10::DeviceIndex device, uint64_t id, bool owned)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      id_(id),
      owned_(owned) {}

FooGeneratorImpl::~FooGeneratorImpl() {
  if (owned_) foo_generator_release(id_);
}

void FooGeneratorImpl::set_current_seed(uint64_t seed) { check(foo_generator_set_seed(id_, seed), "manual_seed"); }

void FooGeneratorImpl::set_offset(uint64_t offset) { check(foo_generator_set_offset(id_, offset), "set_offset"); }

uint64_t FooGeneratorImpl::get_offset() const {
  uint64_t seed = 0, offset = 0;
  check(foo_generator_get(id_, &seed, &offset), "get_offset");
  return offset;
}

uint64_t FooGeneratorImpl::current_seed() const {
  uint64_t seed = 0, offset = 0;
  check(foo_generator_get(id_, &seed, &offset), "initial_seed");
  return seed;
}

uint64_t FooGeneratorImpl::seed() {
  const uint64_t s = foo_nondeterministic_seed();
  set_current_seed(s);
  return s;
}

void FooGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  TORCH_CHECK(new_state.device().is_cpu() && new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>(),
              "foo RNG state must be a CPU torch.ByteTensor (uint8)");
  TORCH_CHECK(static_cast<size_t>(new_state.numel()) == kStateBytes && new_state.is_contiguous(),
              "foo RNG state must hold ", kStateBytes, " bytes (seed, offset); got ", new_state.numel());
  uint64_t words[2];
  std::memcpy(words, new_state.data(), kStateBytes);
  check(foo_generator_set_seed(id_, words[0]), "set_state");
  check(foo_generator_set_offset(id_, words[1]), "set_state");
}

c10::intrusive_ptr<c10::TensorImpl> FooGeneratorImpl::get_state() const {
  uint64_t words[2];
  check(foo_generator_get(id_, &words[0], &words[1]), "get_state");
  auto state = at::empty({static_cast<int64_t>(kStateBytes)}, at::TensorOptions().dtype(at::kByte));
  std::memcpy(state.data_ptr(), words, kStateBytes);
  return state.getIntrusivePtr();
}

FooGeneratorImpl* FooGeneratorImpl::clone_impl() const {
  uint64_t id = 0;
  check(foo_generator_clone(id_, &id), "Generator.clone");
  return new FooGeneratorImpl(device().index(), id, true);
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  static std::once_flag once;
  static std::vector<at::Generator> generators;
  std::call_once(once, [] {
    const int32_t n = foo_device_count();
    for (int32_t d = 0; d < n; ++d) {
      uint64_t id = 0;
      check(foo_generator_default(d, &id), "default generator");
      generators.emplace_back(at::make_generator<FooGeneratorImpl>(static_cast<c10::DeviceIndex>(d), id, false));
    }
  });
  const auto index = device < 0 ? static_cast<c10::DeviceIndex>(foo_current_device()) : device;
  TORCH_CHECK(index < static_cast<c10::DeviceIndex>(generators.size()), "Invalid device index ",
              static_cast<int>(index), ": foo has ", generators.size(), " device(s)");
  return generators[index];
}

}  // namespace foo
