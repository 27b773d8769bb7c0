// Fused optimizer steps (torch.optim.Adam/AdamW/SGD/Adagrad(..., fused=True) on foo): argument
// checks as ATen's CPU kernels make them (Fused{Adam,SGD,Adagrad}.cpp), the arithmetic in Rust
// (kernels/optim.rs), and the registrations.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "common.h"
#include "foo_ffi.h"

namespace foo::ops::optim {
namespace {

using at::Tensor;
using at::TensorList;
using OptT = std::optional<Tensor>;

// The kernels take dense tensors; a strided one is computed in a contiguous copy written back
// afterwards (`back`), as a user would see from the per-tensor ops.
struct Lists {
  std::vector<std::pair<Tensor, Tensor>> back;
  std::vector<Tensor> keep;

  std::vector<FooTensor> describe_list(TensorList l, const Tensor& like0, const char* what, bool same_as_param,
                                       TensorList params) {
    std::vector<FooTensor> out;
    out.reserve(l.size());
    for (size_t i = 0; i < l.size(); ++i) {
      const Tensor& t = l[i];
      TORCH_CHECK(t.defined() && t.device().is_privateuseone(), "fused optimizer: ", what, "[", i,
                  "] must be a foo tensor, got ", t.defined() ? t.device().str() : std::string("None"));
      if (same_as_param) {
        const Tensor& p = params[i];
        TORCH_CHECK(t.device() == like0.device(), "fused optimizer: ", what, "[", i, "] is on ", t.device(),
                    ", params[0] on ", like0.device());
        TORCH_CHECK(t.scalar_type() == p.scalar_type() && t.sizes().equals(p.sizes()), "fused optimizer: ", what,
                    "[", i, "] must have its parameter's dtype and shape (", p.scalar_type(), " ", p.sizes(),
                    "), got ", t.scalar_type(), " ", t.sizes());
      }
      if (t.is_contiguous()) {
        out.push_back(describe(t));
      } else {
        Tensor c = t.contiguous();
        back.emplace_back(t, c);
        keep.push_back(c);
        out.push_back(describe(c));
      }
    }
    return out;
  }

  void write_back() {
    for (auto& [orig, copy] : back) orig.copy_(copy);
  }
};

void check_count(size_t n, TensorList l, const char* what) {
  TORCH_CHECK(l.size() == n, "fused optimizer: expected ", n, " tensors in ", what, ", got ", l.size());
}

// grad_scale / found_inf: 1-element float32 foo tensors, or absent.
const FooTensor* amp_tensor(const OptT& t, FooTensor& slot, const char* what) {
  if (!t.has_value() || !t->defined()) return nullptr;
  TORCH_CHECK(t->device().is_privateuseone(), "fused optimizer: ", what, " must be a foo tensor, got ", t->device());
  slot = describe(*t);
  return &slot;
}

void adam_common(TensorList params, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
                 TensorList max_exp_avg_sqs, TensorList state_steps, double lr, double beta1, double beta2,
                 double weight_decay, double eps, bool amsgrad, bool maximize, const OptT& grad_scale,
                 const OptT& found_inf, bool decoupled) {
  const size_t n = params.size();
  check_count(n, grads, "grads");
  check_count(n, exp_avgs, "exp_avgs");
  check_count(n, exp_avg_sqs, "exp_avg_sqs");
  check_count(amsgrad ? n : 0, max_exp_avg_sqs, "max_exp_avg_sqs");
  check_count(n, state_steps, "state_steps");
  if (n == 0) return;
  Lists l;
  const Tensor& p0 = params[0];
  auto ps = l.describe_list(params, p0, "params", true, params);
  auto gs = l.describe_list(grads, p0, "grads", true, params);
  auto ms = l.describe_list(exp_avgs, p0, "exp_avgs", true, params);
  auto vs = l.describe_list(exp_avg_sqs, p0, "exp_avg_sqs", true, params);
  auto vmax = l.describe_list(max_exp_avg_sqs, p0, "max_exp_avg_sqs", true, params);
  auto steps = l.describe_list(state_steps, p0, "state_steps", false, params);
  FooTensor gs_slot{}, fi_slot{};
  const FooAdamArgs args{lr, beta1, beta2, weight_decay, eps, amsgrad, maximize, decoupled};
  check(foo_fused_adam(ps.data(), gs.data(), ms.data(), vs.data(), amsgrad ? vmax.data() : nullptr, steps.data(),
                       static_cast<int64_t>(n), &args, amp_tensor(grad_scale, gs_slot, "grad_scale"),
                       amp_tensor(found_inf, fi_slot, "found_inf")),
        decoupled ? "_fused_adamw_" : "_fused_adam_");
  l.write_back();
}

// _fused_adam_ (Decoupled = false) and _fused_adamw_ (true), with a float or a tensor lr.
template <bool Decoupled>
void fused_adam(TensorList params, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
                TensorList max_exp_avg_sqs, TensorList state_steps, double lr, double beta1, double beta2,
                double weight_decay, double eps, bool amsgrad, bool maximize, const OptT& grad_scale,
                const OptT& found_inf) {
  adam_common(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1, beta2, weight_decay,
              eps, amsgrad, maximize, grad_scale, found_inf, Decoupled);
}

template <bool Decoupled>
void fused_adam_tensor_lr(TensorList params, TensorList grads, TensorList exp_avgs, TensorList exp_avg_sqs,
                          TensorList max_exp_avg_sqs, TensorList state_steps, const Tensor& lr, double beta1,
                          double beta2, double weight_decay, double eps, bool amsgrad, bool maximize,
                          const OptT& grad_scale, const OptT& found_inf) {
  adam_common(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr.item<double>(), beta1, beta2,
              weight_decay, eps, amsgrad, maximize, grad_scale, found_inf, Decoupled);
}

void fused_sgd(TensorList params, TensorList grads, TensorList momentum_buffer_list, double weight_decay,
               double momentum, double lr, double dampening, bool nesterov, bool maximize, bool is_first_step,
               const OptT& grad_scale, const OptT& found_inf) {
  const size_t n = params.size();
  check_count(n, grads, "grads");
  const bool has_buf = momentum != 0.0;
  if (has_buf) check_count(n, momentum_buffer_list, "momentum_buffer_list");
  if (n == 0) return;
  Lists l;
  const Tensor& p0 = params[0];
  auto ps = l.describe_list(params, p0, "params", true, params);
  auto gs = l.describe_list(grads, p0, "grads", true, params);
  auto bs = has_buf ? l.describe_list(momentum_buffer_list, p0, "momentum_buffer_list", true, params)
                    : std::vector<FooTensor>{};
  FooTensor gs_slot{}, fi_slot{};
  const FooSgdArgs args{lr, weight_decay, momentum, dampening, nesterov, maximize, is_first_step};
  check(foo_fused_sgd(ps.data(), gs.data(), has_buf ? bs.data() : nullptr, static_cast<int64_t>(n), &args,
                      amp_tensor(grad_scale, gs_slot, "grad_scale"), amp_tensor(found_inf, fi_slot, "found_inf")),
        "_fused_sgd_");
  l.write_back();
}

void fused_sgd_tensor_lr(TensorList params, TensorList grads, TensorList momentum_buffer_list, double weight_decay,
                         double momentum, const Tensor& lr, double dampening, bool nesterov, bool maximize,
                         bool is_first_step, const OptT& grad_scale, const OptT& found_inf) {
  fused_sgd(params, grads, momentum_buffer_list, weight_decay, momentum, lr.item<double>(), dampening, nesterov,
            maximize, is_first_step, grad_scale, found_inf);
}

void fused_adagrad(TensorList params, TensorList grads, TensorList state_sums, TensorList state_steps, double lr,
                   double lr_decay, double weight_decay, double eps, bool maximize, const OptT& grad_scale,
                   const OptT& found_inf) {
  const size_t n = params.size();
  check_count(n, grads, "grads");
  check_count(n, state_sums, "state_sums");
  check_count(n, state_steps, "state_steps");
  if (n == 0) return;
  Lists l;
  const Tensor& p0 = params[0];
  auto ps = l.describe_list(params, p0, "params", true, params);
  auto gs = l.describe_list(grads, p0, "grads", true, params);
  auto ss = l.describe_list(state_sums, p0, "state_sums", true, params);
  auto steps = l.describe_list(state_steps, p0, "state_steps", false, params);
  FooTensor gs_slot{}, fi_slot{};
  const FooAdagradArgs args{lr, lr_decay, weight_decay, eps, maximize};
  check(foo_fused_adagrad(ps.data(), gs.data(), ss.data(), steps.data(), static_cast<int64_t>(n), &args,
                          amp_tensor(grad_scale, gs_slot, "grad_scale"), amp_tensor(found_inf, fi_slot, "found_inf")),
        "_fused_adagrad_");
  l.write_back();
}

void fused_adagrad_tensor_lr(TensorList params, TensorList grads, TensorList state_sums, TensorList state_steps,
                             const Tensor& lr, double lr_decay, double weight_decay, double eps, bool maximize,
                             const OptT& grad_scale, const OptT& found_inf) {
  fused_adagrad(params, grads, state_sums, state_steps, lr.item<double>(), lr_decay, weight_decay, eps, maximize,
                grad_scale, found_inf);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  FOO_IMPL(m, "_fused_adam_", fused_adam<false>);
  FOO_IMPL(m, "_fused_adam_.tensor_lr", fused_adam_tensor_lr<false>);
  FOO_IMPL(m, "_fused_adamw_", fused_adam<true>);
  FOO_IMPL(m, "_fused_adamw_.tensor_lr", fused_adam_tensor_lr<true>);
  FOO_IMPL(m, "_fused_sgd_", fused_sgd);
  FOO_IMPL(m, "_fused_sgd_.tensor_lr", fused_sgd_tensor_lr);
  FOO_IMPL(m, "_fused_adagrad_", fused_adagrad);
  FOO_IMPL(m, "_fused_adagrad_.tensor_lr", fused_adagrad_tensor_lr);
}

}  // namespace foo::ops::optim
