// Optimizer foreach ops (ops_foreach.cpp), registered in register_nn.cpp.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace foo::ops::fe {

using at::Tensor;
using at::TensorList;
using ScalarList = at::ArrayRef<c10::Scalar>;

void add_list_(TensorList self, TensorList other, const c10::Scalar& alpha);
std::vector<Tensor> add_list(TensorList self, TensorList other, const c10::Scalar& alpha);
void add_scalar_(TensorList self, const c10::Scalar& s);
std::vector<Tensor> add_scalar(TensorList self, const c10::Scalar& s);

#define FOO_DECLARE_FOREACH_BINARY(name)                                   \
  void name##_list_(TensorList self, TensorList other);                    \
  std::vector<Tensor> name##_list(TensorList self, TensorList other);      \
  void name##_scalar_(TensorList self, const c10::Scalar& s);              \
  std::vector<Tensor> name##_scalar(TensorList self, const c10::Scalar& s); \
  void name##_scalarlist_(TensorList self, ScalarList s);                  \
  void name##_tensor_(TensorList self, const Tensor& other);
FOO_DECLARE_FOREACH_BINARY(mul)
FOO_DECLARE_FOREACH_BINARY(div)
#undef FOO_DECLARE_FOREACH_BINARY

void maximum_list_(TensorList self, TensorList other);
void addcmul_scalar_(TensorList self, TensorList t1, TensorList t2, const c10::Scalar& value);
void addcmul_scalarlist_(TensorList self, TensorList t1, TensorList t2, ScalarList s);
void addcdiv_scalar_(TensorList self, TensorList t1, TensorList t2, const c10::Scalar& value);
void addcdiv_scalarlist_(TensorList self, TensorList t1, TensorList t2, ScalarList s);
void lerp_scalar_(TensorList self, TensorList end, const c10::Scalar& weight);
void lerp_list_(TensorList self, TensorList end, TensorList weight);
std::vector<Tensor> sqrt(TensorList self);
void sqrt_(TensorList self);
std::vector<Tensor> neg(TensorList self);
void neg_(TensorList self);
void zero_(TensorList self);

}  // namespace foo::ops::fe
