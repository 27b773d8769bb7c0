// Views and metadata: ATen's own metadata implementations (as PyTorch's reference backend does),
// so autograd, functionalization and fake tensors see ordinary strided tensors. Storage growth
// goes through resize_storage_bytes (Rust allocates and copies).
#include <ATen/native/Resize.h>
#include <ATen/native/ResizeCommon.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/is_set_to_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/StorageImpl.h>
#include <torch/library.h>

#include <array>

#include "common.h"

namespace foo::ops {
namespace {

at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

at::Tensor as_strided(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                      std::optional<c10::SymInt> storage_offset) {
  std::optional<int64_t> offset;
  if (storage_offset) offset = storage_offset->expect_int();
  return at::native::as_strided_tensorimpl(self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride), offset);
}

at::Tensor reshape_alias(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride));
}

const at::Tensor& resize(const at::Tensor& self, c10::SymIntArrayRef size, std::optional<c10::MemoryFormat> memory_format) {
  auto* impl = self.unsafeGetTensorImpl();
  // Metadata only; the storage is grown below by Rust.
  at::native::resize_impl_cpu_(impl, C10_AS_INTARRAYREF_SLOW(size), std::nullopt, /*resize_storage=*/false);
  if (memory_format && *memory_format != c10::MemoryFormat::Preserve) {
    impl->empty_tensor_restride(*memory_format);
  }
  if (impl->numel() > 0) {
    const size_t needed = at::detail::computeStorageNbytes(self.sizes(), self.strides(), self.dtype().itemsize(),
                                                           self.storage_offset());
    const auto& storage = impl->unsafe_storage();
    TORCH_CHECK(storage, "resize_: foo tensor without storage");
    if (needed > storage.nbytes()) {
      const c10::DeviceGuard guard(self.device());
      const auto old_nbytes = static_cast<int64_t>(storage.nbytes());
      resize_storage_bytes(storage.unsafeGetStorageImpl(), needed);
      // As the CPU: the grown part is NaN/max under deterministic algorithms.
      if (C10_UNLIKELY(at::globalContext().deterministicAlgorithms() &&
                       at::globalContext().deterministicFillUninitializedMemory())) {
        at::native::fill_resize_deterministic_(self, old_nbytes);
      }
    }
  }
  return self;
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) { return at::native::set_tensor_(self, source); }

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) { return at::native::set_(self, source); }

at::Tensor& set_source_storage_offset(at::Tensor& self, c10::Storage source, c10::SymInt storage_offset,
                                      c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  const auto sizes = C10_AS_INTARRAYREF_SLOW(size);
  const auto strides = C10_AS_INTARRAYREF_SLOW(stride);
  const int64_t offset = storage_offset.expect_int();
  at::native::checkSetStorage(self, source, offset, sizes, strides);
  self.unsafeGetTensorImpl()->set_storage_offset(offset);
  // The storage was checked large enough: metadata only.
  at::native::resize_impl_cpu_(self.unsafeGetTensorImpl(), sizes,
                               strides.data() != nullptr ? at::OptionalIntArrayRef(strides) : std::nullopt,
                               /*resize_storage=*/false);
  return self;
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, c10::GetAllocator(kFoo), true);
  const std::array<c10::SymInt, 1> empty_size{c10::SymInt(0)};
  return set_source_storage_offset(self, storage, 0, empty_size, {});
}

at::Tensor unfold(const at::Tensor& self, int64_t dimension, int64_t size, int64_t step) {
  return at::native::unfold(self, dimension, size, step);
}

at::Tensor view_as_real(const at::Tensor& self) { return at::native::view_as_real(self); }

at::Tensor view_as_complex(const at::Tensor& self) { return at::native::view_as_complex(self); }

bool is_set_to(const at::Tensor& self, const at::Tensor& tensor) { return at::native::is_set_to(self, tensor); }

// ATen's composite narrow_copy (narrow, then clone) raised IndexError for a dim past the end and
// its own words for a negative length; the CPU's kernel checks both first, with RuntimeError and
// the messages OpInfo's error_regex expects.
at::Tensor narrow_copy(const at::Tensor& self, int64_t dim, int64_t start, int64_t length) {
  TORCH_CHECK(self.dim() > 0, "narrow() cannot be applied to a 0-dim tensor.");
  TORCH_CHECK(dim < self.dim(), "Expected dim < static_cast<int64_t>(self_sizes.size()) to be true, but got false. ",
              "(narrow_copy: dim ", dim, " of a tensor of ", self.dim(), " dimensions)");
  const int64_t size = self.size(at::maybe_wrap_dim(dim, self.dim()));
  TORCH_CHECK_INDEX(start >= -size && start <= size, "start out of range (expected to be in range of [", -size, ", ",
                    size, "], but got ", start, ")");
  const int64_t first = start < 0 ? start + size : start;
  TORCH_CHECK(length >= 0 && first <= size - length, "start (", first, ") + length (", length,
              ") exceeds dimension size (", size, ").");
  return self.narrow(dim, first, length).clone(at::MemoryFormat::Contiguous);
}

// c10's TensorImpl::has_compatible_shallow_copy_type knows the dense tensors of CPU, CUDA and a
// few other backends, not PrivateUse1's: without this, `Module.to("foo")` replaces every
// Parameter by a new object (tied weights come apart, an optimizer built before the move updates
// nothing) and `p.data = p.data.to("foo")` raises. A dense foo tensor can take the data of any
// dense tensor and the reverse, as a CUDA tensor can a CPU tensor's.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  const auto dense = [](const at::Tensor& t) {
    const auto ks = t.key_set();
    return ks.has(c10::DispatchKey::Dense) && t.layout() == c10::kStrided && !t.is_quantized() && !t.is_nested();
  };
  if (dense(self) && dense(from)) return true;
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

bool equal(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.device() == other.device(), "Cannot compare two tensors on different devices. Got: ", self.device(),
              " and ", other.device());
  TORCH_CHECK(self.dtype() == other.dtype(), "Expected object of scalar type ", self.dtype(), " but got scalar type ",
              other.dtype(), " for argument 'other'");
  if (!self.is_same_size(other)) return false;
  if (self.numel() == 0) return true;
  // Composed of native foo kernels (eq, all) and one scalar read.
  return at::eq(self, other).all().item<bool>();
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // views and metadata
  FOO_IMPL_META(m, "view", view);
  FOO_IMPL_META(m, "as_strided", as_strided);
  FOO_IMPL_META(m, "_reshape_alias", reshape_alias);
  FOO_IMPL(m, "resize_", resize);
  FOO_IMPL_META(m, "set_.source_Tensor", set_source_tensor);
  FOO_IMPL_META(m, "set_.source_Storage", set_source_storage);
  FOO_IMPL_META(m, "set_.source_Storage_storage_offset", set_source_storage_offset);
  FOO_IMPL_META(m, "set_", set_empty);
  FOO_IMPL_META(m, "unfold", unfold);
  FOO_IMPL_META(m, "view_as_real", view_as_real);
  FOO_IMPL_META(m, "view_as_complex", view_as_complex);
  FOO_IMPL_META(m, "is_set_to", is_set_to);
  FOO_IMPL_META(m, "narrow_copy", narrow_copy);
  FOO_IMPL(m, "equal", equal);
  // Not FOO_IMPL: it compares a CPU and a foo tensor by design (Module.to), and is metadata only.
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
}

}  // namespace foo::ops
