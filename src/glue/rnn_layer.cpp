// Whole LSTM and GRU layers for nn.LSTM and nn.GRU (aten::lstm.input, aten::gru.input). ATen's
// composite loop, which every device but CPU runs, takes two matrix products and a fused cell
// per time step, each product reading its weight in the transposed layout, and autograd then adds
// up the weight gradients one step at a time. Here each layer and direction is one autograd node:
// - forward: the input projections of all time steps are one GEMM; the recurrent weight is
//   transposed once, so each step's product is a row-major one; the cell kernel (rnn.cpp)
//   writes each step's states and workspace into per-sequence buffers;
// - backward: the steps run backwards for the gate gradients only; the input gradient and the
//   weight and bias gradients are then one GEMM or one sum each over all steps.
// With create_graph (double backward) a node differentiates ATen's composite loop for its one
// layer instead (recomputed from the saved inputs), so second-order gradients stay available.
// ATen's composite (at::native::lstm/gru) still runs what the layers do not cover: projections
// (proj_size), empty sequences or batches, dtypes the cells lack, shapes, dtypes or devices that
// ATen's checks reject (with its messages), and tensors without foo memory (fake, functional).
// Under autocast the layer's inputs are cast to the autocast dtype first, as CUDA casts those of
// its fused RNN (_cudnn_rnn, lower_precision_fp), and the layer runs in that dtype.
#include <ATen/autocast_mode.h>
#include <ATen/ops/gru_native.h>
#include <ATen/ops/lstm_native.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <optional>
#include <utility>
#include <vector>

#include "common.h"
#include "foo_ffi.h"
#include "profiler.h"
#include "rnn.h"

namespace foo::ops::rnn {
namespace {

using OptT = std::optional<at::Tensor>;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kLstmGates = 4;
constexpr int64_t kGruGates = 3;
constexpr int64_t kGruWorkspaceGates = 5;  // rnn.cpp's GRU workspace: r, z, n, hx, hidden n

// The forward's tensor arguments, in order (the indices of needs_input_grad and of backward's
// results), then its three flags.
enum Arg : size_t { kX, kH0, kC0, kWih, kWhh, kBih, kBhh, kTensorArgs };
constexpr size_t kArgs = kTensorArgs + 3;

// Whether an LSTM layer runs its steps in one kernel (kernels/rnn/layer.rs), not one cell call each.
bool whole_lstm(bool gru, const Tensor& x) {
  return !gru && (x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble);
}

// One layer in one direction. x [T, B, I]; h0, c0 [B, H] (c0 undefined for a GRU); w_ih
// [G*H, I], w_hh [G*H, H], biases [G*H] or undefined. Returns the outputs [T, B, H] in time
// order and the last states (LSTM: h, c; GRU: h).
class Layer : public torch::autograd::Function<Layer> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& x, const Tensor& h0, const OptT& c0_opt,
                               const Tensor& w_ih, const Tensor& w_hh, const OptT& b_ih_opt, const OptT& b_hh_opt,
                               bool gru, bool reverse, bool keep) {
    const Tensor c0 = c0_opt.value_or(Tensor()), b_ih = b_ih_opt.value_or(Tensor()),
                 b_hh = b_hh_opt.value_or(Tensor());
    // The cell kernels read biases as dense vectors (the saved ones stay the inputs themselves).
    const Tensor bias_ih = b_ih.defined() ? b_ih.contiguous() : b_ih;
    const Tensor bias_hh = b_hh.defined() ? b_hh.contiguous() : b_hh;
    const int64_t steps = x.size(0), batch = x.size(1), hidden = w_hh.size(1), gates = w_hh.size(0);
    const auto opts = x.options();
    // The whole-layer kernel leaves out the states and workspaces only a backward reads.
    const bool whole = whole_lstm(gru, x), saved = keep || !whole;
    // Where it can, it projects x onto the input gates itself, each thread for its own units.
    const bool projects = whole && lstm_layer_projects(x, hidden);
    const Tensor xg =
        projects ? Tensor()
                 : at::mm(x.reshape({steps * batch, x.size(2)}), w_ih.t()).view({steps, batch, gates});
    Tensor out = at::empty({steps, batch, hidden}, opts);
    Tensor cs = gru || !saved ? Tensor() : at::empty({steps, batch, hidden}, opts);
    Tensor ws = saved ? at::empty({steps, batch, gru ? hidden * kGruWorkspaceGates : gates}, opts) : Tensor();
    Tensor h = h0, c = c0, c_last;
    if (whole) {
      // The whole recurrence in one kernel: see kernels/rnn/layer.rs.
      const prof::KernelScope kernel("lstm_layer");
      c_last = at::empty({batch, hidden}, opts);
      lstm_layer_into(out, c_last, cs, ws, projects ? x.contiguous() : xg, projects ? w_ih.contiguous() : Tensor(),
                      w_hh.contiguous(), h0.contiguous(), c0.contiguous(), bias_ih, bias_hh, reverse);
      h = out.select(0, reverse ? 0 : steps - 1);
    } else {
      const Tensor w_hh_t = w_hh.t().contiguous();
      Tensor hg = at::empty({batch, gates}, opts);
      for (int64_t s = 0; s < steps; ++s) {
        const int64_t t = reverse ? steps - 1 - s : s;
        at::mm_out(hg, h, w_hh_t);
        Tensor h_next = out.select(0, t);
        const prof::KernelScope kernel(gru ? "_thnn_fused_gru_cell" : "_thnn_fused_lstm_cell");
        if (gru) {
          gru_cell_into(h_next, ws.select(0, t), xg.select(0, t), hg, h, bias_ih, bias_hh);
        } else {
          Tensor c_next = cs.select(0, t);
          lstm_cell_into(h_next, c_next, ws.select(0, t), xg.select(0, t), hg, c, bias_ih, bias_hh);
          c = c_next;
        }
        h = h_next;
      }
    }
    ctx->save_for_backward({x, h0, c0, w_ih, w_hh, b_ih, b_hh, out, cs, ws});
    ctx->saved_data["gru"] = gru;
    ctx->saved_data["reverse"] = reverse;
    if (gru) return {out, h.clone()};
    return {out, h.clone(), c_last.defined() ? c_last : c.clone()};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const bool gru = ctx->saved_data["gru"].toBool(), reverse = ctx->saved_data["reverse"].toBool();
    if (at::GradMode::is_enabled()) return differentiable_backward(saved, grads, gru, reverse);
    const Tensor &x = saved[kX], &h0 = saved[kH0], &c0 = saved[kC0], &w_ih = saved[kWih], &w_hh = saved[kWhh],
                 &out = saved[kTensorArgs], &cs = saved[kTensorArgs + 1], &ws = saved[kTensorArgs + 2];
    const int64_t steps = x.size(0), batch = x.size(1), hidden = w_hh.size(1), gates = w_hh.size(0);
    const auto opts = x.options();
    // Gradients of the input-side gates, and (GRU) of the hidden-side ones; an LSTM's are equal.
    Tensor d_in = at::empty({steps, batch, gates}, opts);
    Tensor d_hid = gru ? at::empty({steps, batch, gates}, opts) : d_in;
    // Materialized gradients (AutogradContext's default): all defined.
    const Tensor& grad_out = grads[0];
    Tensor dh, dc;
    if (whole_lstm(gru, x)) {
      // The whole recurrence in one kernel: see kernels/rnn/layer.rs.
      const prof::KernelScope kernel("lstm_layer_backward");
      dh = at::empty({batch, hidden}, opts);
      dc = at::empty({batch, hidden}, opts);
      lstm_layer_backward_into(d_in, dh, dc, grad_out.contiguous(), grads[1].contiguous(), grads[2].contiguous(), cs,
                               ws, c0.contiguous(), w_hh.contiguous(), reverse);
    } else {
      dh = grads[1].clone(at::MemoryFormat::Contiguous);
      Tensor dh_step = at::empty({batch, hidden}, opts);
      dc = gru ? Tensor() : grads[2].clone(at::MemoryFormat::Contiguous);
      Tensor dc_prev = gru ? Tensor() : at::empty({batch, hidden}, opts);
      Tensor dhx = gru ? at::empty({batch, hidden}, opts) : Tensor();
      for (int64_t s = 0; s < steps; ++s) {
        const int64_t t = reverse ? s : steps - 1 - s;
        at::add_out(dh_step, dh, grad_out.select(0, t));
        if (gru) {
          {
            const prof::KernelScope kernel("_thnn_fused_gru_cell_backward");
            gru_cell_backward_into(d_in.select(0, t), d_hid.select(0, t), dhx, Tensor(), Tensor(), dh_step,
                                   ws.select(0, t));
          }
          at::addmm_out(dh, dhx, d_hid.select(0, t), w_hh);
        } else {
          const int64_t prev = reverse ? t + 1 : t - 1;
          const Tensor cx = prev < 0 || prev >= steps ? c0 : cs.select(0, prev);
          {
            const prof::KernelScope kernel("_thnn_fused_lstm_cell_backward_impl");
            lstm_cell_backward_into(d_in.select(0, t), dc_prev, Tensor(), dh_step, dc, cx, cs.select(0, t),
                                    ws.select(0, t));
          }
          at::mm_out(dh, d_in.select(0, t), w_hh);
          std::swap(dc, dc_prev);
        }
      }
    }
    const int64_t rows = steps * batch;
    const Tensor d_in_rows = d_in.view({rows, gates}), d_hid_rows = d_hid.view({rows, gates});
    // needs_input_grad counts the tensor arguments that were given (edges); undefined optional
    // ones have none.
    const auto needs = [&](size_t arg) {
      if (!saved[arg].defined()) return false;
      size_t edge = 0;
      for (size_t j = 0; j < arg; ++j) edge += saved[j].defined() ? 1 : 0;
      return ctx->needs_input_grad(edge);
    };
    variable_list result(kArgs);
    if (needs(kX)) result[kX] = at::mm(d_in_rows, w_ih).view({steps, batch, x.size(2)});
    if (needs(kH0)) result[kH0] = dh;
    if (needs(kC0)) result[kC0] = dc;
    if (needs(kWih)) result[kWih] = at::mm(d_in_rows.t(), x.reshape({rows, x.size(2)}));
    if (needs(kWhh)) result[kWhh] = hidden_weight_grad(d_hid, out, h0, reverse);
    if (needs(kBih)) result[kBih] = d_in_rows.sum(0);
    if (needs(kBhh)) {
      result[kBhh] = gru ? d_hid_rows.sum(0) : result[kBih].defined() ? result[kBih].clone() : d_in_rows.sum(0);
    }
    return result;
  }

 private:
  // dW_hh = sum over steps of d_hid[t]^T @ (the state step t started from): the outputs shifted
  // by one step as one GEMM, plus the first step's h0.
  static Tensor hidden_weight_grad(const Tensor& d_hid, const Tensor& out, const Tensor& h0, bool reverse) {
    const int64_t steps = d_hid.size(0), gates = d_hid.size(2), hidden = out.size(2);
    const int64_t first = reverse ? steps - 1 : 0;
    Tensor grad = at::mm(d_hid.select(0, first).t(), h0);
    if (steps > 1) {
      const int64_t rows = (steps - 1) * d_hid.size(1);
      const Tensor d = d_hid.narrow(0, reverse ? 0 : 1, steps - 1).reshape({rows, gates});
      const Tensor h = out.narrow(0, reverse ? 1 : 0, steps - 1).reshape({rows, hidden});
      grad.addmm_(d.t(), h);
    }
    return grad;
  }

  // Double backward: ATen's composite loop for this layer on the saved inputs (which carry their
  // history), differentiated with a graph.
  static variable_list differentiable_backward(const variable_list& saved, const variable_list& grads, bool gru,
                                               bool reverse) {
    const Tensor &x = saved[kX], &h0 = saved[kH0], &c0 = saved[kC0];
    const bool has_biases = saved[kBih].defined();
    std::vector<Tensor> params{saved[kWih], saved[kWhh]};
    if (has_biases) params.insert(params.end(), {saved[kBih], saved[kBhh]});
    const Tensor input = reverse ? x.flip(0) : x;
    variable_list outs;
    if (gru) {
      auto [o, h] = at::native::gru(input, h0.unsqueeze(0), params, has_biases, 1, 0.0, false, false, false);
      outs = {reverse ? o.flip(0) : o, h.squeeze(0)};
    } else {
      auto [o, h, c] = at::native::lstm(input, {h0.unsqueeze(0), c0.unsqueeze(0)}, params, has_biases, 1, 0.0,
                                        false, false, false);
      outs = {reverse ? o.flip(0) : o, h.squeeze(0), c.squeeze(0)};
    }
    variable_list inputs;
    std::vector<size_t> where;
    for (size_t i = 0; i < kTensorArgs; ++i) {
      if (saved[i].defined() && saved[i].requires_grad()) {
        inputs.push_back(saved[i]);
        where.push_back(i);
      }
    }
    variable_list result(kArgs);
    if (inputs.empty()) return result;
    const variable_list got = torch::autograd::grad(outs, inputs, grads, /*retain_graph=*/true,
                                                    /*create_graph=*/true, /*allow_unused=*/true);
    for (size_t k = 0; k < where.size(); ++k) result[where[k]] = got[k];
    return result;
  }
};

// A stack's tensors, cast for autocast when it is on: x (sequence first), the initial states
// ([L*D, B, H] each) and the weights.
struct Stack {
  Tensor x;
  std::vector<Tensor> states;
  std::vector<Tensor> params;
  bool cast = false;
};

Stack autocast_stack(const Tensor& x, at::TensorList states, at::TensorList params) {
  Stack s{x, states.vec(), params.vec()};
  constexpr auto kFoo = c10::DeviceType::PrivateUse1;
  if (!at::autocast::is_autocast_enabled(kFoo)) return s;
  const at::ScalarType to = at::autocast::get_autocast_dtype(kFoo);
  s.x = at::autocast::cached_cast(to, x, kFoo);
  for (auto& t : s.states) t = at::autocast::cached_cast(to, t, kFoo);
  for (auto& t : s.params) t = at::autocast::cached_cast(to, t, kFoo);
  s.cast = true;
  return s;
}

// A tensor the cell kernels can read with x: x's device and dtype, and foo memory of its own (no
// fake, functional or functorch wrapper).
bool plain_like(const Tensor& t, const Tensor& x) {
  static const c10::DispatchKeySet wrappers({c10::DispatchKey::Python, c10::DispatchKey::Functionalize,
                                             c10::DispatchKey::FuncTorchGradWrapper,
                                             c10::DispatchKey::FuncTorchBatched});
  return t.defined() && t.device() == x.device() && t.scalar_type() == x.scalar_type() && t.has_storage() &&
         (t.key_set() & wrappers).empty();
}

bool shaped(const Tensor& t, at::IntArrayRef sizes) { return t.sizes() == sizes; }

// Whether the layers run `s` (else ATen's composite does, with its checks and messages): a
// non-empty [T, B, I] float sequence on foo, states [L*D, B, H], and per layer and direction
// w_ih [G*H, in], w_hh [G*H, H] and two [G*H] biases when has_biases, all plain tensors alike.
bool layers_apply(const Stack& s, bool has_biases, int64_t num_layers, bool bidirectional, int64_t gate_count) {
  const Tensor& x = s.x;
  const auto dt = x.scalar_type();
  if (x.dim() != 3 || !x.device().is_privateuseone() || x.size(0) == 0 || x.size(1) == 0 ||
      !(dt == at::kFloat || dt == at::kDouble || dt == at::kHalf || dt == at::kBFloat16) || !plain_like(x, x) ||
      num_layers < 1) {
    return false;
  }
  const int64_t dirs = bidirectional ? 2 : 1, per = has_biases ? 4 : 2;
  if (s.states.empty() || s.states[0].dim() != 3) return false;
  const int64_t batch = x.size(1), hidden = s.states[0].size(2), gates = gate_count * hidden;
  for (const auto& h : s.states) {
    if (!plain_like(h, x) || !shaped(h, {num_layers * dirs, batch, hidden})) return false;
  }
  if (hidden == 0 || static_cast<int64_t>(s.params.size()) != num_layers * dirs * per) return false;
  for (int64_t l = 0; l < num_layers; ++l) {
    const int64_t in = l == 0 ? x.size(2) : dirs * hidden;
    for (int64_t d = 0; d < dirs; ++d) {
      const Tensor* p = &s.params[(l * dirs + d) * per];
      for (int64_t i = 0; i < per; ++i) {
        if (!plain_like(p[i], x)) return false;
      }
      if (!shaped(p[0], {gates, in}) || !shaped(p[1], {gates, hidden})) return false;
      if (has_biases && (!shaped(p[2], {gates}) || !shaped(p[3], {gates}))) return false;
    }
  }
  return true;
}

// Runs the stack as ATen's _rnn_impl does: layer by layer, both directions of a layer on its
// input, their outputs joined along features, dropout between layers in training. Returns the
// output [T, B, D*H] and the final states of every layer and direction in ATen's order, per state.
std::pair<Tensor, std::vector<std::vector<Tensor>>> run_layers(const Stack& s, bool has_biases, int64_t num_layers,
                                                               double dropout, bool train, bool bidirectional,
                                                               bool gru) {
  const int64_t dirs = bidirectional ? 2 : 1, per = has_biases ? 4 : 2;
  std::vector<std::vector<Tensor>> finals(s.states.size());
  Tensor input = s.x;
  for (int64_t l = 0; l < num_layers; ++l) {
    std::vector<Tensor> outs;
    for (int64_t d = 0; d < dirs; ++d) {
      const int64_t idx = l * dirs + d;
      const Tensor* p = &s.params[idx * per];
      const OptT b_ih = has_biases ? OptT(p[2]) : std::nullopt, b_hh = has_biases ? OptT(p[3]) : std::nullopt;
      const OptT c0 = gru ? std::nullopt : OptT(s.states[1][idx]);
      const Tensor h0 = s.states[0][idx];
      // Whether autograd will record the node (Function::apply's test), so that its forward
      // keeps what the backward reads.
      // (Parameters that require grad under no_grad must not make it keep them: inference would
      // write every step's cell state and gates, a third of the cell's memory traffic.)
      bool wants_grad = input.requires_grad() || h0.requires_grad() || (c0.has_value() && c0->requires_grad());
      for (int64_t i = 0; i < per; ++i) wants_grad = wants_grad || p[i].requires_grad();
      const bool keep = at::GradMode::is_enabled() && wants_grad;
      variable_list r = Layer::apply(input, h0, c0, p[0], p[1], b_ih, b_hh, gru, d == 1, keep);
      outs.push_back(r[0]);
      for (size_t k = 0; k < finals.size(); ++k) finals[k].push_back(r[k + 1]);
    }
    input = dirs == 2 ? at::cat(outs, -1) : outs[0];
    if (dropout != 0 && train && l < num_layers - 1) input = at::dropout(input, dropout, /*train=*/true);
  }
  return {input, finals};
}

// The stack's output (batch first if asked) and its stacked final states (LSTM: h, c; GRU: h),
// or nothing when ATen's composite must run instead. Counted under `op` when the layers ran.
std::optional<std::vector<Tensor>> run_stack(const char* op, const Tensor& input, at::TensorList states,
                                             at::TensorList params, bool has_biases, int64_t num_layers,
                                             double dropout, bool train, bool bidirectional, bool batch_first,
                                             bool gru) {
  const Stack s = autocast_stack(batch_first && input.dim() == 3 ? input.transpose(0, 1) : input, states, params);
  if (!layers_apply(s, has_biases, num_layers, bidirectional, gru ? kGruGates : kLstmGates)) return std::nullopt;
  const c10::DeviceGuard guard(input.device());
  std::optional<c10::impl::ExcludeDispatchKeyGuard> no_autocast;
  if (s.cast) no_autocast.emplace(c10::DispatchKey::AutocastPrivateUse1);
  auto [out, finals] = run_layers(s, has_biases, num_layers, dropout, train, bidirectional, gru);
  foo_native_hit(foo_native_slot(op));
  std::vector<Tensor> result{batch_first ? out.transpose(0, 1) : out};
  for (const auto& f : finals) result.push_back(at::stack(f));
  return result;
}

std::tuple<Tensor, Tensor, Tensor> lstm(const Tensor& input, at::TensorList hx, at::TensorList params,
                                        bool has_biases, int64_t num_layers, double dropout, bool train,
                                        bool bidirectional, bool batch_first) {
  if (hx.size() == 2) {
    if (auto r = run_stack("aten::lstm.input", input, hx, params, has_biases, num_layers, dropout, train,
                           bidirectional, batch_first, /*gru=*/false)) {
      return {(*r)[0], (*r)[1], (*r)[2]};
    }
  }
  return at::native::lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first);
}

std::tuple<Tensor, Tensor> gru(const Tensor& input, const Tensor& hx, at::TensorList params, bool has_biases,
                               int64_t num_layers, double dropout, bool train, bool bidirectional, bool batch_first) {
  if (auto r = run_stack("aten::gru.input", input, {hx}, params, has_biases, num_layers, dropout, train,
                         bidirectional, batch_first, /*gru=*/true)) {
    return {(*r)[0], (*r)[1]};
  }
  return at::native::gru(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first);
}

}  // namespace

// The whole layers replace ATen's CompositeImplicitAutograd loop. Registered for the autograd key,
// where autograd would otherwise run the composite, and for the backend key, reached below
// autograd (inference mode). Not FOO_IMPL: they orchestrate kernels and count themselves
// (aten::lstm.input, aten::gru.input) only when they ran the layers, not the composite.
TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("lstm.input", TORCH_FN(lstm));
  m.impl("gru.input", TORCH_FN(gru));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("lstm.input", TORCH_FN(lstm));
  m.impl("gru.input", TORCH_FN(gru));
}

}  // namespace foo::ops::rnn
