// Fused LSTM/GRU cells: the pointwise tails PyTorch's RNN loop runs on every device but CPU.
// The glue checks arguments as CUDA does (aten/src/ATen/native/cuda/RNN.cu: same checks and
// messages, plus exact shapes, which the kernels rely on), allocates CUDA's outputs (contiguous;
// the LSTM workspace is [B, 4H], the GRU one [B, 5H]) and calls Rust (foo_ffi.h), which also
// computes the bias gradients: no arithmetic on tensor data here.
#include <ATen/TensorUtils.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "common.h"
#include "foo_ffi.h"
#include "rnn.h"

namespace foo::ops::rnn {
namespace {

using OptT = std::optional<at::Tensor>;

constexpr int64_t kLstmGates = 4;
constexpr int64_t kGruGates = 3;
// GRU workspace columns per hidden unit: r, z, n, hx, hidden n-gate + its bias.
constexpr int64_t kGruWorkspaceGates = 5;

FooTensor describe_maybe(const Tensor& t) { return t.defined() ? describe(t) : FooTensor{}; }

const FooTensor* opt(const FooTensor& d, const Tensor& t) { return t.defined() ? &d : nullptr; }

Tensor value_or_undefined(const OptT& t) { return t.has_value() ? *t : Tensor(); }

// The kernels' dtypes (CUDA's AT_DISPATCH_FLOATING_TYPES_AND2(Half, BFloat16)), shared by every
// defined operand, and one device.
void check_types(at::CheckedFrom c, std::initializer_list<at::TensorArg> args) {
  const at::TensorArg& first = *args.begin();
  const auto dt = first->scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(
      dt == at::kFloat || dt == at::kDouble || dt == at::kHalf || dt == at::kBFloat16, "\"", c,
      "\" not implemented for '", dt, "'");
  at::checkAllSameType(c, args);
  for (const auto& a : args) {
    if (!a->defined()) continue;
    TORCH_CHECK(a->device() == first->device(), "Expected all tensors to be on the same device, but found ",
                first->device(), " (", first.name, ") and ", a->device(), " (", a.name, ") in ", c);
  }
}

// RNN.cu's checkSizes, plus: the gate count divides the gate columns, both biases or neither,
// and prev_hidden is exactly [B, H] (CUDA only checks its numel).
void check_cell(at::CheckedFrom c, const Tensor& input_gates, const Tensor& hidden_gates, const Tensor& input_bias,
                const Tensor& hidden_bias, int64_t factor, const Tensor& prev_hidden) {
  const at::TensorArg ig{input_gates, "input_gates", 1}, hg{hidden_gates, "hidden_gates", 2},
      b1{input_bias, "input_bias", 3}, b2{hidden_bias, "hidden_bias", 4}, prev{prev_hidden, "prev_hidden", 5};
  at::checkDim(c, ig, 2);
  at::checkSameSize(c, ig, hg);
  const int64_t gates_size = input_gates.size(1);
  TORCH_CHECK(gates_size % factor == 0, c, ": expected input_gates to have ", factor,
              " * hidden_size columns, but got ", gates_size);
  TORCH_CHECK(input_bias.defined() == hidden_bias.defined(), c,
              ": input_bias and hidden_bias must be both defined or both undefined");
  if (input_bias.defined()) {
    at::checkDim(c, b1, 1);
    at::checkNumel(c, b1, gates_size);
    at::checkSameSize(c, b1, b2);
  }
  at::checkDim(c, prev, 2);
  at::checkNumel(c, prev, input_gates.size(0) * gates_size / factor);
  at::checkSize(c, prev, {input_gates.size(0), gates_size / factor});
  check_types(c, {ig, hg, b1, b2, prev});
}

Tensor contiguous_or_undefined(const Tensor& t) { return t.defined() ? t.contiguous() : t; }

}  // namespace

void lstm_cell_into(const Tensor& hy, const Tensor& cy, const Tensor& workspace, const Tensor& input_gates,
                    const Tensor& hidden_gates, const Tensor& cx, const Tensor& input_bias, const Tensor& hidden_bias) {
  const FooTensor dhy = describe(hy), dcy = describe(cy), dws = describe(workspace), dig = describe(input_gates),
                  dhg = describe(hidden_gates), dcx = describe(cx), db1 = describe_maybe(input_bias),
                  db2 = describe_maybe(hidden_bias);
  check(foo_lstm_cell(&dhy, &dcy, &dws, &dig, &dhg, &dcx, opt(db1, input_bias), opt(db2, hidden_bias)),
        "_thnn_fused_lstm_cell");
}

void lstm_layer_into(const Tensor& out, const Tensor& c_last, const Tensor& cs, const Tensor& workspace,
                     const Tensor& input_gates, const Tensor& w_ih, const Tensor& w_hh, const Tensor& h0,
                     const Tensor& c0, const Tensor& input_bias, const Tensor& hidden_bias, bool reverse) {
  const FooTensor dout = describe(out), dlast = describe(c_last), dcs = describe_maybe(cs),
                  dws = describe_maybe(workspace), dig = describe(input_gates), dwi = describe_maybe(w_ih),
                  dw = describe(w_hh), dh0 = describe(h0), dc0 = describe(c0), db1 = describe_maybe(input_bias),
                  db2 = describe_maybe(hidden_bias);
  check(foo_lstm_layer(&dout, &dlast, opt(dcs, cs), opt(dws, workspace), &dig, opt(dwi, w_ih), &dw, &dh0, &dc0,
                       opt(db1, input_bias), opt(db2, hidden_bias), reverse),
        "lstm");
}

bool lstm_layer_projects(const Tensor& x, int64_t hidden) {
  return foo_lstm_layer_projects(x.scalar_type() == at::kFloat, hidden);
}

void lstm_layer_backward_into(const Tensor& grad_gates, const Tensor& grad_h0, const Tensor& grad_c0,
                              const Tensor& grad_out, const Tensor& grad_h, const Tensor& grad_c, const Tensor& cs,
                              const Tensor& workspace, const Tensor& c0, const Tensor& w_hh, bool reverse) {
  const FooTensor dgg = describe(grad_gates), dgh0 = describe(grad_h0), dgc0 = describe(grad_c0),
                  dgo = describe(grad_out), dgh = describe(grad_h), dgc = describe(grad_c), dcs = describe(cs),
                  dws = describe(workspace), dc0 = describe(c0), dw = describe(w_hh);
  check(foo_lstm_layer_backward(&dgg, &dgh0, &dgc0, &dgo, &dgh, &dgc, &dcs, &dws, &dc0, &dw, reverse), "lstm");
}

void lstm_cell_backward_into(const Tensor& grad_gates, const Tensor& grad_cx, const Tensor& grad_bias,
                             const Tensor& grad_hy, const Tensor& grad_cy, const Tensor& cx, const Tensor& cy,
                             const Tensor& workspace) {
  const FooTensor dgg = describe(grad_gates), dgcx = describe(grad_cx), dgb = describe_maybe(grad_bias),
                  dghy = describe_maybe(grad_hy), dgcy = describe_maybe(grad_cy), dcx = describe(cx),
                  dcy = describe(cy), dws = describe(workspace);
  check(foo_lstm_cell_backward(&dgg, &dgcx, opt(dgb, grad_bias), opt(dghy, grad_hy), opt(dgcy, grad_cy), &dcx,
                               &dcy, &dws),
        "_thnn_fused_lstm_cell_backward_impl");
}

void gru_cell_into(const Tensor& hy, const Tensor& workspace, const Tensor& input_gates, const Tensor& hidden_gates,
                   const Tensor& hx, const Tensor& input_bias, const Tensor& hidden_bias) {
  const FooTensor dhy = describe(hy), dws = describe(workspace), dig = describe(input_gates),
                  dhg = describe(hidden_gates), dhx = describe(hx), db1 = describe_maybe(input_bias),
                  db2 = describe_maybe(hidden_bias);
  check(foo_gru_cell(&dhy, &dws, &dig, &dhg, &dhx, opt(db1, input_bias), opt(db2, hidden_bias)),
        "_thnn_fused_gru_cell");
}

void gru_cell_backward_into(const Tensor& grad_input_gates, const Tensor& grad_hidden_gates, const Tensor& grad_hx,
                            const Tensor& grad_input_bias, const Tensor& grad_hidden_bias, const Tensor& grad_hy,
                            const Tensor& workspace) {
  const FooTensor dgi = describe(grad_input_gates), dgh = describe(grad_hidden_gates), dghx = describe(grad_hx),
                  dgib = describe_maybe(grad_input_bias), dghb = describe_maybe(grad_hidden_bias),
                  dgo = describe(grad_hy), dws = describe(workspace);
  check(foo_gru_cell_backward(&dgi, &dgh, &dghx, opt(dgib, grad_input_bias), opt(dghb, grad_hidden_bias), &dgo,
                              &dws),
        "_thnn_fused_gru_cell_backward");
}

namespace {

std::tuple<Tensor, Tensor, Tensor> fused_lstm_cell(const Tensor& input_gates, const Tensor& hidden_gates,
                                                   const Tensor& cx, const OptT& input_bias_opt,
                                                   const OptT& hidden_bias_opt) {
  const Tensor input_bias = value_or_undefined(input_bias_opt), hidden_bias = value_or_undefined(hidden_bias_opt);
  check_cell("_thnn_fused_lstm_cell", input_gates, hidden_gates, input_bias, hidden_bias, kLstmGates, cx);
  const c10::DeviceGuard guard(input_gates.device());
  Tensor workspace = at::empty(input_gates.sizes(), input_gates.options());
  Tensor hy = at::empty(cx.sizes(), cx.options());
  Tensor cy = at::empty(cx.sizes(), cx.options());
  lstm_cell_into(hy, cy, workspace, input_gates, hidden_gates, cx, contiguous_or_undefined(input_bias),
                 contiguous_or_undefined(hidden_bias));
  return {hy, cy, workspace};
}

std::tuple<Tensor, Tensor, Tensor> fused_lstm_cell_backward_impl(const OptT& grad_hy_opt, const OptT& grad_cy_opt,
                                                                 const Tensor& cx, const Tensor& cy,
                                                                 const Tensor& workspace, bool has_bias) {
  const Tensor grad_hy = value_or_undefined(grad_hy_opt), grad_cy = value_or_undefined(grad_cy_opt);
  if (!grad_hy.defined() && !grad_cy.defined()) {
    return {};
  }
  // RNN.cu's checkLSTMBackwardSizes, plus an exact [B, 4H] workspace (CUDA checks its numel).
  at::CheckedFrom c = "fused_lstm_cell_backward";
  const at::TensorArg ghy{grad_hy, "grad_hy", 1}, gcy{grad_cy, "grad_cy", 2}, acx{cx, "cx", 3}, acy{cy, "cy", 4},
      ws{workspace, "workspace", 5};
  const at::TensorArg& defined_grad = grad_hy.defined() ? ghy : gcy;
  at::checkDim(c, defined_grad, 2);
  const auto exp_size = defined_grad->sizes();
  if (grad_hy.defined()) at::checkSize(c, ghy, exp_size);
  if (grad_cy.defined()) at::checkSize(c, gcy, exp_size);
  at::checkSize(c, acx, exp_size);
  at::checkSize(c, acy, exp_size);
  at::checkDim(c, ws, 2);
  at::checkNumel(c, ws, exp_size[0] * exp_size[1] * kLstmGates);
  at::checkSize(c, ws, {exp_size[0], exp_size[1] * kLstmGates});
  check_types(c, {ws, ghy, gcy, acx, acy});
  const c10::DeviceGuard guard(workspace.device());
  Tensor grad_gates = at::empty(workspace.sizes(), workspace.options());
  Tensor grad_cx = at::empty(cx.sizes(), cx.options());
  Tensor grad_bias = has_bias ? at::empty({workspace.size(1)}, workspace.options()) : Tensor();
  lstm_cell_backward_into(grad_gates, grad_cx, grad_bias, grad_hy, grad_cy, cx, cy, workspace);
  return {grad_gates, grad_cx, grad_bias};
}

std::tuple<Tensor, Tensor> fused_gru_cell(const Tensor& input_gates, const Tensor& hidden_gates, const Tensor& hx,
                                          const OptT& input_bias_opt, const OptT& hidden_bias_opt) {
  const Tensor input_bias = value_or_undefined(input_bias_opt), hidden_bias = value_or_undefined(hidden_bias_opt);
  check_cell("_thnn_fused_gru_cell", input_gates, hidden_gates, input_bias, hidden_bias, kGruGates, hx);
  const c10::DeviceGuard guard(input_gates.device());
  Tensor workspace = at::empty({hx.size(0), hx.size(1) * kGruWorkspaceGates}, hx.options());
  Tensor hy = at::empty(hx.sizes(), hx.options());
  gru_cell_into(hy, workspace, input_gates, hidden_gates, hx, contiguous_or_undefined(input_bias),
                contiguous_or_undefined(hidden_bias));
  return {hy, workspace};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> fused_gru_cell_backward(const Tensor& grad_hy,
                                                                           const Tensor& workspace, bool has_bias) {
  if (!grad_hy.defined()) {
    return {};
  }
  // RNN.cu's checkGRUBackwardSizes.
  at::CheckedFrom c = "fused_gru_cell_backward";
  const at::TensorArg go{grad_hy, "grad_hy", 1}, ws{workspace, "workspace", 2};
  at::checkDim(c, go, 2);
  at::checkSize(c, ws, {grad_hy.size(0), grad_hy.size(1) * kGruWorkspaceGates});
  check_types(c, {ws, go});
  const c10::DeviceGuard guard(workspace.device());
  const int64_t batch = workspace.size(0), hidden = workspace.size(1) / kGruWorkspaceGates;
  Tensor grad_input_gates = at::empty({batch, hidden * kGruGates}, workspace.options());
  Tensor grad_hidden_gates = at::empty({batch, hidden * kGruGates}, workspace.options());
  Tensor grad_hx = at::empty(grad_hy.sizes(), grad_hy.options());
  Tensor grad_input_bias, grad_hidden_bias;
  if (has_bias) {
    grad_input_bias = at::empty({hidden * kGruGates}, workspace.options());
    grad_hidden_bias = at::empty({hidden * kGruGates}, workspace.options());
  }
  gru_cell_backward_into(grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias, grad_hy,
                         workspace);
  return {grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias};
}

}  // namespace

// `_thnn_fused_lstm_cell_backward` is CompositeImplicitAutograd over
// `_thnn_fused_lstm_cell_backward_impl`; the `.out` variants are ATen's CompositeExplicitAutograd
// wrappers of the functional ops.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  FOO_IMPL(m, "_thnn_fused_lstm_cell", fused_lstm_cell);
  FOO_IMPL(m, "_thnn_fused_lstm_cell_backward_impl", fused_lstm_cell_backward_impl);
  FOO_IMPL(m, "_thnn_fused_gru_cell", fused_gru_cell);
  FOO_IMPL(m, "_thnn_fused_gru_cell_backward", fused_gru_cell_backward);
}

}  // namespace foo::ops::rnn
