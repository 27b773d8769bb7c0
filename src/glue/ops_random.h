#pragma once

#include <ATen/ATen.h>

namespace foo::ops {
at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> gen);
at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen);
at::Tensor& log_normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen);
at::Tensor& exponential_(at::Tensor& self, double lambd, std::optional<at::Generator> gen);
at::Tensor& geometric_(at::Tensor& self, double p, std::optional<at::Generator> gen);
at::Tensor& cauchy_(at::Tensor& self, double median, double sigma, std::optional<at::Generator> gen);
at::Tensor& bernoulli_float_(at::Tensor& self, double p, std::optional<at::Generator> gen);
at::Tensor& bernoulli_tensor_(at::Tensor& self, const at::Tensor& p, std::optional<at::Generator> gen);
at::Tensor& bernoulli_out(const at::Tensor& self, std::optional<at::Generator> gen, at::Tensor& out);
at::Tensor& random_(at::Tensor& self, std::optional<at::Generator> gen);
at::Tensor& random_from_(at::Tensor& self, int64_t from, std::optional<int64_t> to, std::optional<at::Generator> gen);
at::Tensor& random_to_(at::Tensor& self, int64_t to, std::optional<at::Generator> gen);
std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p, std::optional<bool> train);
at::Tensor native_dropout_backward(const at::Tensor& grad_output, const at::Tensor& mask, double scale);
at::Tensor& randperm_generator_out(int64_t n, std::optional<at::Generator> gen, at::Tensor& out);
at::Tensor multinomial(const at::Tensor& self, int64_t num_samples, bool replacement, std::optional<at::Generator> gen);
at::Tensor& multinomial_out(const at::Tensor& self, int64_t num_samples, bool replacement,
                            std::optional<at::Generator> gen, at::Tensor& out);
}  // namespace foo::ops
