// The op table: every ATen op with a native foo kernel, one line each. Everything else reaches
// the counted CPU fallback (fallback.cpp).
#include <torch/library.h>

#include "common.h"
#include "ops.h"

namespace foo {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // factories and memory (FOO_IMPL_META: no device kernel, see common.h)
  FOO_IMPL_META(m, "empty.memory_format", ops::empty_memory_format);
  FOO_IMPL_META(m, "empty_strided", ops::empty_strided);
  FOO_IMPL_META(m, "_efficientzerotensor", ops::efficientzerotensor);
  FOO_IMPL(m, "_copy_from", ops::copy_from);
  FOO_IMPL(m, "_copy_from_and_resize", ops::copy_from_and_resize);
  FOO_IMPL(m, "fill_.Scalar", ops::fill_scalar);
  FOO_IMPL(m, "fill_.Tensor", ops::fill_tensor);
  FOO_IMPL(m, "zero_", ops::zero);
  FOO_IMPL(m, "_local_scalar_dense", ops::local_scalar_dense);
  // views and metadata
  FOO_IMPL_META(m, "view", ops::view);
  FOO_IMPL_META(m, "as_strided", ops::as_strided);
  FOO_IMPL_META(m, "_reshape_alias", ops::reshape_alias);
  FOO_IMPL(m, "resize_", ops::resize);
  FOO_IMPL_META(m, "set_.source_Tensor", ops::set_source_tensor);
  FOO_IMPL_META(m, "set_.source_Storage", ops::set_source_storage);
  FOO_IMPL_META(m, "set_.source_Storage_storage_offset", ops::set_source_storage_offset);
  FOO_IMPL_META(m, "set_", ops::set_empty);
  FOO_IMPL_META(m, "unfold", ops::unfold);
  FOO_IMPL_META(m, "view_as_real", ops::view_as_real);
  FOO_IMPL_META(m, "view_as_complex", ops::view_as_complex);
  FOO_IMPL_META(m, "is_set_to", ops::is_set_to);
  FOO_IMPL_META(m, "narrow_copy", ops::narrow_copy);
  FOO_IMPL(m, "equal", ops::equal);
  // Not FOO_IMPL: it compares a CPU and a foo tensor by design (Module.to), and is metadata only.
  m.impl("_has_compatible_shallow_copy_type", ops::has_compatible_shallow_copy_type);
}

// Copies handle conjugate/negative views themselves (ops_memory.cpp): without this, the
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

}  // namespace foo
