// Kernel wrappers registered for PrivateUse1 (see register.cpp). Each unpacks its arguments,
// infers the output, and calls Rust; none computes on tensor data itself.
#pragma once

#include <ATen/ATen.h>

namespace foo::ops {

// ---- factories and memory (ops_memory.cpp) -----------------------------------------------
at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format);
at::Tensor efficientzerotensor(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory);
at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                         std::optional<bool> pin_memory);
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking);
at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst);
at::Tensor& fill_scalar(at::Tensor& self, const c10::Scalar& value);
at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value);
// fill_ without ATen's range check: `value` converted as a tensor copy converts it (the glue's own
// 0-dim operands, e.g. a CPU scalar tensor moved to foo).
at::Tensor& fill_wrapping(at::Tensor& self, const c10::Scalar& value);
at::Tensor& zero(at::Tensor& self);
c10::Scalar local_scalar_dense(const at::Tensor& self);

// ---- views and metadata (ops_view.cpp): ATen's own metadata implementations ---------------
at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size);
at::Tensor as_strided(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                      std::optional<c10::SymInt> storage_offset);
at::Tensor reshape_alias(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride);
const at::Tensor& resize(const at::Tensor& self, c10::SymIntArrayRef size, std::optional<c10::MemoryFormat> memory_format);
at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source);
at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source);
at::Tensor& set_source_storage_offset(at::Tensor& self, c10::Storage source, c10::SymInt storage_offset,
                                      c10::SymIntArrayRef size, c10::SymIntArrayRef stride);
at::Tensor& set_empty(at::Tensor& self);
at::Tensor unfold(const at::Tensor& self, int64_t dimension, int64_t size, int64_t step);
at::Tensor view_as_real(const at::Tensor& self);
at::Tensor view_as_complex(const at::Tensor& self);
bool is_set_to(const at::Tensor& self, const at::Tensor& tensor);
at::Tensor narrow_copy(const at::Tensor& self, int64_t dim, int64_t start, int64_t length);
bool equal(const at::Tensor& self, const at::Tensor& other);
// Whether `self` may take `from`'s data in place (Module.to keeping Parameter identity, `p.data = ...`).
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from);

}  // namespace foo::ops
