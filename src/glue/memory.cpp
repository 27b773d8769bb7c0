// Factories (empty, empty_strided, the zero tensor), copies between foo and the CPU, fill_, zero_
// and item(): argument checks and allocation here, data movement in Rust.
#include <ATen/EmptyTensor.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/TensorFactories.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "common.h"
#include "memory.h"

namespace foo::ops {

at::Tensor& fill_wrapping(at::Tensor& self, const c10::Scalar& value) {
  check_supported_dtype(self.scalar_type(), "fill_");
  if (self.numel() == 0) return self;
  TORCH_CHECK(at::has_internal_overlap(self) != at::MemOverlap::Yes,
              "unsupported operation: more than one element of the written-to tensor refers to a single memory "
              "location. Please clone() the tensor before performing the operation.");
  const FooTensor d = describe(self);
  const FooScalar v = to_ffi(value);
  check(foo_fill(&d, &v), "fill_");
  return self;
}

namespace {

void check_factory_args(c10::Device device, std::optional<c10::Layout> layout, std::optional<bool> pin_memory) {
  TORCH_CHECK(device.is_privateuseone(), "foo factory called for device ", device);
  TORCH_CHECK_NOT_IMPLEMENTED(c10::layout_or_default(layout) == c10::Layout::Strided,
                              "foo supports only strided tensors, got layout ", c10::layout_or_default(layout));
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "Only dense CPU tensors can be pinned");
}

bool on_foo_or_cpu(const at::Tensor& t) { return t.device().is_privateuseone() || t.device().is_cpu(); }

// As the CPU's empty: under torch.use_deterministic_algorithms(True) (with
// torch.utils.deterministic.fill_uninitialized_memory, on by default) new memory holds NaN or the
// dtype's largest value instead of whatever was there.
at::Tensor fill_if_deterministic(at::Tensor t) {
  if (C10_UNLIKELY(at::globalContext().deterministicAlgorithms() &&
                   at::globalContext().deterministicFillUninitializedMemory())) {
    at::native::fill_empty_deterministic_(t);
  }
  return t;
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format) {
  const auto dev = c10::device_or_default(device);
  check_factory_args(dev, layout, pin_memory);
  const c10::DeviceGuard guard(dev);
  return fill_if_deterministic(at::detail::empty_generic(size, c10::GetAllocator(kFoo),
                                                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                         c10::dtype_or_default(dtype), memory_format));
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                         std::optional<bool> pin_memory) {
  const auto dev = c10::device_or_default(device);
  check_factory_args(dev, layout, pin_memory);
  const c10::DeviceGuard guard(dev);
  return fill_if_deterministic(at::detail::empty_strided_generic(size, stride, c10::GetAllocator(kFoo),
                                                                 c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                                 c10::dtype_or_default(dtype)));
}

// A tensor of zeros that owns no memory (autograd's zero gradients of e.g. torch.linalg ops): the
// ZeroTensor key makes ATen's ZeroTensor fallback materialize it where an op needs its values,
// and refuse writes, as on the CPU.
at::Tensor efficientzerotensor(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory) {
  const auto dev = c10::device_or_default(device);
  check_factory_args(dev, layout, pin_memory);
  at::native::ZeroTensorAllocator allocator(dev);
  const auto keys = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1) | c10::DispatchKeySet(c10::DispatchKey::ZeroTensor);
  return at::detail::empty_generic(size, &allocator, keys, c10::dtype_or_default(dtype), std::nullopt);
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool /*non_blocking: foo is synchronous*/) {
  TORCH_CHECK(self.defined() && dst.defined(), "copy_: undefined tensor");
  TORCH_CHECK(on_foo_or_cpu(self) && on_foo_or_cpu(dst), "foo copies only between foo and CPU tensors, got ",
              self.device(), " -> ", dst.device());
  check_supported_dtype(self.scalar_type(), "copy_");
  check_supported_dtype(dst.scalar_type(), "copy_");
  // Broadcast the source like copy_ does (raises for incompatible shapes).
  at::Tensor src = self.sizes().equals(dst.sizes()) ? self : self.expand(dst.sizes());
  if (dst.numel() == 0) return dst;
  TORCH_CHECK(at::has_internal_overlap(dst) != at::MemOverlap::Yes,
              "unsupported operation: more than one element of the written-to tensor refers to a single memory "
              "location. Please clone() the tensor before performing the operation.");
  if (dst.is_alias_of(src) && !dst.is_same(src)) {
    const auto overlap = at::get_overlap_status(dst, src);
    // As the CPU's TensorIterator: a partial overlap (a[1:].copy_(a[:-1])) is refused.
    TORCH_CHECK(overlap != at::MemOverlapStatus::Partial,
                "unsupported operation: some elements of the input tensor and the written-to tensor refer to a single "
                "memory location. Please clone() the tensor before performing the operation.");
    // The same memory seen another way (a.copy_(a.t())), or a layout too hard to tell: reading
    // and writing it in one pass would read already-written values, so the source is staged.
    if (overlap != at::MemOverlapStatus::No) src = src.clone(at::MemoryFormat::Contiguous);
  }
  const FooTensor d = describe(dst);
  const FooTensor s = describe(src);
  check(foo_copy(&d, &s), "copy_");
  // Rust copied the physical values; apply the conjugate/negative bits of the two views (the
  // Conjugate and Negative keys fall through to this kernel, see the end of this file).
  const bool conj = src.is_conj() != dst.is_conj();
  const bool neg = src.is_neg() != dst.is_neg();
  if (conj || neg) {
    at::Tensor physical = dst;
    if (physical.is_conj()) physical = at::_conj(physical);
    if (physical.is_neg()) physical = at::_neg_view(physical);
    if (physical.is_complex()) {
      at::Tensor parts = at::view_as_real(physical);
      if (neg) parts.mul_(-1);
      if (conj) parts.select(-1, 1).mul_(-1);
    } else if (neg) {
      physical.mul_(-1);
    }
  }
  return dst;
}

// The CPU fallback's way back for out= arguments. An out of another shape was resized by the CPU
// kernel, in the kernel's layout (column-major for the LAPACK ops, as linalg.inv's out=): it gets
// that layout here too, not row-major.
// The CPU fallback's way of handing an out= result back: dst takes the CPU result's layout, as the
// CPU kernel would have resized it.
at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (!dst.sizes().equals(self.sizes())) {
    if (self.is_non_overlapping_and_dense() || self.numel() == 0 ||
        at::has_internal_overlap(self) == at::MemOverlap::Yes) {
      dst.resize_(self.sizes());
      if (self.is_non_overlapping_and_dense() && !dst.strides().equals(self.strides())) {
        dst.as_strided_(self.sizes(), self.strides());
      }
    } else {
      // A view into a larger buffer (linalg_lstsq's solution is the first n rows of a column-major
      // max(m, n) x k buffer): the same strides over a buffer of the same extent.
      int64_t extent = 1;
      for (int64_t d = 0; d < self.dim(); ++d) extent += (self.size(d) - 1) * self.stride(d);
      dst.resize_({extent});
      dst.as_strided_(self.sizes(), self.strides(), dst.storage_offset());
    }
  }
  return copy_from(self, dst, false);
}

at::Tensor& fill_scalar(at::Tensor& self, const c10::Scalar& value) {
  // As the CPU's fill: a one-element float16/bfloat16 tensor (its scalar fast path) reads the value
  // as a double, so out of range is inf, not an error (torch.where(c, 2**31, half_tensor) works);
  // everything else checks the value against its own dtype's range.
  const auto st = self.scalar_type();
  check_scalar_fits(value, (st == at::kHalf || st == at::kBFloat16) && self.numel() == 1 ? at::kDouble : st);
  return fill_wrapping(self, value);
}

at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0,
              "fill_ only supports 0-dimension value tensor but got tensor with ", value.dim(), " dimensions.");
  // As ATen: a value on another device is read as a Scalar (range-checked); one on self's device
  // is copied, i.e. converted like any tensor.
  if (value.device() != self.device()) return fill_scalar(self, value.item());
  return fill_wrapping(self, value.item());
}

at::Tensor& zero(at::Tensor& self) { return fill_wrapping(self, 0); }

c10::Scalar local_scalar_dense(const at::Tensor& self) {
  check_supported_dtype(self.scalar_type(), "item");
  const FooTensor s = describe(self);
  FooScalar v{};
  check(foo_read_scalar(&s, &v), "item");
  return from_ffi(v);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // factories and memory (FOO_IMPL_META: no device kernel, see common.h)
  FOO_IMPL_META(m, "empty.memory_format", empty_memory_format);
  FOO_IMPL_META(m, "empty_strided", empty_strided);
  FOO_IMPL_META(m, "_efficientzerotensor", efficientzerotensor);
  FOO_IMPL(m, "_copy_from", copy_from);
  FOO_IMPL(m, "_copy_from_and_resize", copy_from_and_resize);
  FOO_IMPL(m, "fill_.Scalar", fill_scalar);
  FOO_IMPL(m, "fill_.Tensor", fill_tensor);
  FOO_IMPL(m, "zero_", zero);
  FOO_IMPL(m, "_local_scalar_dense", local_scalar_dense);
}

// Copies handle conjugate/negative views themselves (copy_from above): without this, the
// Conjugate fallback materializes the source by cloning it, which copies through _copy_from
// again, forever.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace foo::ops
