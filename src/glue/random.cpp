// Random ops: each draws from a foo generator (a handle onto Rust's Philox state) through the
// Rust random kernels. Strided outputs are filled through a dense temporary so that element i
// of the tensor's logical order always gets draw i.
#include <ATen/core/DistributionsHelper.h>
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/native/DistributionTemplates.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <mutex>

#include "common.h"
#include "foo_ffi.h"
#include "generator.h"

namespace foo::ops {
namespace {

uint64_t generator_id(const std::optional<at::Generator>& gen, const at::Tensor& self) {
  // A foo generator (or a foo `p`) sends a CPU tensor's random op here, its dispatch key being
  // the highest; the CPU kernel would reject the foo generator (at::check_generator), so must this.
  if (self.device().type() != kFoo) {
    TORCH_CHECK(!gen.has_value() || !gen->defined(), "Expected a '", self.device().type(),
                "' device type for generator but found '", gen->device().type(), "'");
    TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ",
                c10::Device(kFoo, 0), " and ", self.device(), "!");
  }
  auto* g = at::get_generator_or_default<FooGeneratorImpl>(gen, default_generator(self.device().index()));
  return g->rust_id();
}

at::Tensor& fill_random(at::Tensor& self, int32_t op, std::initializer_list<FooScalar> params,
                        const std::optional<at::Generator>& gen) {
  check_supported_dtype(self.scalar_type(), "random op");
  if (self.numel() == 0) return self;
  const c10::DeviceGuard guard(self.device());
  const uint64_t id = generator_id(gen, self);
  at::Tensor target = self.is_contiguous() ? self : at::empty(self.sizes(), self.options());
  const FooTensor d = describe(target);
  const std::vector<FooScalar> p(params);
  check(foo_random(op, &d, id, p.data(), static_cast<int32_t>(p.size())), "random op");
  if (!target.is_same(self)) self.copy_(target);
  return self;
}

FooScalar f(double v) { return to_ffi(c10::Scalar(v)); }
FooScalar i(int64_t v) { return to_ffi(c10::Scalar(v)); }

// Bits of integer range a float dtype represents exactly (random_() draws from [0, 2^digits]).
int64_t float_digits(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return std::numeric_limits<float>::digits;
    case at::kDouble: return std::numeric_limits<double>::digits;
    case at::kHalf: return 11;
    case at::kBFloat16: return 8;
    default: return 0;
  }
}

// [from, from + range) with range 0 meaning 2^64, as kernels::random::RandomRange reads it.
at::Tensor& random_range(at::Tensor& self, int64_t from, uint64_t range, const std::optional<at::Generator>& gen) {
  return fill_random(self, FOO_RANDOM_OP_RANDOM_RANGE, {i(from), i(static_cast<int64_t>(range))}, gen);
}

// One past the largest value random_() may produce for a dtype (as a 128-bit-safe pair).
uint64_t default_range(at::ScalarType t) {
  if (at::isFloatingType(t)) return (uint64_t{1} << float_digits(t)) + 1;
  switch (t) {
    case at::kBool: return 2;
    case at::kByte: return uint64_t{1} << 8;
    case at::kChar: return uint64_t{1} << 7;
    case at::kShort: return uint64_t{1} << 15;
    case at::kInt: return uint64_t{1} << 31;
    case at::kLong: return uint64_t{1} << 63;
    case at::kUInt16: return uint64_t{1} << 16;
    case at::kUInt32: return uint64_t{1} << 32;
    case at::kUInt64: return 0;  // 2^64
    default: TORCH_CHECK(false, "random_ is not supported for dtype ", t);
  }
}

at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from, " > to=", to);
  if (self.is_complex()) needs_fallback("uniform_: no foo kernel for complex tensors");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "uniform_ is only implemented for floating-point types, got ",
              self.scalar_type());
  TORCH_CHECK(std::isfinite(to - from), "uniform_ expects to-from <= std::numeric_limits<",
              self.scalar_type(), ">::max(), but found to=", to, " and from=", from, " which result in to-from to exceed the limit");
  return fill_random(self, FOO_RANDOM_OP_UNIFORM, {f(from), f(to)}, gen);
}

at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  if (self.is_complex()) needs_fallback("normal_: no foo kernel for complex tensors");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "normal_ is only implemented for floating-point types");
  return fill_random(self, FOO_RANDOM_OP_NORMAL, {f(mean), f(std)}, gen);
}

at::Tensor& log_normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  TORCH_CHECK(std > 0.0, "log_normal_ expects std > 0.0, but found std=", std);
  return fill_random(self, FOO_RANDOM_OP_LOG_NORMAL, {f(mean), f(std)}, gen);
}

at::Tensor& exponential_(at::Tensor& self, double lambd, std::optional<at::Generator> gen) {
  TORCH_CHECK(lambd > 0.0, "exponential_ expects lambda > 0.0, but found lambda=", lambd);
  return fill_random(self, FOO_RANDOM_OP_EXPONENTIAL, {f(lambd)}, gen);
}

at::Tensor& geometric_(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  TORCH_CHECK(0 < p && p < 1, "geometric_ expects p to be in (0, 1), but got p=", p);
  return fill_random(self, FOO_RANDOM_OP_GEOMETRIC, {f(p)}, gen);
}

at::Tensor& cauchy_(at::Tensor& self, double median, double sigma, std::optional<at::Generator> gen) {
  TORCH_CHECK(sigma > 0.0, "cauchy_ expects sigma > 0.0, but found sigma=", sigma);
  return fill_random(self, FOO_RANDOM_OP_CAUCHY, {f(median), f(sigma)}, gen);
}

at::Tensor& bernoulli_float_(at::Tensor& self, double p, std::optional<at::Generator> gen) {
  TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  return fill_random(self, FOO_RANDOM_OP_BERNOULLI, {f(p)}, gen);
}

at::Tensor& bernoulli_tensor_(at::Tensor& self, const at::Tensor& p, std::optional<at::Generator> gen) {
  check_supported_dtype(self.scalar_type(), "bernoulli_");
  if (self.numel() == 0) return self;
  const c10::DeviceGuard guard(self.device());
  const uint64_t id = generator_id(gen, self);
  at::Tensor prob = p.device() == self.device() ? p : p.to(self.device());
  prob = prob.expand(self.sizes());
  at::Tensor target = self.is_contiguous() ? self : at::empty(self.sizes(), self.options());
  const FooTensor d = describe(target), dp = describe(prob);
  check(foo_bernoulli_tensor(&d, &dp, id), "bernoulli_");
  if (!target.is_same(self)) self.copy_(target);
  return self;
}

at::Tensor& bernoulli_out(const at::Tensor& self, std::optional<at::Generator> gen, at::Tensor& out) {
  out.resize_(self.sizes());
  return bernoulli_tensor_(out, self, gen);
}

at::Tensor& random_(at::Tensor& self, std::optional<at::Generator> gen) {
  return random_range(self, 0, default_range(self.scalar_type()), gen);
}

at::Tensor& random_from_(at::Tensor& self, int64_t from, std::optional<int64_t> to, std::optional<at::Generator> gen) {
  if (to.has_value()) {
    TORCH_CHECK(from < *to, "random_ expects 'from' to be less than 'to', but got from=", from, " >= to=", *to);
    at::native::templates::check_from_to_in_range(from, *to - 1, self.dtype());
    return random_range(self, from, static_cast<uint64_t>(*to) - static_cast<uint64_t>(from), gen);
  }
  // [from, max]: the dtype's upper end.
  const uint64_t top = default_range(self.scalar_type());
  TORCH_CHECK(top == 0 || static_cast<int64_t>(top) > from, "random_ expects 'from' to be less than the dtype's maximum");
  return random_range(self, from, top == 0 ? 0 : top - static_cast<uint64_t>(from), gen);
}

at::Tensor& random_to_(at::Tensor& self, int64_t to, std::optional<at::Generator> gen) {
  TORCH_CHECK(0 < to, "random_ expects 'from' to be less than 'to', but got from=0 >= to=", to);
  at::native::templates::check_from_to_in_range(0, to - 1, self.dtype());
  return random_range(self, 0, static_cast<uint64_t>(to), gen);
}

std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  at::Tensor mask = at::empty(input.sizes(), input.options().dtype(at::kBool));
  if (!train.value_or(true) || p == 0 || input.numel() == 0) {
    return {input.clone(), mask.fill_(true)};
  }
  const c10::DeviceGuard guard(input.device());
  const uint64_t id = generator_id(std::nullopt, input);
  at::Tensor out = at::empty(input.sizes(), input.options());
  const FooTensor d = describe(out), dm = describe(mask), dx = describe(input);
  check(foo_dropout(&d, &dm, &dx, p, id), "native_dropout");
  return {out, mask};
}

at::Tensor native_dropout_backward(const at::Tensor& grad_output, const at::Tensor& mask, double scale) {
  // grad * mask * scale, composed of native foo kernels.
  return at::mul(at::mul(grad_output, mask), scale);
}

at::Tensor& randperm_generator_out(int64_t n, std::optional<at::Generator> gen, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  TORCH_CHECK(at::isIntegralType(out.scalar_type(), false) || at::isFloatingType(out.scalar_type()),
              "randperm is not implemented for ", out.scalar_type());
  out.resize_({n});
  if (n == 0) return out;
  const c10::DeviceGuard guard(out.device());
  const uint64_t id = generator_id(gen, out);
  at::Tensor target = out.is_contiguous() && out.scalar_type() == at::kLong ? out : at::empty({n}, out.options().dtype(at::kLong));
  const FooTensor d = describe(target);
  check(foo_randperm(&d, id), "randperm");
  if (!target.is_same(out)) out.copy_(target);
  return out;
}

at::Tensor& multinomial_out(const at::Tensor& self, int64_t num_samples, bool replacement,
                            std::optional<at::Generator> gen, at::Tensor& out) {
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "multinomial only supports floating-point dtypes for input, got: ",
              self.scalar_type());
  TORCH_CHECK(num_samples > 0, "cannot sample n_sample <= 0 samples");
  // The CPU's limit (its sampler works on float32 cumulative sums).
  TORCH_CHECK(self.size(-1) <= (int64_t{1} << 24), "number of categories cannot exceed 2^24");
  TORCH_CHECK(replacement || num_samples <= self.size(-1),
              "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  TORCH_CHECK(out.scalar_type() == at::kLong, "multinomial expects Long tensor out, got: ", out.scalar_type());
  if (self.dim() == 1) {
    out.resize_({num_samples});
  } else {
    out.resize_({self.size(0), num_samples});
  }
  if (out.numel() == 0) return out;
  const c10::DeviceGuard guard(self.device());
  const uint64_t id = generator_id(gen, self);
  at::Tensor target = out.is_contiguous() ? out : at::empty(out.sizes(), out.options());
  const FooTensor d = describe(target), dp = describe(self);
  check(foo_multinomial(&d, &dp, num_samples, replacement, id), "multinomial");
  if (!target.is_same(out)) out.copy_(target);
  return out;
}

at::Tensor multinomial(const at::Tensor& self, int64_t num_samples, bool replacement, std::optional<at::Generator> gen) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return multinomial_out(self, num_samples, replacement, gen, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  FOO_IMPL(m, "uniform_", uniform_);
  FOO_IMPL(m, "normal_", normal_);
  FOO_IMPL(m, "log_normal_", log_normal_);
  FOO_IMPL(m, "exponential_", exponential_);
  FOO_IMPL(m, "geometric_", geometric_);
  FOO_IMPL(m, "cauchy_", cauchy_);
  FOO_IMPL(m, "bernoulli_.float", bernoulli_float_);
  FOO_IMPL(m, "bernoulli_.Tensor", bernoulli_tensor_);
  FOO_IMPL(m, "bernoulli.out", bernoulli_out);
  FOO_IMPL(m, "random_", random_);
  FOO_IMPL(m, "random_.from", random_from_);
  FOO_IMPL(m, "random_.to", random_to_);
  FOO_IMPL(m, "native_dropout", native_dropout);
  FOO_IMPL(m, "native_dropout_backward", native_dropout_backward);
  FOO_IMPL(m, "randperm.generator_out", randperm_generator_out);
  FOO_IMPL(m, "multinomial", multinomial);
  FOO_IMPL(m, "multinomial.out", multinomial_out);
}

}  // namespace foo::ops
