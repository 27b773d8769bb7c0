#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

namespace foo {

// A PrivateUse1 generator whose state (seed, offset) lives in Rust (src/runtime/rng.rs);
// this object only holds the Rust id.
class FooGeneratorImpl final : public c10::GeneratorImpl {
 public:
  // A new generator for `device` (torch.Generator(device="foo")).
  explicit FooGeneratorImpl(c10::DeviceIndex device);
  // A handle onto an existing Rust generator (default generators, clones).
  FooGeneratorImpl(c10::DeviceIndex device, uint64_t id, bool owned);
  ~FooGeneratorImpl() override;

  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  uint64_t rust_id() const { return id_; }

 private:
  FooGeneratorImpl* clone_impl() const override;
  uint64_t id_;
  bool owned_;
};

const at::Generator& default_generator(c10::DeviceIndex device);

}  // namespace foo
