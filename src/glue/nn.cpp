// NN ops: softmax family, losses, layer/group/batch norm, embedding backward. The glue checks
// arguments (ATen's messages), makes operands contiguous (as ATen's CPU kernels do), allocates
// outputs and calls Rust (foo_ffi.h); no arithmetic on tensor data here.
#include <ATen/WrapDimUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/native/cpu/mixed_data_type.h>
#include <ATen/native/layer_norm.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <array>
#include <tuple>

#include "common.h"
#include "foo_ffi.h"

namespace foo::ops::nn {
namespace {

using at::Tensor;
using OptT = std::optional<at::Tensor>;

// A class index out of range is an IndexError, as on the CPU (code catching it breaks otherwise);
// the kernel's other refusals keep check()'s classes.
void check_nll_targets(int32_t status) {
  if (status == FOO_STATUS_INVALID_ARGUMENT) {
    const std::string msg = foo_last_error();
    TORCH_CHECK_INDEX(msg.rfind("Target ", 0) != 0, msg);
    TORCH_CHECK_VALUE(false, "nll_loss: ", msg);
  }
  check(status, "nll_loss");
}

// Fills `out` (resized to `shape`, dtype checked) through `fill(contiguous target)`.
template <typename Fill>
Tensor& into(Tensor& out, c10::IntArrayRef shape, at::ScalarType dtype, const char* op, const Fill& fill) {
  TORCH_CHECK(out.scalar_type() == dtype, op, ": expected out dtype ", dtype, " but got ", out.scalar_type());
  at::native::resize_output(out, shape);
  if (out.is_contiguous()) {
    fill(out);
  } else {
    Tensor tmp = at::empty(shape, out.options());
    fill(tmp);
    out.copy_(tmp);
  }
  return out;
}

// describe() for a tensor that may be undefined (then an empty descriptor, passed as null).
FooTensor describe_maybe(const Tensor& t) { return t.defined() ? describe(t) : FooTensor{}; }

const FooTensor* opt(const FooTensor& d, const Tensor& t) { return t.defined() ? &d : nullptr; }

Tensor defined_contiguous(const OptT& t) {
  return t.has_value() && t->defined() ? t->contiguous() : Tensor();
}

void check_float(const Tensor& t, const char* op) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(t.scalar_type()), "\"", op, "\" not implemented for '",
                              t.scalar_type(), "'");
}

// ---- softmax ---------------------------------------------------------------------------------
at::ScalarType softmax_dtype(const Tensor& self, bool half_to_float) {
  if (half_to_float) {
    TORCH_CHECK(self.scalar_type() == at::kHalf || self.scalar_type() == at::kBFloat16,
                "conversion is supported for Half type only");
    return at::kFloat;
  }
  // As the CPU: an empty input never reaches a kernel, so its dtype is not checked.
  if (self.numel() != 0) check_float(self, "softmax_lastdim_kernel_impl");
  return self.scalar_type();
}

void softmax_run(const Tensor& self, int64_t dim, bool log, const Tensor& out) {
  if (self.numel() == 0) return;
  const c10::DeviceGuard guard(self.device());
  Tensor x = self.contiguous();
  Tensor o = out;
  if (x.dim() == 0) {
    x = x.view({1});
    o = out.view({1});
  }
  const FooTensor dx = describe_maybe(x), dout = describe_maybe(o);
  check(foo_softmax(&dout, &dx, dim, log ? 1 : 0), log ? "log_softmax" : "softmax");
}

Tensor softmax_fn(const Tensor& self, int64_t dim_, bool half_to_float, bool log) {
  const int64_t dim = at::maybe_wrap_dim(dim_, self.dim());
  const auto dt = softmax_dtype(self, half_to_float);
  Tensor out = at::empty(self.sizes(), self.options().dtype(dt));
  softmax_run(self, dim, log, out);
  return out;
}

Tensor& softmax_into(const Tensor& self, int64_t dim_, bool half_to_float, bool log, Tensor& out) {
  const int64_t dim = at::maybe_wrap_dim(dim_, self.dim());
  const auto dt = softmax_dtype(self, half_to_float);
  return into(out, self.sizes(), dt, "softmax", [&](const Tensor& o) { softmax_run(self, dim, log, o); });
}

at::ScalarType softmax_bwd_dtype(const Tensor& grad, const Tensor& output, at::ScalarType input_dtype) {
  TORCH_CHECK(grad.sizes().equals(output.sizes()), "grad_output and output must have the same shape, got ",
              grad.sizes(), " and ", output.sizes());
  TORCH_CHECK(grad.scalar_type() == output.scalar_type(), "expected scalar type ", output.scalar_type(),
              " but found ", grad.scalar_type());
  check_float(grad, "softmax_backward_lastdim_kernel_impl");
  if (grad.scalar_type() != input_dtype) {
    TORCH_CHECK(grad.scalar_type() == at::kFloat &&
                    (input_dtype == at::kHalf || input_dtype == at::kBFloat16),
                "expected input and grad types to match, or input to be at::Half and grad to be at::Float");
  }
  return input_dtype;
}

void softmax_bwd_run(const Tensor& grad, const Tensor& output, int64_t dim, bool log, const Tensor& gi) {
  if (output.numel() == 0) return;
  const c10::DeviceGuard guard(output.device());
  Tensor g = grad.contiguous(), y = output.contiguous(), o = gi;
  if (y.dim() == 0) {
    g = g.view({1});
    y = y.view({1});
    o = gi.view({1});
  }
  const FooTensor dg = describe_maybe(g), dy = describe_maybe(y), dgi = describe_maybe(o);
  check(foo_softmax_backward(&dgi, &dg, &dy, dim, log ? 1 : 0), "softmax backward");
}

Tensor softmax_bwd_fn(const Tensor& grad, const Tensor& output, int64_t dim_, at::ScalarType input_dtype, bool log) {
  const int64_t dim = at::maybe_wrap_dim(dim_, output.dim());
  const auto dt = softmax_bwd_dtype(grad, output, input_dtype);
  Tensor gi = at::empty(output.sizes(), output.options().dtype(dt));
  softmax_bwd_run(grad, output, dim, log, gi);
  return gi;
}

Tensor& softmax_bwd_into(const Tensor& grad, const Tensor& output, int64_t dim_, at::ScalarType input_dtype,
                         bool log, Tensor& out) {
  const int64_t dim = at::maybe_wrap_dim(dim_, output.dim());
  const auto dt = softmax_bwd_dtype(grad, output, input_dtype);
  return into(out, output.sizes(), dt, "softmax backward",
              [&](const Tensor& o) { softmax_bwd_run(grad, output, dim, log, o); });
}

Tensor softmax(const Tensor& self, int64_t dim, bool half_to_float) {
  return softmax_fn(self, dim, half_to_float, false);
}
Tensor& softmax_out(const Tensor& self, int64_t dim, bool half_to_float, Tensor& out) {
  return softmax_into(self, dim, half_to_float, false, out);
}
Tensor log_softmax(const Tensor& self, int64_t dim, bool half_to_float) {
  return softmax_fn(self, dim, half_to_float, true);
}
Tensor& log_softmax_out(const Tensor& self, int64_t dim, bool half_to_float, Tensor& out) {
  return softmax_into(self, dim, half_to_float, true, out);
}
Tensor softmax_backward(const Tensor& grad, const Tensor& output, int64_t dim, at::ScalarType input_dtype) {
  return softmax_bwd_fn(grad, output, dim, input_dtype, false);
}
Tensor& softmax_backward_out(const Tensor& grad, const Tensor& output, int64_t dim, at::ScalarType input_dtype,
                             Tensor& grad_input) {
  return softmax_bwd_into(grad, output, dim, input_dtype, false, grad_input);
}
Tensor log_softmax_backward(const Tensor& grad, const Tensor& output, int64_t dim, at::ScalarType input_dtype) {
  return softmax_bwd_fn(grad, output, dim, input_dtype, true);
}
Tensor& log_softmax_backward_out(const Tensor& grad, const Tensor& output, int64_t dim, at::ScalarType input_dtype,
                                 Tensor& out) {
  return softmax_bwd_into(grad, output, dim, input_dtype, true, out);
}

// ---- nll_loss --------------------------------------------------------------------------------

struct NllGeom {
  Tensor x;  // [N, C] or [N, C, S], contiguous
  Tensor t;  // [N * S], contiguous
  Tensor w;  // [C] contiguous or undefined
  std::vector<int64_t> out_shape;  // reduction none
};

void check_target_dtype(const Tensor& target) {
  TORCH_CHECK(target.scalar_type() == at::kLong || target.scalar_type() == at::kByte,
              "expected target dtype to be Long or Byte, but got ", target.scalar_type());
}

void check_weight(const Tensor& w, int64_t n_classes) {
  TORCH_CHECK(!w.defined() || (w.dim() <= 1 && w.numel() == n_classes),
              "weight tensor should be defined either for all ", n_classes,
              " classes or no classes but got weight tensor of shape: ", w.sizes());
}

NllGeom nll_geom(const Tensor& self, const Tensor& target, const OptT& weight) {
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "input tensor should be 1D or 2D");
  TORCH_CHECK(target.dim() <= 1, "0D or 1D target tensor expected, multi-target not supported");
  const bool no_batch_dim = self.dim() == 1 && target.dim() == 0;
  TORCH_CHECK(no_batch_dim || (self.size(0) == target.size(0)), "size mismatch (got input: ", self.sizes(),
              ", target: ", target.sizes(), ")");
  check_target_dtype(target);
  check_float(self, "nll_loss_out_frame");
  NllGeom g;
  g.w = defined_contiguous(weight);
  const int64_t c = self.size(-1);
  check_weight(g.w, c);
  const int64_t n = self.dim() == 2 ? self.size(0) : 1;
  g.x = self.contiguous().view({n, c});
  g.t = target.contiguous().view({n});
  if (self.dim() == 2) g.out_shape = {n};
  return g;
}

NllGeom nll2d_geom(const Tensor& self, const Tensor& target, const OptT& weight) {
  TORCH_CHECK(target.dim() == 3, "only batches of spatial targets supported (3D tensors) but got targets of dimension: ",
              target.dim());
  TORCH_CHECK(self.dim() == 4, "only batches of spatial inputs supported (4D tensors), but got input of dimension: ",
              self.dim());
  TORCH_CHECK(self.size(0) == target.size(0) && self.size(2) == target.size(1) && self.size(3) == target.size(2),
              "input and target batch or spatial sizes don't match: target ", target.sizes(), ", input ",
              self.sizes());
  check_target_dtype(target);
  check_float(self, "nll_loss2d_forward_out_frame");
  NllGeom g;
  g.w = defined_contiguous(weight);
  const int64_t n = self.size(0), c = self.size(1), s = self.size(2) * self.size(3);
  check_weight(g.w, c);
  g.x = self.contiguous().view({n, c, s});
  g.t = target.contiguous().view({n * s});
  g.out_shape = {n, self.size(2), self.size(3)};
  return g;
}

void nll_fwd_run(const NllGeom& g, int64_t reduction, int64_t ignore_index, Tensor& output, Tensor& total_weight) {
  const c10::DeviceGuard guard(g.x.device());
  const std::vector<int64_t> shape = reduction == at::Reduction::None ? g.out_shape : std::vector<int64_t>{};
  at::native::resize_output(total_weight, {});
  TORCH_CHECK(output.scalar_type() == g.x.scalar_type() && total_weight.scalar_type() == g.x.scalar_type(),
              "nll_loss: output and total_weight must have the input's dtype");
  auto fill = [&](const Tensor& o, const Tensor& tw) {
    const FooTensor dout = describe_maybe(o), dtw = describe_maybe(tw), dx = describe_maybe(g.x), dt = describe_maybe(g.t),
                    dw = describe_maybe(g.w);
    check_nll_targets(foo_nll_loss(&dout, &dtw, &dx, &dt, opt(dw, g.w), reduction, ignore_index));
  };
  at::native::resize_output(output, shape);
  Tensor o = output.is_contiguous() ? output : at::empty(shape, output.options());
  Tensor tw = total_weight.is_contiguous() ? total_weight : at::empty({}, total_weight.options());
  fill(o, tw);
  if (!o.is_same(output)) output.copy_(o);
  if (!tw.is_same(total_weight)) total_weight.copy_(tw);
}

void nll_bwd_run(const NllGeom& g, const Tensor& grad_output, int64_t reduction, int64_t ignore_index,
                 const Tensor& total_weight, const Tensor& gi_nd) {
  const c10::DeviceGuard guard(g.x.device());
  if (reduction == at::Reduction::None && !g.out_shape.empty()) {
    TORCH_CHECK(grad_output.numel() == g.t.numel(), "Expected a tensor of dimension ", g.out_shape.size(),
                " and tensor.size[0] == ", g.out_shape[0], " but got: dimension ", grad_output.dim(),
                " and tensor.size[0] == ", grad_output.dim() > 0 ? grad_output.size(0) : 1);
  } else {
    TORCH_CHECK(grad_output.numel() == 1, "Expected a single element grad_output tensor, but got: ",
                grad_output.sizes());
  }
  TORCH_CHECK(total_weight.numel() == 1, "expected total_weight to be a single element tensor, got: ",
              total_weight.sizes(), " (", total_weight.numel(), " elements)");
  const Tensor go = grad_output.contiguous(), tw = total_weight.contiguous();
  const FooTensor dgi = describe_maybe(gi_nd), dgo = describe_maybe(go), dt = describe_maybe(g.t), dw = describe_maybe(g.w),
                  dtw = describe_maybe(tw);
  check(foo_nll_loss_backward(&dgi, &dgo, &dt, opt(dw, g.w), &dtw, reduction, ignore_index), "nll_loss backward");
}

Tensor& nll_bwd_into(const NllGeom& g, const Tensor& self, const Tensor& grad_output, int64_t reduction,
                     int64_t ignore_index, const Tensor& total_weight, Tensor& grad_input) {
  TORCH_CHECK(grad_input.scalar_type() == self.scalar_type(), "nll_loss backward: bad grad_input dtype");
  at::native::resize_output(grad_input, self.sizes());
  Tensor gi = grad_input.is_contiguous() ? grad_input : at::empty(self.sizes(), grad_input.options());
  nll_bwd_run(g, grad_output, reduction, ignore_index, total_weight, gi.view(g.x.sizes()));
  if (!gi.is_same(grad_input)) grad_input.copy_(gi);
  return grad_input;
}

std::tuple<Tensor, Tensor> nll_loss_forward(const Tensor& self, const Tensor& target, const OptT& weight,
                                            int64_t reduction, int64_t ignore_index) {
  Tensor output = at::empty({0}, self.options()), tw = at::empty({}, self.options());
  nll_fwd_run(nll_geom(self, target, weight), reduction, ignore_index, output, tw);
  return {output, tw};
}
std::tuple<Tensor&, Tensor&> nll_loss_forward_out(const Tensor& self, const Tensor& target, const OptT& weight,
                                                  int64_t reduction, int64_t ignore_index, Tensor& output,
                                                  Tensor& total_weight) {
  nll_fwd_run(nll_geom(self, target, weight), reduction, ignore_index, output, total_weight);
  return {output, total_weight};
}
Tensor nll_loss_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target, const OptT& weight,
                         int64_t reduction, int64_t ignore_index, const Tensor& total_weight) {
  Tensor gi = at::empty(self.sizes(), self.options());
  return nll_bwd_into(nll_geom(self, target, weight), self, grad_output, reduction, ignore_index, total_weight, gi);
}
Tensor& nll_loss_backward_out(const Tensor& grad_output, const Tensor& self, const Tensor& target, const OptT& weight,
                              int64_t reduction, int64_t ignore_index, const Tensor& total_weight,
                              Tensor& grad_input) {
  return nll_bwd_into(nll_geom(self, target, weight), self, grad_output, reduction, ignore_index, total_weight,
                      grad_input);
}
std::tuple<Tensor, Tensor> nll_loss2d_forward(const Tensor& self, const Tensor& target, const OptT& weight,
                                              int64_t reduction, int64_t ignore_index) {
  Tensor output = at::empty({0}, self.options()), tw = at::empty({}, self.options());
  nll_fwd_run(nll2d_geom(self, target, weight), reduction, ignore_index, output, tw);
  return {output, tw};
}
std::tuple<Tensor&, Tensor&> nll_loss2d_forward_out(const Tensor& self, const Tensor& target, const OptT& weight,
                                                    int64_t reduction, int64_t ignore_index, Tensor& output,
                                                    Tensor& total_weight) {
  nll_fwd_run(nll2d_geom(self, target, weight), reduction, ignore_index, output, total_weight);
  return {output, total_weight};
}
Tensor nll_loss2d_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target, const OptT& weight,
                           int64_t reduction, int64_t ignore_index, const Tensor& total_weight) {
  Tensor gi = at::empty(self.sizes(), self.options());
  return nll_bwd_into(nll2d_geom(self, target, weight), self, grad_output, reduction, ignore_index, total_weight,
                      gi);
}
Tensor& nll_loss2d_backward_out(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                                const OptT& weight, int64_t reduction, int64_t ignore_index,
                                const Tensor& total_weight, Tensor& grad_input) {
  return nll_bwd_into(nll2d_geom(self, target, weight), self, grad_output, reduction, ignore_index, total_weight,
                      grad_input);
}

// ---- mse_loss / binary_cross_entropy ---------------------------------------------------------

std::vector<int64_t> reduced_shape(c10::IntArrayRef shape, int64_t reduction) {
  return reduction == at::Reduction::None ? shape.vec() : std::vector<int64_t>{};
}

// `t` on foo, or a 0-dim CPU scalar (check_same_device), moved to the current (self's, under the
// callers' DeviceGuard) foo device.
Tensor as_dense(const Tensor& t, at::ScalarType dt, c10::IntArrayRef shape) {
  Tensor x = t.device().is_cpu() ? t.to(kFoo, dt) : t.scalar_type() == dt ? t : t.to(dt);
  return (x.sizes().equals(shape) ? x : x.expand(shape)).contiguous();
}

void mse_run(const Tensor& self, const Tensor& target, int64_t reduction, const Tensor& out,
             c10::IntArrayRef shape, at::ScalarType dt) {
  check_same_device(self, {target, out}, true);
  const c10::DeviceGuard guard(self.device());
  const Tensor x = as_dense(self, dt, shape), t = as_dense(target, dt, shape);
  const FooTensor dout = describe_maybe(out), dx = describe_maybe(x), dtt = describe_maybe(t);
  check(foo_mse_loss(&dout, &dx, &dtt, reduction), "mse_loss");
}

Tensor mse_loss(const Tensor& self, const Tensor& target, int64_t reduction) {
  const auto dt = at::result_type(self, target);
  check_float(at::empty({}, self.options().dtype(dt)), "mse_cpu");
  const auto shape = at::infer_size(self.sizes(), target.sizes());
  Tensor out = at::empty(reduced_shape(shape, reduction), self.options().dtype(dt));
  mse_run(self, target, reduction, out, shape, dt);
  return in_layout_of(out, self);
}
Tensor& mse_loss_out(const Tensor& self, const Tensor& target, int64_t reduction, Tensor& out) {
  const auto dt = at::result_type(self, target);
  const auto shape = at::infer_size(self.sizes(), target.sizes());
  return into(out, reduced_shape(shape, reduction), dt, "mse_loss",
              [&](const Tensor& o) { mse_run(self, target, reduction, o, shape, dt); });
}
Tensor& mse_loss_backward_out(const Tensor& grad_output, const Tensor& self, const Tensor& target, int64_t reduction,
                              Tensor& grad_input) {
  const auto dt = self.scalar_type();
  check_float(self, "mse_backward_cpu_out");
  const auto shape = at::infer_size(self.sizes(), target.sizes());
  check_same_device(self, {grad_output, target, grad_input}, true);
  return into(grad_input, shape, dt, "mse_loss_backward", [&](const Tensor& gi) {
    const c10::DeviceGuard guard(self.device());
    const Tensor g = as_dense(grad_output, dt, shape), x = as_dense(self, dt, shape), t = as_dense(target, dt, shape);
    const FooTensor dgi = describe_maybe(gi), dg = describe_maybe(g), dx = describe_maybe(x), dtt = describe_maybe(t);
    check(foo_mse_loss_backward(&dgi, &dg, &dx, &dtt, reduction), "mse_loss_backward");
  });
}
Tensor mse_loss_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target, int64_t reduction) {
  Tensor gi = at::empty({0}, self.options());
  return mse_loss_backward_out(grad_output, self, target, reduction, gi);
}

void check_bce(const Tensor& self, const Tensor& target, const OptT& weight) {
  const Tensor w = weight.value_or(Tensor());
  check_same_device(self, {target, w}, true);
  TORCH_CHECK(self.sizes().equals(target.sizes()), "Using a target size (", target.sizes(),
              ") that is different to the input size (", self.sizes(), ") is deprecated. ",
              "Please ensure they have the same size.");
  check_float(self, "binary_cross_entropy");
}

Tensor& binary_cross_entropy_out(const Tensor& self, const Tensor& target, const OptT& weight, int64_t reduction,
                                 Tensor& out) {
  check_bce(self, target, weight);
  const auto dt = self.scalar_type();
  return into(out, reduced_shape(self.sizes(), reduction), dt, "binary_cross_entropy", [&](const Tensor& o) {
    const c10::DeviceGuard guard(self.device());
    const Tensor x = self.contiguous(), t = as_dense(target, dt, self.sizes());
    const Tensor w = weight.has_value() && weight->defined() ? as_dense(*weight, dt, self.sizes()) : Tensor();
    const FooTensor dout = describe_maybe(o), dx = describe_maybe(x), dtt = describe_maybe(t), dw = describe_maybe(w);
    check(foo_bce_loss(&dout, &dx, &dtt, opt(dw, w), reduction), "binary_cross_entropy");
  });
}
Tensor binary_cross_entropy(const Tensor& self, const Tensor& target, const OptT& weight, int64_t reduction) {
  Tensor out = at::empty({0}, self.options());
  return binary_cross_entropy_out(self, target, weight, reduction, out);
}
Tensor& binary_cross_entropy_backward_out(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                                          const OptT& weight, int64_t reduction, Tensor& grad_input) {
  check_bce(self, target, weight);
  const auto dt = self.scalar_type();
  return into(grad_input, self.sizes(), dt, "binary_cross_entropy_backward", [&](const Tensor& gi) {
    const c10::DeviceGuard guard(self.device());
    const Tensor g = as_dense(grad_output, dt, self.sizes()), x = self.contiguous(),
                 t = as_dense(target, dt, self.sizes());
    const Tensor w = weight.has_value() && weight->defined() ? as_dense(*weight, dt, self.sizes()) : Tensor();
    const FooTensor dgi = describe_maybe(gi), dg = describe_maybe(g), dx = describe_maybe(x), dtt = describe_maybe(t), dw = describe_maybe(w);
    check(foo_bce_loss_backward(&dgi, &dg, &dx, &dtt, opt(dw, w), reduction), "binary_cross_entropy_backward");
  });
}
Tensor binary_cross_entropy_backward(const Tensor& grad_output, const Tensor& self, const Tensor& target,
                                     const OptT& weight, int64_t reduction) {
  Tensor gi = at::empty({0}, self.options());
  return binary_cross_entropy_backward_out(grad_output, self, target, weight, reduction, gi);
}

// ---- layer_norm ------------------------------------------------------------------------------
// float32 statistics for a float16/bfloat16 input with float32 parameters (ATen's "mixed type").
at::ScalarType stat_dtype(const Tensor& input, const Tensor& param) {
  if (at::isReducedFloatingType(input.scalar_type()) && param.defined() && param.scalar_type() == at::kFloat) {
    return at::kFloat;
  }
  return input.scalar_type();
}

std::tuple<Tensor, Tensor, Tensor> native_layer_norm(const Tensor& input, c10::IntArrayRef normalized_shape,
                                                     const OptT& weight_opt, const OptT& bias_opt, double eps) {
  const Tensor weight = defined_contiguous(weight_opt), bias = defined_contiguous(bias_opt);
  const auto [M, N] = at::native::_check_layer_norm_inputs(input, normalized_shape, weight, bias);
  check_float(input, "LayerNormKernelImpl");
  const c10::DeviceGuard guard(input.device());
  const int64_t axis = input.dim() - static_cast<int64_t>(normalized_shape.size());
  std::vector<int64_t> stat_shape(input.sizes().begin(), input.sizes().begin() + axis);
  stat_shape.resize(input.dim(), 1);
  const auto sdt = stat_dtype(input, weight.defined() ? weight : bias);
  Tensor out = at::empty(input.sizes(), input.options());
  Tensor mean = at::empty(stat_shape, input.options().dtype(sdt));
  Tensor rstd = at::empty(stat_shape, input.options().dtype(sdt));
  if (M > 0) {
    // [M, N] rows, [N] parameters and [M] statistics, described without views.
    const int64_t rows[2] = {M, N}, row_strides[2] = {N, 1}, one = 1;
    const c10::IntArrayRef r2(rows, 2), s2(row_strides, 2), n1(rows + 1, 1), m1(rows, 1), s1(&one, 1);
    const Tensor x = input.contiguous();
    const FooTensor dx = describe_as(x, r2, s2), dout = describe_as(out, r2, s2), dm = describe_as(mean, m1, s1),
                    dr = describe_as(rstd, m1, s1), dw = describe_as(weight, n1, s1), db = describe_as(bias, n1, s1);
    check(foo_layer_norm(&dout, &dm, &dr, &dx, opt(dw, weight), opt(db, bias), eps), "native_layer_norm");
  }
  return {out, mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> native_layer_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                              c10::IntArrayRef normalized_shape, const Tensor& mean,
                                                              const Tensor& rstd, const OptT& weight_opt,
                                                              const OptT& bias_opt, std::array<bool, 3> mask) {
  const Tensor weight = defined_contiguous(weight_opt), bias = defined_contiguous(bias_opt);
  const auto [M, N] = at::native::_check_layer_norm_inputs(input, normalized_shape, weight, bias);
  const c10::DeviceGuard guard(input.device());
  Tensor dx, dw, db;
  if (mask[0]) dx = at::empty(input.sizes(), input.options());
  const auto param_opts = [&](const Tensor& p) {
    return p.defined() ? p.options() : input.options();
  };
  if (mask[1]) dw = at::empty(normalized_shape, param_opts(weight));
  if (mask[2]) db = at::empty(normalized_shape, param_opts(bias.defined() ? bias : weight));
  if (M == 0 || N == 0) {
    if (dw.defined()) dw.zero_();
    if (db.defined()) db.zero_();
    return {dx, dw, db};
  }
  const int64_t rows[2] = {M, N}, row_strides[2] = {N, 1}, one = 1;
  const c10::IntArrayRef r2(rows, 2), s2(row_strides, 2), n1(rows + 1, 1), m1(rows, 1), s1(&one, 1);
  const Tensor x = input.contiguous(), g = grad_out.contiguous(), mc = mean.contiguous(), rc = rstd.contiguous();
  const FooTensor ddx = describe_as(dx, r2, s2), ddw = describe_as(dw, n1, s1), ddb = describe_as(db, n1, s1),
                  dg = describe_as(g, r2, s2), dxx = describe_as(x, r2, s2), dm = describe_as(mc, m1, s1),
                  dr = describe_as(rc, m1, s1), dww = describe_as(weight, n1, s1);
  check(foo_layer_norm_backward(opt(ddx, dx), opt(ddw, dw), opt(ddb, db), &dg, &dxx, &dm, &dr, opt(dww, weight)),
        "native_layer_norm_backward");
  return {dx, dw, db};
}

// ---- group_norm ------------------------------------------------------------------------------
// ATen's check_group_norm_inputs (static in group_norm.cpp), the same messages.
void check_group_norm(const Tensor& input, const Tensor& weight, const Tensor& bias, int64_t c, int64_t groups) {
  TORCH_CHECK(groups > 0, "Expected num groups to be greater than 0, got ", groups);
  TORCH_CHECK(c % groups == 0, "Expected number of channels in input to be divisible by num_groups, but got input of shape ",
              input.sizes(), " and num_groups=", groups);
  for (const auto& [p, what] : {std::pair{&weight, "weight"}, std::pair{&bias, "bias"}}) {
    TORCH_CHECK(!p->defined() || (p->dim() == 1 && p->numel() == c), "Expected ", what,
                " to be a vector of size equal to the number of channels in input, but got ", what, " of shape ",
                p->sizes(), " and input of shape ", input.sizes());
  }
}

// The kernel works on [N, C, S] in contiguous order; a channels-last input is computed in a
// contiguous copy and the result keeps the input's layout, as the CPU's does.
Tensor like_input(const Tensor& input) { return at::empty_like(input, input.suggest_memory_format()); }
Tensor as_ncs(const Tensor& t, int64_t n, int64_t c, int64_t hw) { return t.contiguous().view({n, c, hw}); }

std::tuple<Tensor, Tensor, Tensor> native_group_norm(const Tensor& input, const OptT& weight_opt, const OptT& bias_opt,
                                                     int64_t n, int64_t c, int64_t hw, int64_t groups, double eps) {
  const Tensor weight = defined_contiguous(weight_opt), bias = defined_contiguous(bias_opt);
  check_group_norm(input, weight, bias, c, groups);
  TORCH_CHECK(input.numel() == n * c * hw, "native_group_norm: input of shape ", input.sizes(), " is not N=", n,
              " x C=", c, " x HxW=", hw);
  TORCH_CHECK(hw > 0, "Expected HxW to be greater than 0, got ", hw);
  const bool mixed = at::native::is_mixed_type(input, weight, bias);
  if (mixed) at::native::check_mixed_data_type(input, weight, bias);
  const c10::DeviceGuard guard(input.device());
  const auto stat_opts = input.options().dtype(at::native::param_scalar_type(input, mixed));
  Tensor out = like_input(input);
  Tensor mean = at::empty({n, groups}, stat_opts), rstd = at::empty({n, groups}, stat_opts);
  if (n * groups == 0) return {out, mean, rstd};  // the CPU checks the dtype only for samples
  check_float(input, "GroupNormKernelImpl");
  const Tensor x = as_ncs(input, n, c, hw);
  Tensor o = out.is_contiguous() ? out.view({n, c, hw}) : at::empty({n, c, hw}, input.options());
  const FooTensor dx = describe(x), dout = describe(o), dm = describe(mean), dr = describe(rstd),
                  dw = describe_maybe(weight), db = describe_maybe(bias);
  check(foo_group_norm(&dout, &dm, &dr, &dx, opt(dw, weight), opt(db, bias), groups, eps), "native_group_norm");
  if (!out.is_contiguous()) out.copy_(o.view(input.sizes()));
  return {out, mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> native_group_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                              const Tensor& mean, const Tensor& rstd,
                                                              const OptT& weight_opt, int64_t n, int64_t c, int64_t hw,
                                                              int64_t groups, std::array<bool, 3> mask) {
  const Tensor weight = defined_contiguous(weight_opt);
  check_group_norm(input, weight, Tensor(), c, groups);
  TORCH_CHECK(input.numel() == n * c * hw && grad_out.sizes() == input.sizes(),
              "native_group_norm_backward: grad_out and input must both be N=", n, " x C=", c, " x HxW=", hw);
  const bool mixed = at::native::is_mixed_type(input, mean, rstd);
  if (mixed) at::native::check_mixed_data_type(input, mean, rstd);
  const c10::DeviceGuard guard(input.device());
  Tensor dx, dw, db;
  if (mask[0]) dx = like_input(input);
  const auto param_opts = weight.defined() ? weight.options() : mean.options();
  if (mask[1]) dw = at::empty({c}, param_opts);
  if (mask[2]) db = at::empty({c}, param_opts);
  if (n * groups == 0 || input.numel() == 0) {
    if (dw.defined()) dw.zero_();
    if (db.defined()) db.zero_();
    return {dx, dw, db};
  }
  check_float(input, "GroupNormBackwardKernelImpl");
  const Tensor x = as_ncs(input, n, c, hw), g = as_ncs(grad_out, n, c, hw);
  const Tensor m1 = mean.contiguous(), r1 = rstd.contiguous();
  Tensor dx3 = !dx.defined() ? dx : dx.is_contiguous() ? dx.view({n, c, hw}) : at::empty({n, c, hw}, input.options());
  const FooTensor ddx = describe_maybe(dx3), ddw = describe_maybe(dw), ddb = describe_maybe(db), dg = describe(g),
                  dxx = describe(x), dm = describe(m1), dr = describe(r1), dww = describe_maybe(weight);
  check(foo_group_norm_backward(opt(ddx, dx3), opt(ddw, dw), opt(ddb, db), &dg, &dxx, &dm, &dr, opt(dww, weight),
                                groups),
        "native_group_norm_backward");
  if (dx.defined() && !dx.is_contiguous()) dx.copy_(dx3.view(input.sizes()));
  return {dx, dw, db};
}

// ---- batch_norm ------------------------------------------------------------------------------

struct BnGeom {
  int64_t n, c, s;
};

BnGeom bn_geom(const Tensor& input) {
  TORCH_CHECK(input.dim() >= 2, "batch_norm: expected an input with at least 2 dims, got ", input.sizes());
  BnGeom g{input.size(0), input.size(1), 1};
  for (int64_t d = 2; d < input.dim(); ++d) g.s *= input.size(d);
  return g;
}

void check_param(const Tensor& p, int64_t c, const char* what) {
  TORCH_CHECK(!p.defined() || p.numel() == c, what, " should contain ", c, " elements not ",
              p.defined() ? p.numel() : 0);
}

// As the CPU: parameters and running statistics of another dtype than the input are allowed only
// as float32 ones for a float16/bfloat16 (or float32) input; any other mix raises.
void check_bn_mixed_dtypes(const Tensor& input, std::initializer_list<const Tensor*> params) {
  bool mixed = false;
  for (const Tensor* p : params) mixed |= p->defined() && p->scalar_type() != input.scalar_type();
  if (!mixed) return;
  const auto dt = input.scalar_type();
  TORCH_CHECK(dt == at::kFloat || at::isReducedFloatingType(dt), "mixed dtype (CPU): all inputs must share same datatype.");
  for (const Tensor* p : params) {
    TORCH_CHECK(!p->defined() || p->scalar_type() == at::kFloat,
                "mixed dtype (CPU): expect parameter to have scalar type of Float");
  }
}

at::ScalarType bn_stat_dtype(const Tensor& input, const Tensor& weight, const Tensor& running_mean) {
  return stat_dtype(input, weight.defined() ? weight : running_mean);
}

// Runs the kernel on contiguous copies of the running statistics and copies them back when
// the originals are not contiguous.
std::tuple<Tensor, Tensor, Tensor> bn_forward(const Tensor& input, const OptT& weight_opt, const OptT& bias_opt,
                                              const Tensor& running_mean, const Tensor& running_var, bool training,
                                              double momentum, double eps) {
  check_float(input, "batch_norm_cpu");
  const auto g = bn_geom(input);
  const Tensor weight = defined_contiguous(weight_opt), bias = defined_contiguous(bias_opt);
  check_param(weight, g.c, "weight");
  check_param(bias, g.c, "bias");
  check_param(running_mean, g.c, "running_mean");
  check_param(running_var, g.c, "running_var");
  check_bn_mixed_dtypes(input, {&weight, &bias, &running_mean, &running_var});
  TORCH_CHECK(training || (running_mean.defined() && running_var.defined()),
              "running_mean and running_var must be defined in evaluation mode");
  const c10::DeviceGuard guard(input.device());
  const auto sdt = bn_stat_dtype(input, weight, running_mean);
  Tensor out = at::empty(input.sizes(), input.options());
  Tensor save_mean = at::empty({training ? g.c : 0}, input.options().dtype(sdt));
  Tensor save_invstd = at::empty({training ? g.c : 0}, input.options().dtype(sdt));
  Tensor rm = running_mean.defined() ? running_mean.contiguous() : Tensor();
  Tensor rv = running_var.defined() ? running_var.contiguous() : Tensor();
  if (input.numel() == 0 && !training) return {out, save_mean, save_invstd};
  const Tensor x = input.contiguous().view({g.n, g.c, g.s}), o = out.view({g.n, g.c, g.s});
  const Tensor w = weight.defined() ? weight.view({g.c}) : weight, b = bias.defined() ? bias.view({g.c}) : bias;
  const Tensor rm1 = rm.defined() ? rm.view({g.c}) : rm, rv1 = rv.defined() ? rv.view({g.c}) : rv;
  const FooTensor dout = describe_maybe(o), dsm = describe_maybe(save_mean), dsi = describe_maybe(save_invstd), dx = describe_maybe(x),
                  dw = describe_maybe(w), db = describe_maybe(b), drm = describe_maybe(rm1), drv = describe_maybe(rv1);
  check(foo_batch_norm(&dout, &dsm, &dsi, &dx, opt(dw, w), opt(db, b), opt(drm, rm1), opt(drv, rv1),
                       training ? 1 : 0, momentum, eps),
        "native_batch_norm");
  if (training) {
    if (rm.defined() && !rm.is_same(running_mean)) running_mean.copy_(rm);
    if (rv.defined() && !rv.is_same(running_var)) running_var.copy_(rv);
  }
  return {in_layout_of(out, input, /*with_3d=*/true), save_mean, save_invstd};
}

Tensor value_or_undefined(const OptT& t) { return t.has_value() ? *t : Tensor(); }

std::tuple<Tensor, Tensor, Tensor> native_batch_norm(const Tensor& input, const OptT& weight, const OptT& bias,
                                                     const OptT& running_mean, const OptT& running_var, bool training,
                                                     double momentum, double eps) {
  return bn_forward(input, weight, bias, value_or_undefined(running_mean), value_or_undefined(running_var), training,
                    momentum, eps);
}
std::tuple<Tensor, Tensor, Tensor> native_batch_norm_legit(const Tensor& input, const OptT& weight, const OptT& bias,
                                                           Tensor& running_mean, Tensor& running_var, bool training,
                                                           double momentum, double eps) {
  return bn_forward(input, weight, bias, running_mean, running_var, training, momentum, eps);
}
std::tuple<Tensor, Tensor, Tensor> native_batch_norm_legit_no_stats(const Tensor& input, const OptT& weight,
                                                                    const OptT& bias, bool training, double momentum,
                                                                    double eps) {
  return bn_forward(input, weight, bias, Tensor(), Tensor(), training, momentum, eps);
}
std::tuple<Tensor, Tensor, Tensor, Tensor> batch_norm_with_update(const Tensor& input, const OptT& weight,
                                                                  const OptT& bias, Tensor& running_mean,
                                                                  Tensor& running_var, double momentum, double eps) {
  auto [out, sm, si] = bn_forward(input, weight, bias, running_mean, running_var, true, momentum, eps);
  Tensor reserve = at::empty({0}, input.options().dtype(at::kByte));
  return {out, sm, si, reserve};
}

std::tuple<Tensor, Tensor, Tensor> native_batch_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                              const OptT& weight_opt, const OptT& running_mean_opt,
                                                              const OptT& running_var_opt, const OptT& save_mean_opt,
                                                              const OptT& save_invstd_opt, bool train, double eps,
                                                              std::array<bool, 3> mask) {
  const auto g = bn_geom(input);
  const Tensor weight = defined_contiguous(weight_opt);
  const Tensor mean = train ? defined_contiguous(save_mean_opt) : defined_contiguous(running_mean_opt);
  const Tensor var = train ? defined_contiguous(save_invstd_opt) : defined_contiguous(running_var_opt);
  TORCH_CHECK(mean.defined() && var.defined(), "batch_norm backward: ",
              train ? "save_mean and save_invstd" : "running_mean and running_var", " must be defined");
  const c10::DeviceGuard guard(input.device());
  const auto param_opts = weight.defined() ? weight.options() : input.options().dtype(mean.scalar_type());
  Tensor dx, dw, db;
  if (mask[0]) dx = at::empty(input.sizes(), input.options());
  if (mask[1]) dw = at::empty({g.c}, param_opts);
  if (mask[2]) db = at::empty({g.c}, param_opts);
  const Tensor x = input.contiguous().view({g.n, g.c, g.s}), go = grad_out.contiguous().view({g.n, g.c, g.s});
  const Tensor dx3 = dx.defined() ? dx.view({g.n, g.c, g.s}) : dx;
  const Tensor w = weight.defined() ? weight.view({g.c}) : weight;
  const FooTensor ddx = describe_maybe(dx3), ddw = describe_maybe(dw), ddb = describe_maybe(db), dgo = describe_maybe(go), dxx = describe_maybe(x),
                  dww = describe_maybe(w), dm = describe_maybe(mean), dv = describe_maybe(var);
  check(foo_batch_norm_backward(opt(ddx, dx3), opt(ddw, dw), opt(ddb, db), &dgo, &dxx, opt(dww, w), &dm, &dv,
                                train ? 1 : 0, eps),
        "native_batch_norm_backward");
  return {dx, dw, db};
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_backward(const Tensor& grad_out, const Tensor& input,
                                                       const Tensor& weight, const OptT& running_mean,
                                                       const OptT& running_var, const OptT& save_mean,
                                                       const OptT& save_var, bool update, double eps,
                                                       std::array<bool, 3> output_mask, const Tensor& /*reserve*/) {
  return nn::native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean, save_var, update,
                                    eps, output_mask);
}

// ---- embedding -------------------------------------------------------------------------------
Tensor& embedding_dense_backward_out(const Tensor& grad_output, const Tensor& indices, int64_t num_weights,
                                     int64_t padding_idx, bool scale_grad_by_freq, Tensor& out) {
  TORCH_CHECK(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
              "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but got ",
              indices.scalar_type(), " instead (while checking arguments for embedding_backward)");
  check_float(grad_output, "embedding_dense_backward");
  const int64_t d = grad_output.size(-1), k = indices.numel();
  TORCH_CHECK(grad_output.numel() == k * d, "embedding_backward: grad_output ", grad_output.sizes(),
              " does not match indices ", indices.sizes());
  return into(out, {num_weights, d}, grad_output.scalar_type(), "embedding_dense_backward", [&](const Tensor& gw) {
    if (gw.numel() == 0) return;
    const c10::DeviceGuard guard(grad_output.device());
    const Tensor g = grad_output.contiguous().view({k, d}), idx = indices.contiguous().view({k});
    const FooTensor dgw = describe_maybe(gw), dg = describe_maybe(g), di = describe_maybe(idx);
    check(foo_embedding_backward(&dgw, &dg, &di, padding_idx, scale_grad_by_freq ? 1 : 0), "embedding_dense_backward");
  });
}
Tensor embedding_dense_backward(const Tensor& grad_output, const Tensor& indices, int64_t num_weights,
                                int64_t padding_idx, bool scale_grad_by_freq) {
  Tensor out = at::empty({0}, grad_output.options());
  return embedding_dense_backward_out(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  FOO_IMPL(m, "_softmax", softmax);
  FOO_IMPL(m, "_softmax.out", softmax_out);
  FOO_IMPL(m, "_log_softmax", log_softmax);
  FOO_IMPL(m, "_log_softmax.out", log_softmax_out);
  FOO_IMPL(m, "_softmax_backward_data", softmax_backward);
  FOO_IMPL(m, "_softmax_backward_data.out", softmax_backward_out);
  FOO_IMPL(m, "_log_softmax_backward_data", log_softmax_backward);
  FOO_IMPL(m, "_log_softmax_backward_data.out", log_softmax_backward_out);
  FOO_IMPL(m, "nll_loss_forward", nll_loss_forward);
  FOO_IMPL(m, "nll_loss_forward.output", nll_loss_forward_out);
  FOO_IMPL(m, "nll_loss_backward", nll_loss_backward);
  FOO_IMPL(m, "nll_loss_backward.grad_input", nll_loss_backward_out);
  FOO_IMPL(m, "nll_loss2d_forward", nll_loss2d_forward);
  FOO_IMPL(m, "nll_loss2d_forward.output", nll_loss2d_forward_out);
  FOO_IMPL(m, "nll_loss2d_backward", nll_loss2d_backward);
  FOO_IMPL(m, "nll_loss2d_backward.grad_input", nll_loss2d_backward_out);
  FOO_IMPL(m, "mse_loss", mse_loss);
  FOO_IMPL(m, "mse_loss.out", mse_loss_out);
  FOO_IMPL(m, "mse_loss_backward", mse_loss_backward);
  FOO_IMPL(m, "mse_loss_backward.grad_input", mse_loss_backward_out);
  FOO_IMPL(m, "binary_cross_entropy", binary_cross_entropy);
  FOO_IMPL(m, "binary_cross_entropy.out", binary_cross_entropy_out);
  FOO_IMPL(m, "binary_cross_entropy_backward", binary_cross_entropy_backward);
  FOO_IMPL(m, "binary_cross_entropy_backward.grad_input", binary_cross_entropy_backward_out);
  FOO_IMPL(m, "native_layer_norm", native_layer_norm);
  FOO_IMPL(m, "native_layer_norm_backward", native_layer_norm_backward);
  FOO_IMPL(m, "native_group_norm", native_group_norm);
  FOO_IMPL(m, "native_group_norm_backward", native_group_norm_backward);
  FOO_IMPL(m, "native_batch_norm", native_batch_norm);
  FOO_IMPL(m, "_native_batch_norm_legit", native_batch_norm_legit);
  FOO_IMPL(m, "_native_batch_norm_legit.no_stats", native_batch_norm_legit_no_stats);
  FOO_IMPL(m, "_batch_norm_with_update", batch_norm_with_update);
  FOO_IMPL(m, "native_batch_norm_backward", native_batch_norm_backward);
  FOO_IMPL(m, "batch_norm_backward", batch_norm_backward);
  FOO_IMPL(m, "embedding_dense_backward", embedding_dense_backward);
  FOO_IMPL(m, "embedding_dense_backward.out", embedding_dense_backward_out);
}

}  // namespace foo::ops::nn
