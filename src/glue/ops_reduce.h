// Reduction and scan kernels registered for PrivateUse1 (ops_reduce.cpp, register_reduce.cpp).
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <tuple>

namespace foo::ops {

using at::Tensor;
using OptDtype = std::optional<at::ScalarType>;
using OptScalar = std::optional<c10::Scalar>;

Tensor sum(const Tensor& self, OptDtype dtype);
Tensor sum_dim(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, OptDtype dtype);
Tensor& sum_out(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, OptDtype dtype, Tensor& out);
Tensor nansum(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, OptDtype dtype);
Tensor& nansum_out(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, OptDtype dtype, Tensor& out);
Tensor mean(const Tensor& self, OptDtype dtype);
Tensor mean_dim(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, OptDtype dtype);
Tensor& mean_out(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, OptDtype dtype, Tensor& out);
Tensor prod(const Tensor& self, OptDtype dtype);
Tensor prod_dim(const Tensor& self, int64_t dim, bool keepdim, OptDtype dtype);
Tensor& prod_out(const Tensor& self, int64_t dim, bool keepdim, OptDtype dtype, Tensor& out);

Tensor max(const Tensor& self);
Tensor& max_unary_out(const Tensor& self, Tensor& out);
std::tuple<Tensor, Tensor> max_dim(const Tensor& self, int64_t dim, bool keepdim);
std::tuple<Tensor&, Tensor&> max_dim_out(const Tensor& self, int64_t dim, bool keepdim, Tensor& values, Tensor& indices);
Tensor amax(const Tensor& self, at::IntArrayRef dim, bool keepdim);
Tensor& amax_out(const Tensor& self, at::IntArrayRef dim, bool keepdim, Tensor& out);
Tensor argmax(const Tensor& self, std::optional<int64_t> dim, bool keepdim);
Tensor& argmax_out(const Tensor& self, std::optional<int64_t> dim, bool keepdim, Tensor& out);
Tensor min(const Tensor& self);
Tensor& min_unary_out(const Tensor& self, Tensor& out);
std::tuple<Tensor, Tensor> min_dim(const Tensor& self, int64_t dim, bool keepdim);
std::tuple<Tensor&, Tensor&> min_dim_out(const Tensor& self, int64_t dim, bool keepdim, Tensor& values, Tensor& indices);
Tensor amin(const Tensor& self, at::IntArrayRef dim, bool keepdim);
Tensor& amin_out(const Tensor& self, at::IntArrayRef dim, bool keepdim, Tensor& out);
Tensor argmin(const Tensor& self, std::optional<int64_t> dim, bool keepdim);
Tensor& argmin_out(const Tensor& self, std::optional<int64_t> dim, bool keepdim, Tensor& out);
std::tuple<Tensor, Tensor> aminmax(const Tensor& self, std::optional<int64_t> dim, bool keepdim);
std::tuple<Tensor&, Tensor&> aminmax_out(const Tensor& self, std::optional<int64_t> dim, bool keepdim, Tensor& min,
                                         Tensor& max);

Tensor var_correction(const Tensor& self, at::OptionalIntArrayRef dim, const OptScalar& correction, bool keepdim);
Tensor& var_correction_out(const Tensor& self, at::OptionalIntArrayRef dim, const OptScalar& correction, bool keepdim,
                           Tensor& out);
Tensor std_correction(const Tensor& self, at::OptionalIntArrayRef dim, const OptScalar& correction, bool keepdim);
Tensor& std_correction_out(const Tensor& self, at::OptionalIntArrayRef dim, const OptScalar& correction, bool keepdim,
                           Tensor& out);
std::tuple<Tensor, Tensor> var_mean(const Tensor& self, at::OptionalIntArrayRef dim, const OptScalar& correction,
                                    bool keepdim);
std::tuple<Tensor, Tensor> std_mean(const Tensor& self, at::OptionalIntArrayRef dim, const OptScalar& correction,
                                    bool keepdim);

Tensor linalg_vector_norm(const Tensor& self, const c10::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                          OptDtype dtype);
Tensor& linalg_vector_norm_out(const Tensor& self, const c10::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                               OptDtype dtype, Tensor& out);
Tensor norm_dim(const Tensor& self, const OptScalar& p, at::IntArrayRef dim, bool keepdim);
Tensor norm_dim_dtype(const Tensor& self, const OptScalar& p, at::IntArrayRef dim, bool keepdim, at::ScalarType dtype);
Tensor& norm_out(const Tensor& self, const OptScalar& p, at::IntArrayRef dim, bool keepdim, Tensor& out);
Tensor& norm_dtype_out(const Tensor& self, const OptScalar& p, at::IntArrayRef dim, bool keepdim, at::ScalarType dtype,
                       Tensor& out);

Tensor all(const Tensor& self);
Tensor& all_all_out(const Tensor& self, Tensor& out);
Tensor all_dim(const Tensor& self, int64_t dim, bool keepdim);
Tensor& all_dim_out(const Tensor& self, int64_t dim, bool keepdim, Tensor& out);
Tensor all_dims(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim);
Tensor& all_dims_out(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, Tensor& out);
Tensor any(const Tensor& self);
Tensor& any_all_out(const Tensor& self, Tensor& out);
Tensor any_dim(const Tensor& self, int64_t dim, bool keepdim);
Tensor& any_dim_out(const Tensor& self, int64_t dim, bool keepdim, Tensor& out);
Tensor any_dims(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim);
Tensor& any_dims_out(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, Tensor& out);

Tensor logsumexp(const Tensor& self, at::IntArrayRef dim, bool keepdim);
Tensor& logsumexp_out(const Tensor& self, at::IntArrayRef dim, bool keepdim, Tensor& out);

Tensor cumsum(const Tensor& self, int64_t dim, OptDtype dtype);
Tensor& cumsum_(Tensor& self, int64_t dim, OptDtype dtype);
Tensor& cumsum_out(const Tensor& self, int64_t dim, OptDtype dtype, Tensor& out);
Tensor cumprod(const Tensor& self, int64_t dim, OptDtype dtype);
Tensor& cumprod_(Tensor& self, int64_t dim, OptDtype dtype);
Tensor& cumprod_out(const Tensor& self, int64_t dim, OptDtype dtype, Tensor& out);

}  // namespace foo::ops
