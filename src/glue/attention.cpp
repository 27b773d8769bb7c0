// Fused scaled-dot-product attention on foo: the _fused_sdp_choice stub and op (which backend
// F.scaled_dot_product_attention takes for foo tensors) and the "overrideable" fused op with its
// backward, computed by Rust (foo_ffi.h; kernels/attention). The glue checks
// arguments, views operands as 4-D [batch, heads, seq, dim], broadcasts the mask with zero
// strides, allocates outputs and takes the dropout seed/offset from foo's generator; inputs the
// kernel does not take (nested tensors, broadcast batch dims, ...) get the math path from the
// choice, never the CPU.
#include <ATen/Context.h>
#include <ATen/ExpandUtils.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ScalarOps.h>
#include <ATen/ops/_native_multi_head_attention_native.h>
#include <ATen/ops/_transformer_encoder_layer_fwd_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>

#include "common.h"
#include "foo_ffi.h"
#include "generator.h"

namespace foo::ops::attention {
namespace {
using at::Tensor;

bool attention_dtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16;
}

bool on_foo(const Tensor& t) { return t.device().type() == kFoo; }

bool has_fw_grad(const Tensor& t) { return t._fw_grad(/*level=*/0).defined(); }

bool functorch_wrapped(const Tensor& t) {
  const auto keys = t.key_set();
  return keys.has(c10::DispatchKey::FuncTorchBatched) || keys.has(c10::DispatchKey::FuncTorchGradWrapper) ||
         keys.has(c10::DispatchKey::BatchedNestedTensor);
}

// Why the fused kernel cannot take these inputs; empty when it can. Whatever it refuses goes to
// the math path, which then raises the CPU's errors for invalid inputs.
std::string unsupported(const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& mask_,
                        double dropout_p, bool is_causal, bool enable_gqa) {
  const Tensor mask = mask_.has_value() ? *mask_ : Tensor();
  if (q.is_nested() || k.is_nested() || v.is_nested()) return "nested tensors";
  if (q.layout() != at::kStrided || k.layout() != at::kStrided || v.layout() != at::kStrided) return "non-strided inputs";
  if (!on_foo(q) || !on_foo(k) || !on_foo(v)) return "inputs not all on foo";
  // Fake and functional tensors (torch.compile's tracing) take the fused kernel as real ones do:
  // the compiled graph then calls it. Under vmap and functorch's grad transforms the fused op
  // has no batching rule: the math path, which has them.
  if (functorch_wrapped(q) || functorch_wrapped(k) || functorch_wrapped(v) || (mask.defined() && functorch_wrapped(mask)))
    return "functorch transforms";
  if (has_fw_grad(q) || has_fw_grad(k) || has_fw_grad(v) || (mask.defined() && has_fw_grad(mask)))
    return "forward-mode AD";
  if (!attention_dtype(q.scalar_type()) || k.scalar_type() != q.scalar_type() || v.scalar_type() != q.scalar_type())
    return "dtypes";
  const int64_t d = q.dim();
  if (d < 2 || k.dim() != d || v.dim() != d) return "ranks";
  // Batch dims (all but heads, seq, dim) equal: the math path broadcasts them.
  for (int64_t i = 0; i + 3 < d; ++i) {
    if (k.size(i) != q.size(i) || v.size(i) != q.size(i)) return "broadcast batch dims";
  }
  if (k.size(-1) != q.size(-1) || k.size(-2) != v.size(-2)) return "mismatched sizes";
  if (d >= 3) {
    const int64_t hq = q.size(-3), hk = k.size(-3), hv = v.size(-3);
    if (hk != hv) return "different key and value head counts";
    if (hq != hk && !(enable_gqa && hk > 0 && hq % hk == 0)) return "head counts";
  }
  if (q.numel() == 0 || k.numel() == 0 || v.numel() == 0) return "empty inputs";
  if (!(dropout_p >= 0.0 && dropout_p < 1.0)) return "dropout_p outside [0, 1)";
  if (mask.defined()) {
    if (is_causal) return "attn_mask with is_causal";
    if (!on_foo(mask)) return "attn_mask not on foo";
    if (mask.layout() != at::kStrided) return "non-strided attn_mask";
    if (mask.scalar_type() != at::kBool && !attention_dtype(mask.scalar_type())) return "attn_mask dtype";
    std::vector<int64_t> shape = q.sizes().vec();
    shape.back() = k.size(-2);
    if (mask.dim() > d || !at::is_expandable_to(mask.sizes(), shape)) return "attn_mask shape";
  }
  return "";
}

int64_t fused_sdp_choice(const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& mask,
                         double dropout_p, bool is_causal, std::optional<double> /*scale*/, bool enable_gqa) {
  // As the CPU (whose kernels refuse it): a dropout probability outside [0, 1] is an error.
  TORCH_CHECK(dropout_p >= 0.0 && dropout_p <= 1.0, "dropout probability has to be between 0 and 1, but got ",
              dropout_p);
  auto& ctx = at::globalContext();
  const std::string why = unsupported(q, k, v, mask, dropout_p, is_causal, enable_gqa);
  if (ctx.userEnabledOverrideableSDP() && why.empty()) return static_cast<int64_t>(at::SDPBackend::overrideable);
  if (ctx.userEnabledMathSDP()) return static_cast<int64_t>(at::SDPBackend::math);
  TORCH_CHECK(false, "No viable backend for scaled_dot_product_attention was found: ",
              ctx.userEnabledOverrideableSDP() ? "foo's fused kernel does not take these inputs (" + why + ")"
                                               : std::string("the fused (OVERRIDEABLE) backend is disabled"),
              " and the math backend is disabled.");
  return static_cast<int64_t>(at::SDPBackend::error);
}

// [..., H, seq, dim] as [B, H, seq, dim] (leading dims flattened; a 2-D input is one head).
// A view for ranks up to 4 (and for contiguous tensors of higher rank).
Tensor as4d(const Tensor& t) {
  switch (t.dim()) {
    case 2:
      return t.unsqueeze(0).unsqueeze(0);
    case 3:
      return t.unsqueeze(0);
    case 4:
      return t;
    default:
      return t.flatten(0, t.dim() - 4);
  }
}

// An operand for Rust: 4-D with a unit last stride.
Tensor operand(const Tensor& t) {
  Tensor x = as4d(t);
  return x.size(-1) > 1 && x.stride(-1) != 1 ? x.contiguous() : x;
}

// A new output shaped like `like` with last dim `last`: the layout of `like` where the sizes
// agree (as the CPU's flash kernel, which writes into empty_like(query)), else row-major, and
// always row-major above 4-D so that the 4-D view aliases it.
Tensor new_output(const Tensor& like, int64_t last) {
  if (like.dim() <= 4 && like.size(-1) == last) return at::empty_like(like, at::MemoryFormat::Preserve);
  std::vector<int64_t> shape = like.sizes().vec();
  shape.back() = last;
  return at::empty(shape, like.options());
}

void check_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& bias,
                  double dropout_p, const char* op) {
  TORCH_CHECK(!q.is_nested() && !k.is_nested() && !v.is_nested(), op, ": nested tensors are not supported");
  TORCH_CHECK(q.dim() >= 2 && k.dim() == q.dim() && v.dim() == q.dim(), op,
              ": expected query, key and value of one rank >= 2, got ", q.dim(), ", ", k.dim(), " and ", v.dim());
  TORCH_CHECK(q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type(), op,
              ": expected query, key and value to have the same dtype, but got query.dtype: ", q.scalar_type(),
              " key.dtype: ", k.scalar_type(), " and value.dtype: ", v.scalar_type(), " instead.");
  TORCH_CHECK(attention_dtype(q.scalar_type()), op, ": expected float32, float64, float16 or bfloat16 inputs, got ",
              q.scalar_type());
  for (int64_t i = 0; i + 3 < q.dim(); ++i) {
    TORCH_CHECK(k.size(i) == q.size(i) && v.size(i) == q.size(i), op, ": batch sizes differ: query ", q.sizes(),
                ", key ", k.sizes(), ", value ", v.sizes());
  }
  TORCH_CHECK(k.size(-1) == q.size(-1), op, ": query and key head dims differ: ", q.size(-1), " and ", k.size(-1));
  TORCH_CHECK(k.size(-2) == v.size(-2), op, ": key sequence length (", k.size(-2),
              ") must match value sequence length (", v.size(-2), ")");
  if (q.dim() >= 3) {
    const int64_t hq = q.size(-3), hk = k.size(-3), hv = v.size(-3);
    TORCH_CHECK(hk == hv && hk > 0 && hq % hk == 0, op, ": the number of query heads (", hq,
                ") must be a multiple of the number of key/value heads (", hk, " and ", hv, ")");
  }
  TORCH_CHECK(dropout_p >= 0.0 && dropout_p < 1.0, op, ": dropout_p must be in [0, 1), got ", dropout_p);
  if (bias.has_value() && bias->defined()) {
    TORCH_CHECK(bias->scalar_type() == at::kBool || attention_dtype(bias->scalar_type()), op,
                ": attn_bias must be bool or floating point, got ", bias->scalar_type());
    std::vector<int64_t> shape = q.sizes().vec();
    shape.back() = k.size(-2);
    TORCH_CHECK(bias->dim() <= q.dim() && at::is_expandable_to(bias->sizes(), shape), op, ": attn_bias of shape ",
                bias->sizes(), " does not broadcast to ", c10::IntArrayRef(shape));
  }
}

double scale_of(const Tensor& q, std::optional<double> scale) {
  return scale.has_value() ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
}

// The mask broadcast to [..., L, S] and viewed 4-D (zero strides where it broadcasts).
Tensor mask_operand(const Tensor& bias, const Tensor& q, const Tensor& k) {
  std::vector<int64_t> shape = q.sizes().vec();
  shape.back() = k.size(-2);
  return as4d(bias.expand(shape));
}

at::ScalarType math_dtype(const Tensor& q) { return q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat; }

// Scratch for the packed keys and values, from foo's caching allocator (so the kernel does not
// fault in fresh pages on every call, and the bytes show in the memory statistics).
Tensor workspace(const FooTensor& q, const FooTensor& k, const FooTensor& v, bool backward, const Tensor& like,
                 const char* op) {
  size_t bytes = 0;
  check(foo_attention_workspace(&q, &k, &v, backward ? 1 : 0, &bytes), op);
  return at::empty({static_cast<int64_t>(bytes)}, like.options().dtype(at::kByte));
}

using FwdResult = std::tuple<Tensor, Tensor, Tensor, Tensor, c10::SymInt, c10::SymInt, Tensor, Tensor, Tensor>;

FwdResult fused_attention(const Tensor& query, const Tensor& key, const Tensor& value,
                          const std::optional<Tensor>& attn_bias, double dropout_p, bool is_causal,
                          bool return_debug_mask, std::optional<double> scale) {
  const char* op = "_scaled_dot_product_fused_attention_overrideable";
  check_inputs(query, key, value, attn_bias, dropout_p, op);
  TORCH_CHECK_NOT_IMPLEMENTED(!return_debug_mask, op, ": return_debug_mask=True is not supported on foo");
  const bool has_bias = attn_bias.has_value() && attn_bias->defined();
  TORCH_CHECK(!(has_bias && is_causal), op, ": an explicit attn_bias should not be set when is_causal=True");
  const c10::DeviceGuard guard(query.device());
  const Tensor q = operand(query), k = operand(key), v = operand(value);
  const int64_t B = q.size(0), H = q.size(1), L = q.size(2), S = k.size(2);
  Tensor out = new_output(query, value.size(-1));
  Tensor lse = at::empty({B, H, L}, query.options().dtype(math_dtype(query)));
  uint64_t seed = 0, offset = 0;
  if (dropout_p > 0.0 && out.numel() > 0) {
    auto* gen = at::get_generator_or_default<FooGeneratorImpl>(std::nullopt, default_generator(query.device().index()));
    check(foo_attention_rng(gen->rust_id(), static_cast<uint64_t>(B * H * L * S), &seed, &offset), op);
  }
  if (out.numel() > 0) {
    if (S == 0) {
      // Nothing to attend to: as the math path, zeros (and lse -inf).
      out.zero_();
      lse.fill_(-std::numeric_limits<double>::infinity());
    } else {
      const Tensor o4 = as4d(out);
      const Tensor mask = has_bias ? mask_operand(*attn_bias, query, key) : Tensor();
      const FooTensor d_o = describe(o4), d_l = describe(lse), d_q = describe(q), d_k = describe(k),
                      d_v = describe(v);
      const FooTensor d_m = mask.defined() ? describe(mask) : FooTensor{};
      const Tensor ws = workspace(d_q, d_k, d_v, false, query, op);
      const FooTensor d_w = describe(ws);
      check(foo_attention_forward(&d_o, &d_l, &d_q, &d_k, &d_v, mask.defined() ? &d_m : nullptr, &d_w,
                                  scale_of(query, scale), is_causal ? 1 : 0, dropout_p, seed, offset),
            op);
    }
  }
  // The Philox seed and offset as 0-dim int64 tensors on the query's device (the backward takes
  // them back): the device PyTorch's fake kernel of this op predicts, so a compiled graph's plan
  // holds (CUDA's flash attention keeps them on the CPU, an exception its fake checks list). No
  // cumulative lengths (no nested inputs), no debug mask.
  const auto state = query.options().dtype(at::kLong);
  Tensor philox_seed = at::scalar_tensor(static_cast<int64_t>(seed), state);
  Tensor philox_offset = at::scalar_tensor(static_cast<int64_t>(offset), state);
  return {out,         lse,           Tensor(), Tensor(), c10::SymInt(L), c10::SymInt(S), philox_seed, philox_offset,
          Tensor()};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> fused_attention_backward(
    const Tensor& grad_out, const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& attn_bias,
    std::array<bool, 4> grad_input_mask, const Tensor& out, const Tensor& logsumexp, const Tensor& /*cum_seq_q*/,
    const Tensor& /*cum_seq_k*/, int64_t /*max_q*/, int64_t /*max_k*/, double dropout_p, bool is_causal,
    const Tensor& philox_seed, const Tensor& philox_offset, std::optional<double> scale) {
  const char* op = "_scaled_dot_product_fused_attention_overrideable_backward";
  if (!grad_out.defined()) return {Tensor(), Tensor(), Tensor(), Tensor()};
  const std::optional<Tensor> bias = attn_bias.defined() ? std::optional<Tensor>(attn_bias) : std::nullopt;
  check_inputs(query, key, value, bias, dropout_p, op);
  for (const Tensor* t : {&grad_out, &query, &key, &value, &out, &logsumexp}) {
    TORCH_CHECK(on_foo(*t), op, ": expected foo tensors, got one on ", t->device());
  }
  TORCH_CHECK(grad_out.sizes() == out.sizes() && grad_out.scalar_type() == out.scalar_type(), op,
              ": grad_out ", grad_out.sizes(), " does not match the output ", out.sizes());
  const c10::DeviceGuard guard(query.device());
  Tensor gq = new_output(query, query.size(-1)), gk = new_output(key, key.size(-1)),
         gv = new_output(value, value.size(-1));
  const bool want_bias = attn_bias.defined() && grad_input_mask[3];
  const Tensor q = operand(query), k = operand(key), v = operand(value);
  const int64_t B = q.size(0), H = q.size(1), L = q.size(2), S = k.size(2);
  Tensor gbias_full =
      want_bias ? at::empty({B, H, L, S}, query.options().dtype(math_dtype(query))) : Tensor();
  if (S == 0 || L == 0 || B * H == 0) {
    gq.zero_();
    gk.zero_();
    gv.zero_();
    if (want_bias) gbias_full.zero_();
  } else {
    uint64_t seed = 0, offset = 0;
    if (dropout_p > 0.0) {
      seed = static_cast<uint64_t>(philox_seed.item<int64_t>());
      offset = static_cast<uint64_t>(philox_offset.item<int64_t>());
    }
    const Tensor go = operand(grad_out), o = operand(out);
    const Tensor lse = logsumexp.view({B, H, L});
    const Tensor mask = attn_bias.defined() ? mask_operand(attn_bias, query, key) : Tensor();
    const Tensor gq4 = as4d(gq), gk4 = as4d(gk), gv4 = as4d(gv);
    const FooTensor d_gq = describe(gq4), d_gk = describe(gk4), d_gv = describe(gv4), d_go = describe(go),
                    d_q = describe(q), d_k = describe(k), d_v = describe(v), d_o = describe(o), d_l = describe(lse);
    const FooTensor d_gb = want_bias ? describe(gbias_full) : FooTensor{};
    const FooTensor d_m = mask.defined() ? describe(mask) : FooTensor{};
    const Tensor ws = workspace(d_q, d_k, d_v, true, query, op);
    const FooTensor d_w = describe(ws);
    check(foo_attention_backward(&d_gq, &d_gk, &d_gv, want_bias ? &d_gb : nullptr, &d_go, &d_q, &d_k, &d_v, &d_o,
                                 &d_l, mask.defined() ? &d_m : nullptr, &d_w, scale_of(query, scale),
                                 is_causal ? 1 : 0, dropout_p, seed, offset),
          op);
  }
  Tensor gbias;
  if (want_bias) {
    std::vector<int64_t> shape = query.sizes().vec();
    shape.back() = S;
    gbias = gbias_full.view(shape).sum_to_size(attn_bias.sizes()).to(attn_bias.scalar_type());
  }
  return {gq, gk, gv, gbias};
}

// q = (qkv + bias) / sqrt(head dim), k and v = qkv + bias, each [B, heads, T, head dim]: slots of
// one [3, B, heads, T, head dim] buffer, as the CPU's, filled by one Rust kernel.
std::tuple<Tensor, Tensor, Tensor> transform_bias_rescale_qkv(const Tensor& qkv, const Tensor& qkv_bias,
                                                              int64_t num_head) {
  // Fewer than 3 dims: the CPU's IndexError (from qkv.size(2)).
  TORCH_CHECK_INDEX(qkv.dim() >= 3, "_transform_bias_rescale_qkv: expected a 3-D qkv, got ", qkv.sizes());
  TORCH_CHECK(qkv.dim() == 3 && !qkv.is_nested(), "_transform_bias_rescale_qkv: expected a 3-D qkv, got ",
              qkv.sizes());
  const int64_t b = qkv.size(0), t = qkv.size(1), d3 = qkv.size(2);
  // The CPU checks the next two; it reads a short or other-dtype bias as if it were right, and
  // divides by zero heads (SIGFPE), where foo raises.
  TORCH_CHECK(d3 % 3 == 0, "_transform_bias_rescale_qkv: qkv's last dim ", d3, " is not a multiple of 3");
  TORCH_CHECK(num_head > 0 && (d3 / 3) % num_head == 0, "transform_bias_rescale_qkv: D must divide evenly by num_head");
  TORCH_CHECK(qkv_bias.dim() == 1 && qkv_bias.size(0) == d3, "_transform_bias_rescale_qkv: qkv_bias must have ", d3,
              " elements, got ", qkv_bias.sizes());
  TORCH_CHECK(qkv_bias.scalar_type() == qkv.scalar_type(), "_transform_bias_rescale_qkv: qkv is ", qkv.scalar_type(),
              " but qkv_bias is ", qkv_bias.scalar_type());
  const int64_t dh = d3 / 3 / num_head;
  Tensor q_k_v = at::empty({3, b, num_head, t, dh}, qkv.options());
  if (q_k_v.numel() > 0) {
    const Tensor x = qkv.contiguous(), bias = qkv_bias.contiguous();
    const FooTensor dx = describe(x), db = describe(bias), dout = describe(q_k_v);
    check(foo_transform_bias_rescale_qkv(&dout, &dx, &db, num_head), "_transform_bias_rescale_qkv");
  }
  return {q_k_v[0], q_k_v[1], q_k_v[2]};
}

// Softmax over the unmasked entries (mask true = left out, 0 in the result); a row with every
// entry masked is nan, as on the CPU.
// mask_type 1: a [B, L] key-padding mask for [B, H, L, L] scores; otherwise the mask broadcasts.
Tensor masked_softmax(const Tensor& self, const Tensor& mask, std::optional<int64_t> dim,
                      std::optional<int64_t> mask_type) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "Mask should be a boolean tensor");
  const int64_t d = dim.has_value() ? c10::maybe_wrap_dim(*dim, self.dim()) : self.dim() - 1;
  Tensor m = mask;
  if (mask_type == 1 && self.dim() == 4 && mask.dim() == 2) m = mask.view({mask.size(0), 1, 1, mask.size(1)});
  TORCH_CHECK(at::is_expandable_to(m.sizes(), self.sizes()), "Mask shape ", mask.sizes(),
              " does not match the input's ", self.sizes());
  m = m.expand_as(self);
  return at::softmax(self.masked_fill(m, -std::numeric_limits<double>::infinity()), d);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  FOO_IMPL(m, "_fused_sdp_choice", fused_sdp_choice);
  FOO_IMPL(m, "_scaled_dot_product_fused_attention_overrideable", fused_attention);
  FOO_IMPL(m, "_scaled_dot_product_fused_attention_overrideable_backward", fused_attention_backward);
  // The inference fast paths of nn.MultiheadAttention and nn.TransformerEncoderLayer (eval mode,
  // no grad): ATen's own implementations, which CPU, CUDA and XPU share and which are composed of
  // dispatcher calls (linear, layer_norm, scaled_dot_product_attention: foo's kernels, the fused
  // attention among them, when ATen's CPU test of the fused path passes; else its own bmm/softmax
  // path with the masked softmax above). FOO_IMPL_META: no device work of their own; the
  // profiler shows the kernels inside.
  FOO_IMPL_META(m, "_native_multi_head_attention", at::native::native_multi_head_attention_cpu);
  FOO_IMPL_META(m, "_transformer_encoder_layer_fwd", at::native::transformer_encoder_layer_forward);
  FOO_IMPL(m, "_transform_bias_rescale_qkv", transform_bias_rescale_qkv);
  FOO_IMPL_META(m, "_masked_softmax", masked_softmax);
}

}  // namespace foo::ops::attention

namespace at::native {
// F.scaled_dot_product_attention asks the device's stub (not the op) which backend to take.
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &foo::ops::attention::fused_sdp_choice);
}  // namespace at::native
