// The index / data-movement family (ops_index.cpp, ops_index_misc.cpp; registered in
// register_index.cpp). Shape checks and restriding live here; Rust (foo_ffi.h) moves data.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <tuple>
#include <vector>

#include "common.h"
#include "foo_ffi.h"

namespace foo::idx {

// Which Python exception an out-of-range index raises (ATen's CPU choice per op).
enum class OutOfRange { IndexError, RuntimeError };

// Like check(), but a FOO_STATUS_INVALID_ARGUMENT (an out-of-range index) becomes `kind` with the
// Rust message, preceded by `prefix`.
void check_index(int32_t status, const char* what, OutOfRange kind, const char* prefix = "");

// An int64 index tensor on `device` (int32 and CPU indices are converted).
at::Tensor long_index(const at::Tensor& index, const c10::Device& device);

}  // namespace foo::idx

namespace foo::ops {

// ---- advanced indexing (ops_index.cpp) ------------------------------------------------------
at::Tensor index(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices);
at::Tensor& index_out(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices, at::Tensor& out);
at::Tensor& index_put_impl_(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                            const at::Tensor& values, bool accumulate, bool unsafe);
at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index);
at::Tensor& index_select_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, at::Tensor& out);
at::Tensor take(const at::Tensor& self, const at::Tensor& index);
at::Tensor& take_out(const at::Tensor& self, const at::Tensor& index, at::Tensor& out);
at::Tensor gather(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad);
at::Tensor& gather_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad, at::Tensor& out);

at::Tensor scatter_src(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src);
at::Tensor& scatter_src_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src);
at::Tensor& scatter_src_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                            at::Tensor& out);
at::Tensor scatter_value(const at::Tensor& self, int64_t dim, const at::Tensor& index, const c10::Scalar& value);
at::Tensor& scatter_value_(at::Tensor& self, int64_t dim, const at::Tensor& index, const c10::Scalar& value);
at::Tensor& scatter_value_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const c10::Scalar& value,
                              at::Tensor& out);
at::Tensor scatter_reduce(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                          c10::string_view reduce);
at::Tensor& scatter_reduce_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                            c10::string_view reduce);
at::Tensor& scatter_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                               c10::string_view reduce, at::Tensor& out);
at::Tensor scatter_value_reduce(const at::Tensor& self, int64_t dim, const at::Tensor& index, const c10::Scalar& value,
                                c10::string_view reduce);
at::Tensor& scatter_value_reduce_(at::Tensor& self, int64_t dim, const at::Tensor& index, const c10::Scalar& value,
                                  c10::string_view reduce);
at::Tensor& scatter_value_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                     const c10::Scalar& value, c10::string_view reduce, at::Tensor& out);
at::Tensor scatter_add(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src);
at::Tensor& scatter_add_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src);
at::Tensor& scatter_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                            at::Tensor& out);
at::Tensor scatter_reduce_two(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                              c10::string_view reduce, bool include_self);
at::Tensor& scatter_reduce_two_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                c10::string_view reduce, bool include_self);
at::Tensor& scatter_reduce_two_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                   c10::string_view reduce, bool include_self, at::Tensor& out);

at::Tensor index_add(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                     const c10::Scalar& alpha);
at::Tensor& index_add_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                       const c10::Scalar& alpha);
at::Tensor& index_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                          const c10::Scalar& alpha, at::Tensor& out);
at::Tensor index_copy(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source);
at::Tensor& index_copy_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source);
at::Tensor& index_copy_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                           at::Tensor& out);
at::Tensor& index_fill_scalar_(at::Tensor& self, int64_t dim, const at::Tensor& index, const c10::Scalar& value);
at::Tensor& index_fill_tensor_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& value);

// ---- cat, compaction, sorting, factories, movement (ops_index_misc.cpp) ---------------------
at::Tensor cat(const at::ITensorListRef& tensors, int64_t dim);
at::Tensor& cat_out(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out);
at::Tensor nonzero(const at::Tensor& self);
at::Tensor& nonzero_out(const at::Tensor& self, at::Tensor& out);
at::Tensor masked_select(const at::Tensor& self, const at::Tensor& mask);
at::Tensor& masked_select_out(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out);
at::Tensor& masked_scatter_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& source);
std::tuple<at::Tensor, at::Tensor> sort_stable(const at::Tensor& self, std::optional<bool> stable, int64_t dim,
                                               bool descending);
std::tuple<at::Tensor&, at::Tensor&> sort_values_stable(const at::Tensor& self, std::optional<bool> stable, int64_t dim,
                                                        bool descending, at::Tensor& values, at::Tensor& indices);
std::tuple<at::Tensor, at::Tensor> topk(const at::Tensor& self, c10::SymInt k, int64_t dim, bool largest, bool sorted);
std::tuple<at::Tensor&, at::Tensor&> topk_values(const at::Tensor& self, c10::SymInt k, int64_t dim, bool largest,
                                                 bool sorted, at::Tensor& values, at::Tensor& indices);
at::Tensor& arange_out(const c10::Scalar& start, const c10::Scalar& end, const c10::Scalar& step, at::Tensor& out);
at::Tensor& linspace_out(const c10::Scalar& start, const c10::Scalar& end, int64_t steps, at::Tensor& out);
at::Tensor& eye_out(c10::SymInt n, at::Tensor& out);
at::Tensor& eye_m_out(c10::SymInt n, c10::SymInt m, at::Tensor& out);
at::Tensor tril(const at::Tensor& self, c10::SymInt diagonal);
at::Tensor& tril_(at::Tensor& self, c10::SymInt diagonal);
at::Tensor& tril_out(const at::Tensor& self, c10::SymInt diagonal, at::Tensor& out);
at::Tensor triu(const at::Tensor& self, c10::SymInt diagonal);
at::Tensor& triu_(at::Tensor& self, c10::SymInt diagonal);
at::Tensor& triu_out(const at::Tensor& self, c10::SymInt diagonal, at::Tensor& out);
at::Tensor flip(const at::Tensor& self, at::IntArrayRef dims);
at::Tensor roll(const at::Tensor& self, c10::SymIntArrayRef shifts, at::IntArrayRef dims);

}  // namespace foo::ops
