// Registrations of the reduction and scan kernels (ops_reduce.cpp).
#include <torch/library.h>

#include "common.h"
#include "ops_reduce.h"

namespace foo {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  FOO_IMPL(m, "sum", ops::sum);
  FOO_IMPL(m, "sum.dim_IntList", ops::sum_dim);
  FOO_IMPL(m, "sum.IntList_out", ops::sum_out);
  FOO_IMPL(m, "nansum", ops::nansum);
  FOO_IMPL(m, "nansum.out", ops::nansum_out);
  FOO_IMPL(m, "mean", ops::mean);
  FOO_IMPL(m, "mean.dim", ops::mean_dim);
  FOO_IMPL(m, "mean.out", ops::mean_out);
  FOO_IMPL(m, "prod", ops::prod);
  FOO_IMPL(m, "prod.dim_int", ops::prod_dim);
  FOO_IMPL(m, "prod.int_out", ops::prod_out);
  FOO_IMPL(m, "max", ops::max);
  FOO_IMPL(m, "max.unary_out", ops::max_unary_out);
  FOO_IMPL(m, "max.dim", ops::max_dim);
  FOO_IMPL(m, "max.dim_max", ops::max_dim_out);
  FOO_IMPL(m, "min", ops::min);
  FOO_IMPL(m, "min.unary_out", ops::min_unary_out);
  FOO_IMPL(m, "min.dim", ops::min_dim);
  FOO_IMPL(m, "min.dim_min", ops::min_dim_out);
  FOO_IMPL(m, "amax", ops::amax);
  FOO_IMPL(m, "amax.out", ops::amax_out);
  FOO_IMPL(m, "amin", ops::amin);
  FOO_IMPL(m, "amin.out", ops::amin_out);
  FOO_IMPL(m, "argmax", ops::argmax);
  FOO_IMPL(m, "argmax.out", ops::argmax_out);
  FOO_IMPL(m, "argmin", ops::argmin);
  FOO_IMPL(m, "argmin.out", ops::argmin_out);
  FOO_IMPL(m, "aminmax", ops::aminmax);
  FOO_IMPL(m, "aminmax.out", ops::aminmax_out);
  FOO_IMPL(m, "var.correction", ops::var_correction);
  FOO_IMPL(m, "var.correction_out", ops::var_correction_out);
  FOO_IMPL(m, "std.correction", ops::std_correction);
  FOO_IMPL(m, "std.correction_out", ops::std_correction_out);
  FOO_IMPL(m, "var_mean.correction", ops::var_mean);
  FOO_IMPL(m, "std_mean.correction", ops::std_mean);
  FOO_IMPL(m, "linalg_vector_norm", ops::linalg_vector_norm);
  FOO_IMPL(m, "linalg_vector_norm.out", ops::linalg_vector_norm_out);
  FOO_IMPL(m, "norm.ScalarOpt_dim", ops::norm_dim);
  FOO_IMPL(m, "norm.ScalarOpt_dim_dtype", ops::norm_dim_dtype);
  FOO_IMPL(m, "norm.out", ops::norm_out);
  FOO_IMPL(m, "norm.dtype_out", ops::norm_dtype_out);
  FOO_IMPL(m, "all", ops::all);
  FOO_IMPL(m, "all.all_out", ops::all_all_out);
  FOO_IMPL(m, "all.dim", ops::all_dim);
  FOO_IMPL(m, "all.out", ops::all_dim_out);
  FOO_IMPL(m, "all.dims", ops::all_dims);
  FOO_IMPL(m, "all.dims_out", ops::all_dims_out);
  FOO_IMPL(m, "any", ops::any);
  FOO_IMPL(m, "any.all_out", ops::any_all_out);
  FOO_IMPL(m, "any.dim", ops::any_dim);
  FOO_IMPL(m, "any.out", ops::any_dim_out);
  FOO_IMPL(m, "any.dims", ops::any_dims);
  FOO_IMPL(m, "any.dims_out", ops::any_dims_out);
  FOO_IMPL(m, "logsumexp", ops::logsumexp);
  FOO_IMPL(m, "logsumexp.out", ops::logsumexp_out);
  FOO_IMPL(m, "cumsum", ops::cumsum);
  FOO_IMPL(m, "cumsum_", ops::cumsum_);
  FOO_IMPL(m, "cumsum.out", ops::cumsum_out);
  FOO_IMPL(m, "cumprod", ops::cumprod);
  FOO_IMPL(m, "cumprod_", ops::cumprod_);
  FOO_IMPL(m, "cumprod.out", ops::cumprod_out);
}

}  // namespace foo
