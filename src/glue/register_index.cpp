// Registrations of the index / data-movement family (ops_index.cpp, ops_index_misc.cpp).
#include <torch/library.h>

#include "common.h"
#include "ops_index.h"

namespace foo {

namespace ops {
// ops_index.cpp (declared here to keep the shared glue headers, and so every object's cache key, stable).
at::Tensor& put_(at::Tensor& self, const at::Tensor& index, const at::Tensor& source, bool accumulate);
}  // namespace ops

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // advanced indexing
  FOO_IMPL(m, "index.Tensor", ops::index);
  FOO_IMPL(m, "index.Tensor_out", ops::index_out);
  FOO_IMPL(m, "_index_put_impl_", ops::index_put_impl_);
  FOO_IMPL(m, "index_select", ops::index_select);
  FOO_IMPL(m, "index_select.out", ops::index_select_out);
  FOO_IMPL(m, "take", ops::take);
  FOO_IMPL(m, "take.out", ops::take_out);
  FOO_IMPL(m, "put_", ops::put_);
  FOO_IMPL(m, "gather", ops::gather);
  FOO_IMPL(m, "gather.out", ops::gather_out);
  FOO_IMPL(m, "scatter.src", ops::scatter_src);
  FOO_IMPL(m, "scatter_.src", ops::scatter_src_);
  FOO_IMPL(m, "scatter.src_out", ops::scatter_src_out);
  FOO_IMPL(m, "scatter.value", ops::scatter_value);
  FOO_IMPL(m, "scatter_.value", ops::scatter_value_);
  FOO_IMPL(m, "scatter.value_out", ops::scatter_value_out);
  FOO_IMPL(m, "scatter.reduce", ops::scatter_reduce);
  FOO_IMPL(m, "scatter_.reduce", ops::scatter_reduce_);
  FOO_IMPL(m, "scatter.reduce_out", ops::scatter_reduce_out);
  FOO_IMPL(m, "scatter.value_reduce", ops::scatter_value_reduce);
  FOO_IMPL(m, "scatter_.value_reduce", ops::scatter_value_reduce_);
  FOO_IMPL(m, "scatter.value_reduce_out", ops::scatter_value_reduce_out);
  FOO_IMPL(m, "scatter_add", ops::scatter_add);
  FOO_IMPL(m, "scatter_add_", ops::scatter_add_);
  FOO_IMPL(m, "scatter_add.out", ops::scatter_add_out);
  FOO_IMPL(m, "scatter_reduce.two", ops::scatter_reduce_two);
  FOO_IMPL(m, "scatter_reduce_.two", ops::scatter_reduce_two_);
  FOO_IMPL(m, "scatter_reduce.two_out", ops::scatter_reduce_two_out);
  FOO_IMPL(m, "index_add", ops::index_add);
  FOO_IMPL(m, "index_add_", ops::index_add_);
  FOO_IMPL(m, "index_add.out", ops::index_add_out);
  FOO_IMPL(m, "index_copy", ops::index_copy);
  FOO_IMPL(m, "index_copy_", ops::index_copy_);
  FOO_IMPL(m, "index_copy.out", ops::index_copy_out);
  FOO_IMPL(m, "index_fill_.int_Scalar", ops::index_fill_scalar_);
  FOO_IMPL(m, "index_fill_.int_Tensor", ops::index_fill_tensor_);
  // cat, compaction
  FOO_IMPL(m, "cat", ops::cat);
  FOO_IMPL(m, "cat.out", ops::cat_out);
  FOO_IMPL(m, "nonzero", ops::nonzero);
  FOO_IMPL(m, "nonzero.out", ops::nonzero_out);
  FOO_IMPL(m, "masked_select", ops::masked_select);
  FOO_IMPL(m, "masked_select.out", ops::masked_select_out);
  FOO_IMPL(m, "masked_scatter_", ops::masked_scatter_);
  // sorting
  FOO_IMPL(m, "sort.stable", ops::sort_stable);
  FOO_IMPL(m, "sort.values_stable", ops::sort_values_stable);
  FOO_IMPL(m, "topk", ops::topk);
  FOO_IMPL(m, "topk.values", ops::topk_values);
  // factories
  FOO_IMPL(m, "arange.start_out", ops::arange_out);
  FOO_IMPL(m, "linspace.out", ops::linspace_out);
  FOO_IMPL(m, "eye.out", ops::eye_out);
  FOO_IMPL(m, "eye.m_out", ops::eye_m_out);
  FOO_IMPL(m, "tril", ops::tril);
  FOO_IMPL(m, "tril_", ops::tril_);
  FOO_IMPL(m, "tril.out", ops::tril_out);
  FOO_IMPL(m, "triu", ops::triu);
  FOO_IMPL(m, "triu_", ops::triu_);
  FOO_IMPL(m, "triu.out", ops::triu_out);
  // movement
  FOO_IMPL(m, "flip", ops::flip);
  FOO_IMPL(m, "roll", ops::roll);
}

}  // namespace foo
