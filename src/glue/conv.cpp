// Convolution (aten::convolution_overrideable / convolution_backward_overrideable: what
// aten::_convolution and aten::convolution_backward select for an out-of-tree backend).
// Shapes and 5-D descriptors here; the kernels in Rust (kernels/conv.rs). float16/bfloat16
// are computed in float32 (converted by foo's copy kernel) and rounded back. Results are
// channels-last where the CPU's are (conv_format); Rust computes in that layout.
#include <ATen/native/ConvUtils.h>
#include <torch/library.h>

#include "common.h"
#include "foo_ffi.h"

namespace foo::ops {
namespace {

// A 5-D [N, C, D, H, W] descriptor over a 3-, 4- or 5-D tensor (unit leading spatial dims).
struct View5 {
  int64_t sizes[5];
  int64_t strides[5];
  FooTensor d;
  explicit View5(const at::Tensor& t) {
    const int64_t k = t.dim();
    TORCH_CHECK(k >= 3 && k <= 5, "convolution: expected a 3-D, 4-D or 5-D tensor, got ", k, "-D");
    const int64_t pad = 5 - k;
    for (int64_t i = 0; i < 5; ++i) {
      if (i < 2) {
        sizes[i] = t.size(i);
        strides[i] = t.stride(i);
      } else if (i < 2 + pad) {
        sizes[i] = 1;
        strides[i] = 0;
      } else {
        sizes[i] = t.size(i - pad);
        strides[i] = t.stride(i - pad);
      }
    }
    d = describe(t);
    d.sizes = sizes;
    d.strides = strides;
    d.ndim = 5;
  }
};

FooConvParams make_params(at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups,
                          int64_t spatial) {
  FooConvParams p{};
  const int64_t pad = 3 - spatial;
  for (int64_t i = 0; i < 3; ++i) {
    const int64_t j = i - pad;
    auto at_or = [&](at::IntArrayRef a, int64_t dflt) -> int64_t {
      if (j < 0) return dflt;
      if (a.size() == 1) return a[0];
      return static_cast<int64_t>(a.size()) > j ? a[j] : dflt;
    };
    p.stride[i] = at_or(stride, 1);
    p.padding[i] = at_or(padding, 0);
    p.dilation[i] = at_or(dilation, 1);
  }
  p.groups = groups;
  return p;
}

bool reduced(at::ScalarType t) { return t == at::kHalf || t == at::kBFloat16; }

void check_float(const at::Tensor& t, const char* op) {
  const auto st = t.scalar_type();

  TORCH_CHECK_NOT_IMPLEMENTED(st == at::kFloat || st == at::kDouble || reduced(st), "\"", op,
                              "\" not implemented for '", st, "'");
}

at::Tensor opt_to(const at::Tensor& t, at::ScalarType ct) { return t.defined() ? t.to(ct) : t; }

// The memory format of a convolution's result, as the CPU's: channels-last (3d) if the input
// or the weight is; contiguous for float64 3-D convolutions, which the CPU runs on
// slow_conv3d (no channels-last kernel).
at::MemoryFormat conv_format(const at::Tensor& input, const at::Tensor& weight) {
  if (input.dim() != 4 && input.dim() != 5) return at::MemoryFormat::Contiguous;
  if (input.dim() == 5 && input.scalar_type() == at::kDouble) return at::MemoryFormat::Contiguous;
  const auto cl = input.dim() == 4 ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::ChannelsLast3d;
  return input.suggest_memory_format() == cl || weight.suggest_memory_format() == cl ? cl
                                                                                       : at::MemoryFormat::Contiguous;
}

at::Tensor conv_core(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias, const FooConvParams& p,
                     bool transposed, at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                     at::IntArrayRef output_padding, int64_t groups) {
  const at::MemoryFormat format = conv_format(input, weight);
  // The forward kernels read a weight of any strides (a channels-last one packs fastest).
  const at::Tensor w = transposed ? weight.contiguous() : weight;
  std::vector<int64_t> shape;
  if (!transposed) {
    shape = at::native::conv_output_size(input.sizes(), w.sizes(), padding, stride, dilation);
  } else {
    std::vector<int64_t> op(input.dim() - 2, 0);
    for (size_t i = 0; i < op.size(); ++i) op[i] = output_padding.size() == 1 ? output_padding[0] : output_padding[i];
    auto expand = [&](at::IntArrayRef a) {
      std::vector<int64_t> v(input.dim() - 2);
      for (size_t i = 0; i < v.size(); ++i) v[i] = a.size() == 1 ? a[0] : a[i];
      return v;
    };
    shape = at::native::conv_input_size(input.sizes(), w.sizes(), expand(padding), op, expand(stride),
                                        expand(dilation), groups);
  }
  at::Tensor out = at::empty(shape, input.options().memory_format(format));
  if (out.numel() == 0) return out;
  const View5 vo(out), vw(w);
  if (!transposed) {
    const View5 vi(input);
    FooTensor bd;
    if (bias.defined()) bd = describe(bias);
    check(foo_conv_forward(&vo.d, &vi.d, &vw.d, bias.defined() ? &bd : nullptr, &p), "convolution");
  } else {
    const View5 vi(input);
    FooTensor bd;
    if (bias.defined()) bd = describe(bias);
    check(foo_conv_backward_input(&vo.d, &vi.d, &vw.d, bias.defined() ? &bd : nullptr, &p), "conv_transpose");
  }
  return out;
}

at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias_opt, at::IntArrayRef stride,
                                    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                                    at::IntArrayRef output_padding, int64_t groups) {
  if (at::isIntegralType(input.scalar_type(), /*includeBool=*/false)) {
    // The CPU convolves integers (slow_conv2d); foo's kernels are for floats. The boxed fallback
    // cannot take this op (convolution_overrideable has no CPU kernel), so the CPU's convolution
    // runs here, counted as a fallback like any other.
    count_fallback("aten::convolution_overrideable", "foo convolution has no integer kernel");
    const c10::Device dev = input.device();
    const at::Tensor b = bias_opt.has_value() && bias_opt->defined() ? bias_opt->cpu() : at::Tensor();
    return at::convolution(input.cpu(), weight.cpu(), b, stride, padding, dilation, transposed, output_padding, groups)
        .to(dev);
  }
  check_float(input, "convolution");
  TORCH_CHECK(input.scalar_type() == weight.scalar_type(), "Input type (", input.scalar_type(),
              ") and weight type (", weight.scalar_type(), ") should be the same");
  const at::Tensor bias = bias_opt.has_value() ? *bias_opt : at::Tensor();
  TORCH_CHECK(!bias.defined() || bias.scalar_type() == input.scalar_type(), "Input type (", input.scalar_type(),
              ") and bias type (", bias.scalar_type(), ") should be the same");
  TORCH_CHECK(input.dim() >= 3 && input.dim() <= 5 && weight.dim() == input.dim(),
              "convolution: expected 3-D to 5-D input and weight of the same rank");
  const FooConvParams p = make_params(stride, padding, dilation, groups, input.dim() - 2);
  if (reduced(input.scalar_type())) {
    const auto ct = at::kFloat;
    return conv_core(input.to(ct), weight.to(ct), opt_to(bias, ct), p, transposed, stride, padding, dilation,
                     output_padding, groups)
        .to(input.scalar_type());
  }
  return conv_core(input, weight, bias, p, transposed, stride, padding, dilation, output_padding, groups);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor& grad_output_, const at::Tensor& input_, const at::Tensor& weight_, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding, int64_t groups,
    std::array<bool, 3> output_mask) {
  (void)output_padding;
  check_float(input_, "convolution_backward");
  const auto dt = input_.scalar_type();
  const bool red = reduced(dt);
  const at::Tensor grad_output = red ? grad_output_.to(at::kFloat) : grad_output_;
  const at::Tensor input = red ? input_.to(at::kFloat) : input_;
  const at::Tensor weight = (red ? weight_.to(at::kFloat) : weight_).contiguous();
  const FooConvParams p = make_params(stride, padding, dilation, groups, input.dim() - 2);
  // The gradient in the forward result's layout: the layout the kernels read fastest.
  const at::Tensor go = grad_output.contiguous(conv_format(input, weight_));
  const View5 vgo(go), vw(weight);
  at::Tensor gi, gw, gb;
  if (output_mask[0]) {
    gi = at::empty(input.sizes(), input.options().memory_format(input.suggest_memory_format()));
    if (gi.numel() > 0) {
      const View5 vgi(gi);
      if (!transposed) {
        check(foo_conv_backward_input(&vgi.d, &vgo.d, &vw.d, nullptr, &p), "convolution_backward");
      } else {
        check(foo_conv_forward(&vgi.d, &vgo.d, &vw.d, nullptr, &p), "convolution_backward");
      }
    }
  }
  if (output_mask[1]) {
    // In the forward's layout, as the CPU's (autograd re-strides it to the weight's where the
    // two differ; 1x1 and depthwise weights are both, and keep these strides). The kernels
    // write contiguous or channels-last gradients (the latter with one channel or a 1x1
    // kernel is contiguous too).
    gw = at::empty(weight.sizes(), weight.options().memory_format(conv_format(input_, weight_)));
    if (gw.numel() > 0) {
      const View5 vgw(gw);
      if (!transposed) {
        const View5 vi(input);
        check(foo_conv_backward_weight(&vgw.d, &vi.d, &vgo.d, &p), "convolution_backward");
      } else {
        const View5 vx(input);
        check(foo_conv_backward_weight(&vgw.d, &vgo.d, &vx.d, &p), "convolution_backward");
      }
    }
  }
  if (output_mask[2]) {
    gb = at::empty({go.size(1)}, go.options());
    // The 5-D view: the kernel's channels-last test reads 5-D strides.
    const FooTensor dgb = describe(gb);
    check(foo_conv_backward_bias(&dgb, &vgo.d), "convolution_backward");
  }
  if (red) {
    if (gi.defined()) gi = gi.to(dt);
    if (gw.defined()) gw = gw.to(dt);
    if (gb.defined()) gb = gb.to(dt);
  }
  return {gi, gw, gb};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  FOO_IMPL(m, "convolution_overrideable", convolution_overrideable);
  FOO_IMPL(m, "convolution_backward_overrideable", convolution_backward_overrideable);
}

}  // namespace foo::ops
