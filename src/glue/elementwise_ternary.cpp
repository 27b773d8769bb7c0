// Ternary elementwise ops (where, lerp, addcmul, addcdiv) and masked_fill_.
#include <ATen/ScalarOps.h>
#include <torch/library.h>

#include "elementwise.h"

namespace foo::ops {
namespace {

using at::TensorIterator;

at::TensorIterator ternary_iter(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
  return at::TensorIteratorConfig()
      .add_output(out)
      .add_const_input(a)
      .add_const_input(b)
      .add_const_input(c)
      .allow_cpu_scalars(true)
      .promote_inputs_to_common_dtype(true)
      .cast_common_dtype_to_outputs(true)
      .enforce_safe_casting_to_output(true)
      .build();
}

at::Tensor where_into(at::Tensor& out, const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(condition.scalar_type() == at::kBool || condition.scalar_type() == at::kByte,
              "where expected condition to be a boolean tensor, but got a tensor with dtype ", condition.scalar_type());
  const auto result = at::result_type(self, other);
  auto it = at::TensorIteratorConfig()
                .check_all_same_dtype(false)
                .allow_cpu_scalars(true)
                .add_output(out)
                .add_const_input(condition)
                .add_const_input(self)
                .add_const_input(other)
                .declare_static_dtype(out.defined() ? out.scalar_type() : result)
                .build();
  TORCH_CHECK(!out.defined() || out.scalar_type() == result || at::canCast(result, out.scalar_type()),
              "Expected out type to be ", result, " but got ", out.scalar_type());
  return ew::launch_ternary(it, FOO_TERNARY_OP_WHERE, result, at::kBool, result, result);
}

// lerp has float and complex kernels only.
void check_lerp(const at::TensorIterator& it, const char* cpu_kernel) {
  const auto dt = it.common_dtype();
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(dt) || at::isComplexType(dt), "\"", cpu_kernel,
                              "\" not implemented for '", dt, "'");
}

void check_lerp_end(const at::Tensor& self, const at::Tensor& end) {
  TORCH_CHECK(self.dtype() == end.dtype(), "expected dtype ", self.dtype(), " for `end` but got dtype ", end.dtype());
}

at::Tensor lerp_into(at::Tensor& out, const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight) {
  check_lerp_end(self, end);
  // As the CPU: a 0-dim weight may have another dtype (it does not take part in promotion).
  TORCH_CHECK(self.dtype() == weight.dtype() || weight.dim() == 0, "expected dtype ", self.dtype(),
              " for `weight` but got dtype ", weight.dtype());
  auto it = ternary_iter(out, self, end, weight);
  check_lerp(it, "lerp_kernel_tensor");
  const auto dt = it.common_dtype();
  return ew::launch_ternary(it, FOO_TERNARY_OP_LERP, dt, dt, dt, dt);
}

at::Tensor addc_into(at::Tensor& out, const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2,
                     const c10::Scalar& value, int32_t op) {
  if (op == FOO_TERNARY_OP_ADDCDIV) {
    TORCH_CHECK(!(at::isIntegralType(t1.scalar_type(), true) && at::isIntegralType(t2.scalar_type(), true)),
                "Integer division with addcdiv is no longer supported, and in a future release addcdiv will perform "
                "a true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as "
                "(input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as "
                "(input + value * tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the latter "
                "implementation: (input + value * tensor1 / tensor2), for all dtypes.");
  }
  auto it = ternary_iter(out, self, t1, t2);
  const auto dt = it.common_dtype();
  check_scalar_fits_opmath(value, dt);
  return ew::launch_ternary(it, op, dt, dt, dt, dt, {value});
}

at::Tensor where_self(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other) {
  at::Tensor out;
  return where_into(out, condition, self, other);
}
at::Tensor& where_self_out(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  where_into(out, condition, self, other);
  return out;
}

// The weight travels as a Scalar too: the kernel keeps it in the math type (float32 for half
// types, as the CPU's lerp_kernel_scalar does) instead of the rounded wrapped tensor.
at::Tensor lerp_scalar_into(at::Tensor& out, const at::Tensor& self, const at::Tensor& end, const c10::Scalar& weight) {
  check_lerp_end(self, end);
  const auto w = at::native::wrapped_scalar_tensor(weight);
  auto it = ternary_iter(out, self, end, w);
  const auto dt = it.common_dtype();
  check_lerp(it, "lerp_kernel_scalar");
  check_scalar_fits_opmath(weight, dt);
  return ew::launch_ternary(it, FOO_TERNARY_OP_LERP, dt, dt, dt, dt, {weight});
}

at::Tensor lerp_scalar(const at::Tensor& self, const at::Tensor& end, const c10::Scalar& weight) {
  at::Tensor out;
  return lerp_scalar_into(out, self, end, weight);
}
at::Tensor& lerp_scalar_(at::Tensor& self, const at::Tensor& end, const c10::Scalar& weight) {
  lerp_scalar_into(self, self, end, weight);
  return self;
}
at::Tensor& lerp_scalar_out(const at::Tensor& self, const at::Tensor& end, const c10::Scalar& weight, at::Tensor& out) {
  lerp_scalar_into(out, self, end, weight);
  return out;
}
at::Tensor lerp_tensor(const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight) {
  at::Tensor out;
  return lerp_into(out, self, end, weight);
}
at::Tensor& lerp_tensor_(at::Tensor& self, const at::Tensor& end, const at::Tensor& weight) {
  lerp_into(self, self, end, weight);
  return self;
}
at::Tensor& lerp_tensor_out(const at::Tensor& self, const at::Tensor& end, const at::Tensor& weight, at::Tensor& out) {
  lerp_into(out, self, end, weight);
  return out;
}

at::Tensor addcmul(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2, const c10::Scalar& value) {
  at::Tensor out;
  return addc_into(out, self, t1, t2, value, FOO_TERNARY_OP_ADDCMUL);
}
at::Tensor& addcmul_(at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2, const c10::Scalar& value) {
  addc_into(self, self, t1, t2, value, FOO_TERNARY_OP_ADDCMUL);
  return self;
}
at::Tensor& addcmul_out(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2, const c10::Scalar& value,
                        at::Tensor& out) {
  addc_into(out, self, t1, t2, value, FOO_TERNARY_OP_ADDCMUL);
  return out;
}
at::Tensor addcdiv(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2, const c10::Scalar& value) {
  at::Tensor out;
  return addc_into(out, self, t1, t2, value, FOO_TERNARY_OP_ADDCDIV);
}
at::Tensor& addcdiv_(at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2, const c10::Scalar& value) {
  addc_into(self, self, t1, t2, value, FOO_TERNARY_OP_ADDCDIV);
  return self;
}
at::Tensor& addcdiv_out(const at::Tensor& self, const at::Tensor& t1, const at::Tensor& t2, const c10::Scalar& value,
                        at::Tensor& out) {
  addc_into(out, self, t1, t2, value, FOO_TERNARY_OP_ADDCDIV);
  return out;
}

at::Tensor& masked_fill_scalar_(at::Tensor& self, const at::Tensor& mask, const c10::Scalar& value) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  TORCH_CHECK(self.device() == mask.device() || mask.dim() == 0, "expected mask to be on ", self.device(),
              " but got mask on ", mask.device());
  check_scalar_fits(value, self.scalar_type());
  auto it = at::TensorIteratorConfig()
                .set_check_mem_overlap(false)
                .check_all_same_dtype(false)
                .resize_outputs(false)
                .add_output(self)
                .add_const_input(self)
                .add_const_input(mask)
                .build();
  ew::launch_binary(it, FOO_BINARY_OP_MASKED_FILL, self.scalar_type(), self.scalar_type(), at::kBool, {value});
  return self;
}

at::Tensor& masked_fill_tensor_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0,
              "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ", value.dim(), " dimension(s).");
  return masked_fill_scalar_(self, mask, value.item());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  FOO_IMPL(m, "where.self", where_self);
  FOO_IMPL(m, "where.self_out", where_self_out);
  FOO_IMPL(m, "lerp.Scalar", lerp_scalar);
  FOO_IMPL(m, "lerp_.Scalar", lerp_scalar_);
  FOO_IMPL(m, "lerp.Scalar_out", lerp_scalar_out);
  FOO_IMPL(m, "lerp.Tensor", lerp_tensor);
  FOO_IMPL(m, "lerp_.Tensor", lerp_tensor_);
  FOO_IMPL(m, "lerp.Tensor_out", lerp_tensor_out);
  FOO_IMPL(m, "addcmul", addcmul);
  FOO_IMPL(m, "addcmul_", addcmul_);
  FOO_IMPL(m, "addcmul.out", addcmul_out);
  FOO_IMPL(m, "addcdiv", addcdiv);
  FOO_IMPL(m, "addcdiv_", addcdiv_);
  FOO_IMPL(m, "addcdiv.out", addcdiv_out);
  FOO_IMPL(m, "masked_fill_.Scalar", masked_fill_scalar_);
  FOO_IMPL(m, "masked_fill_.Tensor", masked_fill_tensor_);
}

}  // namespace foo::ops
