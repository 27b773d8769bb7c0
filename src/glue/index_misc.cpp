// cat, nonzero, masked_select, masked_scatter_, sort, topk, arange, linspace, eye, tril/triu,
// flip, roll: argument checks and output shapes here (ATen's messages), data movement in Rust.
#include <ATen/AccumulateType.h>
#include <ATen/Dispatch.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TensorShape.h>
#include <ATen/native/TypeProperties.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <array>
#include <cmath>
#include <limits>
#include <map>

#include "common.h"
#include "foo_ffi.h"
#include "index.h"

namespace foo::ops {
namespace {

using idx::OutOfRange;

// ---- cat -----------------------------------------------------------------------------------

at::Tensor& cat_impl(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out, bool allocate) {
  const auto materialized = tensors.materialize();
  TORCH_CHECK(!materialized.empty(), "torch.cat(): expected a non-empty list of Tensors");
  // Legacy behaviour: 1-d empty tensors are skipped whatever the other shapes.
  const at::Tensor* ref = nullptr;
  for (size_t i = 0; i < materialized.size(); ++i) {
    const at::Tensor& t = materialized[i].get();
    TORCH_CHECK(t.dim() > 0, "zero-dimensional tensor (at position ", i, ") cannot be concatenated");
    if (ref == nullptr && !at::native::cat_should_skip_tensor(t)) ref = &t;
  }
  dim = at::legacy_cat_wrap_dim(dim, materialized);
  const at::ScalarType dtype = at::native::result_type(tensors);
  const c10::Device device = allocate ? materialized[0].get().device() : out.device();
  std::vector<int64_t> shape{0};
  if (ref != nullptr) {
    shape.assign(ref->sizes().begin(), ref->sizes().end());
    shape[dim] = 0;
  }
  std::vector<FooTensor> descs;
  for (size_t i = 0; i < materialized.size(); ++i) {
    const at::Tensor& t = materialized[i].get();
    TORCH_CHECK(t.device() == device, "Expected all tensors to be on the same device, but found at least two devices, ",
                device, " and ", t.device(), "!");
    check_supported_dtype(t.scalar_type(), "cat");
    if (at::native::cat_should_skip_tensor(t)) continue;
    TORCH_CHECK(t.dim() == ref->dim(), "Tensors must have same number of dimensions: got ", ref->dim(), " and ",
                t.dim());
    for (int64_t d = 0; d < t.dim(); ++d) {
      if (d == dim) continue;
      TORCH_CHECK(t.size(d) == ref->size(d), "Sizes of tensors must match except in dimension ", dim,
                  ". Expected size ", ref->size(d), " but got size ", t.size(d), " for tensor number ", i,
                  " in the list.");
    }
    shape[dim] += t.size(dim);
  }
  // The CPU's layout rule: the inputs' common suggested memory format (channels-last inputs give a
  // channels-last result), else contiguous.
  std::optional<at::MemoryFormat> format;
  for (const auto& t : materialized) {
    const at::MemoryFormat f = t.get().suggest_memory_format();
    if (f == at::MemoryFormat::Contiguous || (format.has_value() && *format != f)) {
      format = at::MemoryFormat::Contiguous;
      break;
    }
    format = f;
  }
  if (allocate) {
    out = at::empty(shape, materialized[0].get().options().dtype(dtype).memory_format(format));
  } else {
    // A TypeError, as the CPU's cat (code catching it would break on a RuntimeError).
    TORCH_CHECK_TYPE(at::canCast(dtype, out.scalar_type()),
                     "torch.cat(): input types can't be cast to the desired output type ", out.scalar_type());
    if (at::native::resize_output(out, shape)) out.unsafeGetTensorImpl()->empty_tensor_restride(*format);
    at::assert_no_internal_overlap(out);
    for (size_t i = 0; i < materialized.size(); ++i) {
      // ATen's CPU check: only a known overlap is an error; TooHard (a strided out, say) is not.
      at::assert_no_overlap(out, materialized[i].get());
    }
  }
  if (out.numel() == 0) return out;
  std::vector<at::Tensor> staged;
  staged.reserve(materialized.size());
  for (const auto& t : materialized) {
    if (at::native::cat_should_skip_tensor(t.get())) continue;
    // An input in out's storage that the overlap test could not rule out is read from a copy:
    // Rust writes out while it reads the inputs.
    const bool shared = !allocate && t.get().is_alias_of(out);
    staged.push_back(shared ? t.get().clone() : t.get());
  }
  for (const auto& t : staged) descs.push_back(describe(t));
  const c10::DeviceGuard guard(out.device());
  const FooTensor o = describe(out);
  check(foo_cat(&o, descs.data(), static_cast<int32_t>(descs.size()), dim), "cat");
  return out;
}

// ---- sort / topk ---------------------------------------------------------------------------

void check_sort_outputs(const at::Tensor& self, at::Tensor& values, at::Tensor& indices, c10::IntArrayRef shape,
                        const char* name) {
  check_supported_dtype(self.scalar_type(), name);
  TORCH_CHECK(values.scalar_type() == self.scalar_type(), name, "(): Expected out tensor to have dtype ",
              self.scalar_type(), ", but got ", values.scalar_type(), " instead");
  TORCH_CHECK(indices.scalar_type() == at::kLong, name, "(): Expected out tensor to have dtype long int, but got ",
              indices.scalar_type(), " instead");
  at::native::resize_output(values, shape);
  at::native::resize_output(indices, shape);
  at::assert_no_internal_overlap(values);
  at::assert_no_internal_overlap(indices);
  at::assert_no_overlap(values, indices);
}

// self, or a copy of it when it shares memory with an output.
at::Tensor unaliased(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b) {
  if (at::get_overlap_status(self, a) != at::MemOverlapStatus::No ||
      at::get_overlap_status(self, b) != at::MemOverlapStatus::No) {
    return self.clone();
  }
  return self;
}

// ---- tril / triu -----------------------------------------------------------------------------

at::Tensor& tril_triu_out(const at::Tensor& self, int64_t k, bool upper, at::Tensor& out) {
  const char* name = upper ? "triu" : "tril";
  check_supported_dtype(self.scalar_type(), name);
  TORCH_CHECK(self.dim() >= 2, name, ": input tensor must have at least 2 dimensions");
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), name, "(): Expected out tensor to have dtype ",
              self.scalar_type(), ", but got ", out.scalar_type(), " instead");
  at::native::resize_output(out, self.sizes());
  at::assert_no_internal_overlap(out);
  if (out.numel() == 0) return out;
  at::Tensor src = self;
  if (!out.is_same(self) && at::get_overlap_status(out, self) != at::MemOverlapStatus::No) src = self.clone();
  const c10::DeviceGuard guard(out.device());
  const FooTensor o = describe(out), s = describe(src);
  check(foo_tril_triu(&o, &s, k, upper), name);
  return out;
}

at::Tensor cat(const at::ITensorListRef& tensors, int64_t dim) {
  at::Tensor out;
  return cat_impl(tensors, dim, out, /*allocate=*/true);
}

at::Tensor& cat_out(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out) {
  return cat_impl(tensors, dim, out, /*allocate=*/false);
}

// ---- nonzero / masked_select / masked_scatter_ ---------------------------------------------

at::Tensor& nonzero_out(const at::Tensor& self, at::Tensor& out) {
  check_supported_dtype(self.scalar_type(), "nonzero");
  TORCH_CHECK(out.scalar_type() == at::kLong, "nonzero: Expected out tensor to have scalar type Long but got scalar type",
              out.scalar_type());
  TORCH_CHECK(self.device() == out.device(), "nonzero: Expected out tensor to be on ", self.device());
  const c10::DeviceGuard guard(self.device());
  const FooTensor s = describe(self);
  int64_t count = 0;
  check(foo_count_nonzero(&s, &count), "nonzero");
  if (at::native::resize_output(out, {count, self.dim()})) {
    // As the CPU: a (re)allocated result is column-major (PyTorch gh-46224); the kernel writes
    // through the strides.
    out.as_strided_({count, self.dim()}, {1, count});
  }
  if (out.numel() == 0) return out;
  const FooTensor o = describe(out);
  check(foo_nonzero(&o, &s), "nonzero");
  return out;
}

at::Tensor nonzero(const at::Tensor& self) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return nonzero_out(self, out);
}

at::Tensor& masked_select_out(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out) {
  check_supported_dtype(self.scalar_type(), "masked_select");
  TORCH_CHECK(mask.scalar_type() == at::kBool,  // as the CPU: uint8 masks are refused
              "masked_select: expected BoolTensor for mask");
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "masked_select(): self and result must have the same scalar type");
  at::Tensor m = mask.device() == self.device() ? mask : mask.to(self.device());
  if (m.scalar_type() != at::kBool) m = m.to(at::kBool);
  auto [bm, bs] = at::expand_outplace(m, self);
  const c10::DeviceGuard guard(self.device());
  const FooTensor md = describe(*bm);
  int64_t count = 0;
  check(foo_count_nonzero(&md, &count), "masked_select");
  at::native::resize_output(out, {count});
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  at::assert_no_overlap(out, mask);
  if (count == 0) return out;
  const FooTensor o = describe(out), s = describe(*bs);
  check(foo_masked_select(&o, &s, &md), "masked_select");
  return out;
}

at::Tensor masked_select(const at::Tensor& self, const at::Tensor& mask) {
  at::Tensor out = at::empty({0}, self.options());
  return masked_select_out(self, mask, out);
}

at::Tensor& masked_scatter_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& source) {
  check_supported_dtype(self.scalar_type(), "masked_scatter_");
  TORCH_CHECK(self.scalar_type() == source.scalar_type(),
              "masked_scatter_: expected self and source to have same dtypes but got", self.scalar_type(), " and ",
              source.scalar_type());
  TORCH_CHECK(mask.scalar_type() == at::kBool,  // as the CPU: uint8 masks are refused here
              "masked_scatter_ only supports boolean masks, but got mask with dtype ", mask.scalar_type());
  TORCH_CHECK(at::is_expandable_to(mask.sizes(), self.sizes()), "masked_scatter_: expected mask to be broadcastable to ",
              self.sizes(), ", got ", mask.sizes());
  at::assert_no_internal_overlap(self);
  at::assert_no_overlap(self, mask);
  at::Tensor m = mask.device() == self.device() ? mask : mask.to(self.device());
  if (m.scalar_type() != at::kBool) m = m.to(at::kBool);
  m = m.expand(self.sizes());
  if (self.numel() == 0) return self;
  at::Tensor src = source.reshape({-1});
  if (at::get_overlap_status(self, src) != at::MemOverlapStatus::No) src = src.clone();
  const c10::DeviceGuard guard(self.device());
  const FooTensor d = describe(self), md = describe(m), s = describe(src);
  idx::check_index(foo_masked_scatter(&d, &md, &s), "masked_scatter_", OutOfRange::RuntimeError);
  return self;
}

// ---- sort / topk ---------------------------------------------------------------------------

std::tuple<at::Tensor&, at::Tensor&> sort_values_stable(const at::Tensor& self, std::optional<bool> /*stable*/,
                                                        int64_t dim, bool descending, at::Tensor& values,
                                                        at::Tensor& indices) {
  // Always stable (a stable order is a valid unstable one).
  TORCH_CHECK_TYPE(!self.is_complex(), "Sort does not support complex dtypes on CPU");
  dim = at::maybe_wrap_dim(dim, self.dim());
  check_sort_outputs(self, values, indices, self.sizes(), "sort");
  if (self.numel() == 0) return {values, indices};
  const at::Tensor src = unaliased(self, values, indices);
  const c10::DeviceGuard guard(self.device());
  const FooTensor v = describe(values), i = describe(indices), s = describe(src);
  check(foo_sort(&v, &i, &s, dim, descending), "sort");
  return {values, indices};
}

std::tuple<at::Tensor, at::Tensor> sort_stable(const at::Tensor& self, std::optional<bool> stable, int64_t dim,
                                               bool descending) {
  at::Tensor values = at::empty(self.sizes(), self.options());
  at::Tensor indices = at::empty(self.sizes(), self.options().dtype(at::kLong));
  sort_values_stable(self, stable, dim, descending, values, indices);
  return {values, indices};
}

std::tuple<at::Tensor&, at::Tensor&> topk_values(const at::Tensor& self, c10::SymInt k_sym, int64_t dim, bool largest,
                                                 bool /*sorted: always sorted*/, at::Tensor& values,
                                                 at::Tensor& indices) {
  const int64_t k = k_sym.expect_int();
  // The CPU's checks: complex is a TypeError, bool is not implemented.
  TORCH_CHECK_TYPE(!self.is_complex(), "topk does not support complex dtypes on CPU");
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool, "topk does not support bool dtypes on CPU");
  dim = at::maybe_wrap_dim(dim, self.dim(), /*wrap_scalar=*/true);
  const int64_t n = self.dim() == 0 ? 1 : self.size(dim);
  TORCH_CHECK(k >= 0 && k <= n, "selected index k out of range");
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
  if (self.dim() > 0) shape[dim] = k;
  check_sort_outputs(self, values, indices, shape, "topk");
  if (values.numel() == 0) return {values, indices};
  const at::Tensor src = unaliased(self, values, indices);
  const c10::DeviceGuard guard(self.device());
  const FooTensor v = describe(values), i = describe(indices), s = describe(src);
  check(foo_topk(&v, &i, &s, k, dim, largest), "topk");
  return {values, indices};
}

std::tuple<at::Tensor, at::Tensor> topk(const at::Tensor& self, c10::SymInt k, int64_t dim, bool largest, bool sorted) {
  at::Tensor values = at::empty({0}, self.options());
  at::Tensor indices = at::empty({0}, self.options().dtype(at::kLong));
  topk_values(self, std::move(k), dim, largest, sorted, values, indices);
  return {values, indices};
}

// ---- factories -------------------------------------------------------------------------------

at::Tensor& arange_out(const c10::Scalar& start, const c10::Scalar& end, const c10::Scalar& step, at::Tensor& out) {
  TORCH_CHECK_NOT_IMPLEMENTED(!out.is_complex() && out.scalar_type() != at::kBool,
                              "\"arange_cpu\" not implemented for '", out.scalar_type(), "'");
  // The size computation of ATen's CPU arange (in its accumulate type).
  int64_t size = 0;
  AT_DISPATCH_ALL_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "arange_foo", [&]() {
    using acc_t = at::acc_type<scalar_t, false>;
    const auto xstart = start.to<acc_t>();
    const auto xend = end.to<acc_t>();
    const auto xstep = step.to<acc_t>();
    double size_d = 0;
    if constexpr (std::is_same_v<scalar_t, int64_t>) {
      const int64_t sgn = (xstep > 0) - (xstep < 0);
      size_d = std::ceil(static_cast<double>((xend - xstart + xstep - sgn) / xstep));  // integer division, as ATen
    } else {
      size_d = std::ceil((end.to<double>() - start.to<double>()) / step.to<double>());
    }
    TORCH_CHECK(xstep > 0 || xstep < 0, "step must be nonzero");
    TORCH_CHECK(std::isfinite(static_cast<double>(xstart)) && std::isfinite(static_cast<double>(xend)),
                "unsupported range: ", xstart, " -> ", xend);
    TORCH_CHECK(((xstep > 0) && (xend >= xstart)) || ((xstep < 0) && (xend <= xstart)),
                "upper bound and lower bound inconsistent with step sign");
    TORCH_CHECK(size_d >= 0 && size_d <= static_cast<double>(std::numeric_limits<int64_t>::max()),
                "invalid size, possible overflow?");
    size = static_cast<int64_t>(size_d);
  });
  if (out.numel() != size) {
    if (out.numel() > 0) {
      TORCH_WARN("The number of elements in the out tensor of shape ", out.sizes(), " is ", out.numel(),
                 " which does not match the computed number of elements ", size,
                 ". Note that this may occur as a result of rounding error. "
                 "The out tensor will be resized to a tensor of shape (",
                 size, ",).");
    }
    out.resize_({size});
  }
  if (size == 0) return out;
  const c10::DeviceGuard guard(out.device());
  const FooTensor o = describe(out);
  const FooScalar a = to_ffi(start), s = to_ffi(step);
  check(foo_arange(&o, &a, &s), "arange");
  return out;
}

at::Tensor& linspace_out(const c10::Scalar& start, const c10::Scalar& end, int64_t steps, at::Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  TORCH_CHECK_NOT_IMPLEMENTED(out.scalar_type() != at::kBool, "\"linspace_cpu\" not implemented for 'Bool'");
  if (out.is_complex()) needs_fallback("linspace: no foo kernel for complex outputs");
  if (out.numel() != steps) out.resize_({steps});
  if (steps == 0) return out;
  check_scalar_fits(start, out.scalar_type());
  check_scalar_fits(end, out.scalar_type());
  if (steps == 1) return out.fill_(start);
  const c10::DeviceGuard guard(out.device());
  const FooTensor o = describe(out);
  const FooScalar a = to_ffi(start), b = to_ffi(end);
  check(foo_linspace(&o, &a, &b, steps), "linspace");
  return out;
}

at::Tensor& eye_m_out(c10::SymInt n_sym, c10::SymInt m_sym, at::Tensor& out) {
  const int64_t n = n_sym.expect_int(), m = m_sym.expect_int();
  TORCH_CHECK(n >= 0, "n must be greater or equal to 0, got ", n);
  TORCH_CHECK(m >= 0, "m must be greater or equal to 0, got ", m);
  out.resize_({n, m});
  out.zero_();
  if (std::min(n, m) > 0) out.diagonal().fill_(1);
  return out;
}

at::Tensor& eye_out(c10::SymInt n, at::Tensor& out) { return eye_m_out(n, n, out); }

at::Tensor tril(const at::Tensor& self, c10::SymInt diagonal) {
  at::Tensor out = at::empty(self.sizes(), self.options());
  return tril_triu_out(self, diagonal.expect_int(), false, out);
}
at::Tensor& tril_(at::Tensor& self, c10::SymInt diagonal) {
  return tril_triu_out(self, diagonal.expect_int(), false, self);
}
at::Tensor& tril_out(const at::Tensor& self, c10::SymInt diagonal, at::Tensor& out) {
  return tril_triu_out(self, diagonal.expect_int(), false, out);
}
at::Tensor triu(const at::Tensor& self, c10::SymInt diagonal) {
  at::Tensor out = at::empty(self.sizes(), self.options());
  return tril_triu_out(self, diagonal.expect_int(), true, out);
}
at::Tensor& triu_(at::Tensor& self, c10::SymInt diagonal) {
  return tril_triu_out(self, diagonal.expect_int(), true, self);
}
at::Tensor& triu_out(const at::Tensor& self, c10::SymInt diagonal, at::Tensor& out) {
  return tril_triu_out(self, diagonal.expect_int(), true, out);
}

// ---- flip / roll -----------------------------------------------------------------------------

at::Tensor flip(const at::Tensor& self, at::IntArrayRef dims) {
  check_supported_dtype(self.scalar_type(), "flip");
  const auto flipped = at::dim_list_to_bitset(dims, self.dim());
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Preserve);
  if (self.numel() == 0) return out;
  // A descriptor of self with negated strides along the flipped dims (torch views cannot
  // express negative strides; the Rust copy walks them).
  std::vector<int64_t> strides(self.strides().begin(), self.strides().end());
  int64_t offset = 0;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (!flipped[d]) continue;
    offset += (self.size(d) - 1) * strides[d];
    strides[d] = -strides[d];
  }
  FooTensor s = describe(self);
  s.data = static_cast<char*>(s.data) + offset * static_cast<int64_t>(self.element_size());
  s.strides = strides.data();
  const c10::DeviceGuard guard(self.device());
  const FooTensor o = describe(out);
  check(foo_copy(&o, &s), "flip");
  return out;
}

at::Tensor roll(const at::Tensor& self, c10::SymIntArrayRef shifts_sym, at::IntArrayRef dims) {
  const auto shifts = C10_AS_INTARRAYREF_SLOW(shifts_sym);
  if (dims.empty() && shifts.size() == 1) {
    const at::Tensor flat = self.contiguous().view({self.numel()});
    const std::array<int64_t, 1> d0{0};
    return roll(flat, shifts_sym, d0).view(self.sizes());
  }
  TORCH_CHECK(!shifts.empty(), "`shifts` required");
  TORCH_CHECK(shifts.size() == dims.size(), "shifts and dimensions must align. shifts: ", shifts.size(),
              ", dims:", dims.size());
  at::Tensor out = at::empty_like(self, at::MemoryFormat::Preserve);
  if (self.numel() == 0) return out;
  // Net shift per dim (a dim may repeat), in [0, size).
  std::map<int64_t, int64_t> net;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = at::maybe_wrap_dim(dims[i], self.dim());
    net[d] = net[d] + shifts[i];
  }
  std::vector<std::pair<int64_t, int64_t>> parts;  // (dim, shift)
  for (const auto& [d, s] : net) {
    const int64_t n = self.size(d);
    const int64_t r = ((s % n) + n) % n;
    if (r != 0) parts.emplace_back(d, r);
  }
  // Every combination of the two blocks per rolled dim is one strided copy (Rust).
  const size_t k = parts.size();
  for (size_t mask = 0; mask < (size_t{1} << k); ++mask) {
    at::Tensor dst = out, src = self;
    for (size_t j = 0; j < k; ++j) {
      const auto [d, r] = parts[j];
      const int64_t n = self.size(d);
      if ((mask >> j) & 1) {
        dst = dst.narrow(d, 0, r);  // the last r source entries wrap to the front
        src = src.narrow(d, n - r, r);
      } else {
        dst = dst.narrow(d, r, n - r);
        src = src.narrow(d, 0, n - r);
      }
    }
    dst.copy_(src);
  }
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // cat, compaction
  FOO_IMPL(m, "cat", cat);
  FOO_IMPL(m, "cat.out", cat_out);
  FOO_IMPL(m, "nonzero", nonzero);
  FOO_IMPL(m, "nonzero.out", nonzero_out);
  FOO_IMPL(m, "masked_select", masked_select);
  FOO_IMPL(m, "masked_select.out", masked_select_out);
  FOO_IMPL(m, "masked_scatter_", masked_scatter_);
  // sorting
  FOO_IMPL(m, "sort.stable", sort_stable);
  FOO_IMPL(m, "sort.values_stable", sort_values_stable);
  FOO_IMPL(m, "topk", topk);
  FOO_IMPL(m, "topk.values", topk_values);
  // factories
  FOO_IMPL(m, "arange.start_out", arange_out);
  FOO_IMPL(m, "linspace.out", linspace_out);
  FOO_IMPL(m, "eye.out", eye_out);
  FOO_IMPL(m, "eye.m_out", eye_m_out);
  FOO_IMPL(m, "tril", tril);
  FOO_IMPL(m, "tril_", tril_);
  FOO_IMPL(m, "tril.out", tril_out);
  FOO_IMPL(m, "triu", triu);
  FOO_IMPL(m, "triu_", triu_);
  FOO_IMPL(m, "triu.out", triu_out);
  // movement
  FOO_IMPL(m, "flip", flip);
  FOO_IMPL(m, "roll", roll);
}

}  // namespace foo::ops
