// 2-D pooling (max with indices, average, adaptive average) forward and backward: argument
// checks and output shapes as ATen's meta functions; the windows in Rust (kernels/pool).
// 1-D pooling reaches these through ATen's composite max_pool1d/avg_pool1d/adaptive_avg_pool1d.
#include <ATen/native/Pool.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "common.h"
#include "foo_ffi.h"

namespace foo::ops {
namespace {

// A 4-D [N, C, H, W] descriptor over a 3-D or 4-D tensor.
struct View4 {
  int64_t sizes[4];
  int64_t strides[4];
  FooTensor d;
  explicit View4(const at::Tensor& t) {
    const int64_t pad = 4 - t.dim();
    for (int64_t i = 0; i < 4; ++i) {
      sizes[i] = i < pad ? 1 : t.size(i - pad);
      strides[i] = i < pad ? 0 : t.stride(i - pad);
    }
    d = describe(t);
    d.sizes = sizes;
    d.strides = strides;
    d.ndim = 4;
  }
};

struct Window {
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
};

Window window(const char* name, at::IntArrayRef kernel_size, at::IntArrayRef stride, at::IntArrayRef padding,
              at::IntArrayRef dilation) {
  TORCH_CHECK(kernel_size.size() == 1 || kernel_size.size() == 2, name,
              ": kernel_size must either be a single int, or a tuple of two ints");
  TORCH_CHECK(stride.empty() || stride.size() == 1 || stride.size() == 2, name,
              ": stride must either be omitted, a single int, or a tuple of two ints");
  TORCH_CHECK(padding.size() == 1 || padding.size() == 2, name,
              ": padding must either be a single int, or a tuple of two ints");
  TORCH_CHECK(dilation.size() == 1 || dilation.size() == 2, name,
              ": dilation must be either a single int, or a tuple of two ints");
  Window w{};
  w.kh = kernel_size[0];
  w.kw = kernel_size.size() == 1 ? w.kh : kernel_size[1];
  w.sh = stride.empty() ? w.kh : stride[0];
  w.sw = stride.empty() ? w.kw : stride.size() == 1 ? w.sh : stride[1];
  w.ph = padding[0];
  w.pw = padding.size() == 1 ? w.ph : padding[1];
  w.dh = dilation[0];
  w.dw = dilation.size() == 1 ? w.dh : dilation[1];
  TORCH_CHECK(w.kw > 0 && w.kh > 0, "kernel size should be greater than zero, but got kH: ", w.kh, " kW: ", w.kw);
  TORCH_CHECK(w.sw > 0 && w.sh > 0, "stride should be greater than zero, but got dH: ", w.sh, " dW: ", w.sw);
  TORCH_CHECK(w.dh > 0 && w.dw > 0, "dilation should be greater than zero, but got dilationH: ", w.dh,
              " dilationW: ", w.dw);
  return w;
}

void check_input(const at::Tensor& t, const char* name) {
  TORCH_CHECK((t.dim() == 3 || t.dim() == 4) && t.size(-1) != 0 && t.size(-2) != 0 &&
                  (t.dim() == 3 ? t.size(0) != 0 : t.size(1) != 0),
              "Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but got:",
              t.sizes());
  const auto st = t.scalar_type();
  // The CPU pools integers too; foo's kernels are for floats.
  if (at::isIntegralType(st, /*includeBool=*/false)) needs_fallback(std::string(name) + ": no foo kernel for integer inputs");
  TORCH_CHECK_NOT_IMPLEMENTED(st == at::kFloat || st == at::kDouble || st == at::kHalf || st == at::kBFloat16,
                              "\"", name, "\" not implemented for '", st, "'");
}

// An out= tensor of another dtype is a RuntimeError, as on the CPU (not the kernel's ValueError).
void check_out_dtype(const at::Tensor& out, const at::Tensor& self, const char* name) {
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), name, ": expected out to have dtype ", self.scalar_type(),
              ", but got ", out.scalar_type());
}

// The pooled shape, with the input's checks in the CPU's order: rank, then the window against the
// input (pad must be non-negative, ...), then the input's sizes and dtype, then the output size.
std::vector<int64_t> out_shape(const at::Tensor& input, const Window& w, bool ceil_mode, const char* name) {
  TORCH_CHECK(input.dim() == 3 || input.dim() == 4, "non-empty 3D or 4D (batch mode) tensor expected for input");
  const int64_t ih = input.size(-2), iw = input.size(-1);
  const int64_t oh = at::native::pooling_output_shape<int64_t>(ih, w.kh, w.ph, w.sh, w.dh, ceil_mode);
  const int64_t ow = at::native::pooling_output_shape<int64_t>(iw, w.kw, w.pw, w.sw, w.dw, ceil_mode);
  check_input(input, name);
  // pool2d_shape_check's own rule, on the kernel without dilation (pooling_output_shape above
  // allowed up to half of the dilated kernel).
  TORCH_CHECK(w.kw / 2 >= w.pw && w.kh / 2 >= w.ph, "pad should be smaller than or equal to half of kernel size, but got ",
              "padW = ", w.pw, ", padH = ", w.ph, ", kW = ", w.kw, ", kH = ", w.kh);
  TORCH_CHECK(oh >= 1 && ow >= 1, "Given input size: (", input.size(-3), "x", ih, "x", iw,
              "). Calculated output size: (", input.size(-3), "x", oh, "x", ow, "). Output size is too small");
  std::vector<int64_t> shape(input.sizes().begin(), input.sizes().end());
  shape[shape.size() - 2] = oh;
  shape[shape.size() - 1] = ow;
  return shape;
}

FooPool2dParams make_params(const Window& w, bool count_include_pad, std::optional<int64_t> divisor_override) {
  FooPool2dParams p{};
  p.kernel[0] = w.kh;
  p.kernel[1] = w.kw;
  p.stride[0] = w.sh;
  p.stride[1] = w.sw;
  p.padding[0] = w.ph;
  p.padding[1] = w.pw;
  p.dilation[0] = w.dh;
  p.dilation[1] = w.dw;
  p.count_include_pad = count_include_pad ? 1 : 0;
  p.divisor_override = divisor_override.value_or(0);
  return p;
}

// Runs `fn(dst)` on `out` resized to `shape`, through a contiguous temporary when `out` is not.
template <typename F>
void into(at::Tensor& out, c10::IntArrayRef shape, F fn) {
  at::native::resize_output(out, shape);
  if (out.numel() == 0) return;
  if (out.is_contiguous()) {
    fn(out);
  } else {
    at::Tensor tmp = at::empty(shape, out.options());
    fn(tmp);
    out.copy_(tmp);
  }
}

// ---- max pooling ---------------------------------------------------------------------------------
std::tuple<at::Tensor&, at::Tensor&> max_pool2d_with_indices_out(const at::Tensor& self, at::IntArrayRef kernel_size,
                                                                 at::IntArrayRef stride, at::IntArrayRef padding,
                                                                 at::IntArrayRef dilation, bool ceil_mode,
                                                                 at::Tensor& out, at::Tensor& indices) {
  const Window w = window("max_pool2d", kernel_size, stride, padding, dilation);
  const auto shape = out_shape(self, w, ceil_mode, "max_pool2d");
  check_out_dtype(out, self, "max_pool2d");
  const FooPool2dParams p = make_params(w, true, std::nullopt);
  at::native::resize_output(indices, shape);
  at::Tensor idx = indices.is_contiguous() ? indices : at::empty(shape, indices.options());
  into(out, shape, [&](const at::Tensor& dst) {
    const View4 vo(dst), vi(idx), vx(self);
    check(foo_max_pool2d(&vo.d, &vi.d, &vx.d, &p), "max_pool2d_with_indices");
  });
  if (!idx.is_same(indices)) indices.copy_(idx);
  return {out, indices};
}
std::tuple<at::Tensor, at::Tensor> max_pool2d_with_indices(const at::Tensor& self, at::IntArrayRef kernel_size,
                                                           at::IntArrayRef stride, at::IntArrayRef padding,
                                                           at::IntArrayRef dilation, bool ceil_mode) {
  at::Tensor out = at::empty({0}, self.options());
  at::Tensor indices = at::empty({0}, self.options().dtype(at::kLong));
  max_pool2d_with_indices_out(self, kernel_size, stride, padding, dilation, ceil_mode, out, indices);
  return {in_layout_of(out, self), in_layout_of(indices, self)};
}
at::Tensor& max_pool2d_with_indices_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                                 at::IntArrayRef kernel_size, at::IntArrayRef stride,
                                                 at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode,
                                                 const at::Tensor& indices, at::Tensor& grad_input) {
  const Window w = window("max_pool2d", kernel_size, stride, padding, dilation);
  const auto shape = out_shape(self, w, ceil_mode, "max_pool2d_with_indices_backward");
  TORCH_CHECK(grad_output.sizes().equals(shape) && indices.sizes().equals(shape),
              "max_pool2d_with_indices_backward: grad_output ", grad_output.sizes(), " and indices ", indices.sizes(),
              " must have the pooled shape ", c10::IntArrayRef(shape));
  TORCH_CHECK(grad_output.scalar_type() == self.scalar_type(), "expected dtype ", self.scalar_type(),
              " for `grad_output` but got dtype ", grad_output.scalar_type());
  const at::Tensor go = grad_output.contiguous();
  const at::Tensor idx = indices.contiguous();
  into(grad_input, self.sizes(), [&](const at::Tensor& dst) {
    const View4 vgi(dst), vgo(go), vi(idx);
    check(foo_max_pool2d_backward(&vgi.d, &vgo.d, &vi.d), "max_pool2d_with_indices_backward");
  });
  return grad_input;
}
at::Tensor max_pool2d_with_indices_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                            at::IntArrayRef kernel_size, at::IntArrayRef stride,
                                            at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode,
                                            const at::Tensor& indices) {
  at::Tensor gi = at::empty({0}, self.options());
  return in_layout_of(max_pool2d_with_indices_backward_out(grad_output, self, kernel_size, stride, padding, dilation,
                                                           ceil_mode, indices, gi),
                      self);
}

// ---- average pooling -----------------------------------------------------------------------------
at::Tensor& avg_pool2d_out(const at::Tensor& self, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                           at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                           std::optional<int64_t> divisor_override, at::Tensor& out) {
  const Window w = window("avg_pool2d", kernel_size, stride, padding, at::IntArrayRef{1});
  const auto shape = out_shape(self, w, ceil_mode, "avg_pool2d");
  check_out_dtype(out, self, "avg_pool2d");
  TORCH_CHECK(!divisor_override.has_value() || divisor_override.value() != 0, "divisor must be not zero");
  const FooPool2dParams p = make_params(w, count_include_pad, divisor_override);
  into(out, shape, [&](const at::Tensor& dst) {
    const View4 vo(dst), vx(self);
    check(foo_avg_pool2d(&vo.d, &vx.d, &p), "avg_pool2d");
  });
  return out;
}
at::Tensor avg_pool2d(const at::Tensor& self, at::IntArrayRef kernel_size, at::IntArrayRef stride,
                      at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                      std::optional<int64_t> divisor_override) {
  at::Tensor out = at::empty({0}, self.options());
  return in_layout_of(
      avg_pool2d_out(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, out), self);
}
at::Tensor& avg_pool2d_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                    at::IntArrayRef kernel_size, at::IntArrayRef stride, at::IntArrayRef padding,
                                    bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override,
                                    at::Tensor& grad_input) {
  TORCH_CHECK(!divisor_override.has_value() || divisor_override.value() != 0, "divisor must be not zero");
  const Window w = window("avg_pool2d", kernel_size, stride, padding, at::IntArrayRef{1});
  const auto shape = out_shape(self, w, ceil_mode, "avg_pool2d_backward");
  TORCH_CHECK(grad_output.sizes().equals(shape), "avg_pool2d_backward: grad_output ", grad_output.sizes(),
              " must have the pooled shape ", c10::IntArrayRef(shape));
  TORCH_CHECK(grad_output.scalar_type() == self.scalar_type(), "expected dtype ", self.scalar_type(),
              " for `grad_output` but got dtype ", grad_output.scalar_type());
  const FooPool2dParams p = make_params(w, count_include_pad, divisor_override);
  into(grad_input, self.sizes(), [&](const at::Tensor& dst) {
    const View4 vgi(dst), vgo(grad_output);
    check(foo_avg_pool2d_backward(&vgi.d, &vgo.d, &p), "avg_pool2d_backward");
  });
  return grad_input;
}
at::Tensor avg_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& self, at::IntArrayRef kernel_size,
                               at::IntArrayRef stride, at::IntArrayRef padding, bool ceil_mode,
                               bool count_include_pad, std::optional<int64_t> divisor_override) {
  at::Tensor gi = at::empty({0}, self.options());
  return in_layout_of(avg_pool2d_backward_out(grad_output, self, kernel_size, stride, padding, ceil_mode,
                                              count_include_pad, divisor_override, gi),
                      self);
}

// ---- adaptive average pooling --------------------------------------------------------------------
at::Tensor& adaptive_avg_pool2d_out(const at::Tensor& self, c10::SymIntArrayRef output_size, at::Tensor& out) {
  TORCH_CHECK(output_size.size() == 2, "adaptive_avg_pool2d: output_size must be 2");
  const int64_t oh = output_size[0].expect_int(), ow = output_size[1].expect_int();
  TORCH_CHECK(oh >= 0 && ow >= 0, "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 ",
              "but received {", oh, ", ", ow, "}");
  for (int64_t i = 1; i < self.dim(); ++i) {
    TORCH_CHECK(self.size(i) > 0, "adaptive_avg_pool2d(): Expected self to have non-zero size for non-batch "
                "dimensions, but input has sizes ", self.sizes(), " with dimension ", i, " being empty");
  }
  TORCH_CHECK(self.dim() == 3 || self.dim() == 4, "adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got ",
              self.sizes());
  check_input(self, "adaptive_avg_pool2d");
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
  shape[shape.size() - 2] = oh;
  shape[shape.size() - 1] = ow;
  into(out, shape, [&](const at::Tensor& dst) {
    const View4 vo(dst), vx(self);
    check(foo_adaptive_avg_pool2d(&vo.d, &vx.d), "adaptive_avg_pool2d");
  });
  return out;
}
at::Tensor adaptive_avg_pool2d(const at::Tensor& self, c10::SymIntArrayRef output_size) {
  at::Tensor out = at::empty({0}, self.options());
  return in_layout_of(adaptive_avg_pool2d_out(self, output_size, out), self);
}
at::Tensor& adaptive_avg_pool2d_backward_out(const at::Tensor& grad_output, const at::Tensor& self,
                                             at::Tensor& out) {
  check_input(self, "adaptive_avg_pool2d_backward");
  TORCH_CHECK(grad_output.dim() == self.dim(), "adaptive_avg_pool2d_backward: grad_output rank ", grad_output.dim(),
              " differs from the input's ", self.dim());
  TORCH_CHECK(grad_output.scalar_type() == self.scalar_type(), "expected dtype ", self.scalar_type(),
              " for `grad_output` but got dtype ", grad_output.scalar_type());
  into(out, self.sizes(), [&](const at::Tensor& dst) {
    const View4 vgi(dst), vgo(grad_output);
    check(foo_adaptive_avg_pool2d_backward(&vgi.d, &vgo.d), "adaptive_avg_pool2d_backward");
  });
  return out;
}
at::Tensor adaptive_avg_pool2d_backward(const at::Tensor& grad_output, const at::Tensor& self) {
  at::Tensor out = at::empty({0}, self.options());
  return adaptive_avg_pool2d_backward_out(grad_output, self, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  FOO_IMPL(m, "max_pool2d_with_indices", max_pool2d_with_indices);
  FOO_IMPL(m, "max_pool2d_with_indices.out", max_pool2d_with_indices_out);
  FOO_IMPL(m, "max_pool2d_with_indices_backward", max_pool2d_with_indices_backward);
  FOO_IMPL(m, "max_pool2d_with_indices_backward.grad_input", max_pool2d_with_indices_backward_out);
  FOO_IMPL(m, "avg_pool2d", avg_pool2d);
  FOO_IMPL(m, "avg_pool2d.out", avg_pool2d_out);
  FOO_IMPL(m, "avg_pool2d_backward", avg_pool2d_backward);
  FOO_IMPL(m, "avg_pool2d_backward.grad_input", avg_pool2d_backward_out);
  FOO_IMPL(m, "_adaptive_avg_pool2d", adaptive_avg_pool2d);
  FOO_IMPL(m, "_adaptive_avg_pool2d.out", adaptive_avg_pool2d_out);
  FOO_IMPL(m, "adaptive_avg_pool2d.out", adaptive_avg_pool2d_out);
  FOO_IMPL(m, "_adaptive_avg_pool2d_backward", adaptive_avg_pool2d_backward);
  FOO_IMPL(m, "_adaptive_avg_pool2d_backward.out", adaptive_avg_pool2d_backward_out);
}

}  // namespace foo::ops
