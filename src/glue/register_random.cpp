// Registrations of the random kernels (ops_random.cpp).
#include <torch/library.h>

#include "common.h"
#include "ops_random.h"

namespace foo {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  FOO_IMPL(m, "uniform_", ops::uniform_);
  FOO_IMPL(m, "normal_", ops::normal_);
  FOO_IMPL(m, "log_normal_", ops::log_normal_);
  FOO_IMPL(m, "exponential_", ops::exponential_);
  FOO_IMPL(m, "geometric_", ops::geometric_);
  FOO_IMPL(m, "cauchy_", ops::cauchy_);
  FOO_IMPL(m, "bernoulli_.float", ops::bernoulli_float_);
  FOO_IMPL(m, "bernoulli_.Tensor", ops::bernoulli_tensor_);
  FOO_IMPL(m, "bernoulli.out", ops::bernoulli_out);
  FOO_IMPL(m, "random_", ops::random_);
  FOO_IMPL(m, "random_.from", ops::random_from_);
  FOO_IMPL(m, "random_.to", ops::random_to_);
  FOO_IMPL(m, "native_dropout", ops::native_dropout);
  FOO_IMPL(m, "native_dropout_backward", ops::native_dropout_backward);
  FOO_IMPL(m, "randperm.generator_out", ops::randperm_generator_out);
  FOO_IMPL(m, "multinomial", ops::multinomial);
  FOO_IMPL(m, "multinomial.out", ops::multinomial_out);
}

}  // namespace foo
