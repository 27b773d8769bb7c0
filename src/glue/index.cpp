// Advanced indexing: index.Tensor, index_put_, index_select, take, gather, scatter*, index_add,
// index_copy, index_fill_. The glue checks arguments (ATen's messages),
// restrides operands to one iteration shape (ATen's AdvancedIndex scheme: the indexed data
// dims get stride 0, index tensors are broadcast) and Rust gathers or scatters
// (foo_index_gather / foo_index_scatter). No arithmetic on tensor data here.
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/IndexingUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/native/ScatterGatherChecks.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <limits>
#include <sstream>
#include <string_view>

#include "common.h"
#include "foo_ffi.h"
#include "index.h"

namespace foo::idx {

void check_index(int32_t status, const char* what, OutOfRange kind, const char* prefix) {
  if (status == FOO_STATUS_INVALID_ARGUMENT) {
    const std::string msg = std::string(prefix) + foo_last_error();
    if (kind == OutOfRange::IndexError) {
      TORCH_CHECK_INDEX(false, msg);
    }
    TORCH_CHECK(false, msg);
  }
  check(status, what);
}

}  // namespace foo::idx

namespace foo::ops {
namespace {

using idx::OutOfRange;

// An int64 index tensor on `device` (int32 and CPU indices are converted).
at::Tensor long_index(const at::Tensor& index, const c10::Device& device) {
  at::Tensor i = index;
  if (i.device() != device) i = i.to(device);
  if (i.scalar_type() != at::kLong) i = i.to(at::kLong);
  return i;
}

// A descriptor over a tensor's memory with its own sizes/strides (restrided views that
// at::as_strided could not express, e.g. stride 0 over an empty dim).
struct View {
  void* data = nullptr;
  int32_t dtype = 0;
  int32_t device = -1;
  std::vector<int64_t> sizes, strides;

  FooTensor desc() const {
    FooTensor d{};
    d.data = data;
    d.sizes = sizes.data();
    d.strides = strides.data();
    d.ndim = static_cast<int32_t>(sizes.size());
    d.dtype = dtype;
    d.device = device;
    return d;
  }
};

// Stands in for the data of an empty tensor viewed with a non-empty shape: only reachable
// through an index, and every index into an empty dim is out of range (Rust checks first).
alignas(16) char g_empty[16];

View view(const at::Tensor& t, c10::IntArrayRef sizes, std::vector<int64_t> strides) {
  View v;
  v.data = t.numel() == 0 ? static_cast<void*>(g_empty) : const_cast<void*>(t.const_data_ptr());
  v.dtype = static_cast<int32_t>(t.scalar_type());
  v.device = t.device().is_privateuseone() ? t.device().index() : -1;
  v.sizes.assign(sizes.begin(), sizes.end());
  v.strides = std::move(strides);
  return v;
}

// t's strides over `n` dims, 0 at `zero_dim` and beyond t's rank.
std::vector<int64_t> strides_of(const at::Tensor& t, size_t n, int64_t zero_dim) {
  std::vector<int64_t> s(n, 0);
  for (size_t d = 0; d < n; ++d) {
    if (static_cast<int64_t>(d) < t.dim() && static_cast<int64_t>(d) != zero_dim) s[d] = t.stride(d);
  }
  return s;
}

// Zeros over `n` dims except `stride` at `dim` (a 1-D index broadcast along one dim).
std::vector<int64_t> only_dim(size_t n, int64_t dim, int64_t stride) {
  std::vector<int64_t> s(n, 0);
  if (dim >= 0 && static_cast<size_t>(dim) < n) s[dim] = stride;
  return s;
}

FooIndexer make_indexer(const View& index, int64_t size, int64_t stride, int64_t dim) {
  FooIndexer i{};
  i.index = index.desc();
  i.size = size;
  i.stride = stride;
  i.dim = dim;
  return i;
}

int64_t size_or1(const at::Tensor& t, int64_t dim) { return t.dim() == 0 ? 1 : t.size(dim); }
int64_t stride_or0(const at::Tensor& t, int64_t dim) { return t.dim() == 0 ? 0 : t.stride(dim); }

void gather_call(const at::Tensor& out, const View& src, const View& index, int64_t size, int64_t stride, int64_t dim,
                 int32_t mode, OutOfRange kind, const char* what, const char* prefix = "") {
  const c10::DeviceGuard guard(out.device());
  const FooTensor o = describe(out), s = src.desc();
  const FooIndexer i = make_indexer(index, size, stride, dim);
  idx::check_index(foo_index_gather(&o, &s, &i, 1, mode), what, kind, prefix);
}

void scatter_call(const View& dst, const View& src, const View& index, int64_t size, int64_t stride, int64_t dim,
                  int32_t mode, int32_t reduce, const std::optional<c10::Scalar>& alpha, OutOfRange kind,
                  const char* what, const char* prefix = "") {
  const FooTensor d = dst.desc(), s = src.desc();
  const FooIndexer i = make_indexer(index, size, stride, dim);
  FooScalar a{};
  if (alpha) a = to_ffi(*alpha);
  idx::check_index(foo_index_scatter(&d, &s, &i, 1, mode, reduce, alpha ? &a : nullptr), what, kind, prefix);
}

// ---- index.Tensor / index_put_ --------------------------------------------------------------

// ATen's AdvancedIndex, as descriptors: the iteration shape, self's data restrided to it, and
// every index tensor broadcast to it.
struct Advanced {
  at::Tensor src;  // self, possibly permuted so that the indexed dims are adjacent
  std::vector<int64_t> shape;
  std::vector<int64_t> src_strides;
  std::vector<at::Tensor> indices;  // int64, on self's device, broadcast together
  std::vector<View> index_views;
  std::vector<int64_t> sizes, strides;

  std::vector<FooIndexer> indexers() const {
    std::vector<FooIndexer> r;
    for (size_t k = 0; k < index_views.size(); ++k) {
      r.push_back(make_indexer(index_views[k], sizes[k], strides[k], static_cast<int64_t>(k)));
    }
    return r;
  }
};

std::string shapes_of(const std::vector<at::Tensor>& ts) {
  std::ostringstream os;
  bool first = true;
  for (const auto& t : ts) {
    if (!t.defined()) continue;
    if (!first) os << ", ";
    os << t.sizes();
    first = false;
  }
  return os.str();
}

Advanced advanced(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& orig) {
  at::native::checkIndexTensorTypes(orig, /*allow_int=*/true);
  TORCH_CHECK_INDEX(orig.size() <= static_cast<size_t>(self.dim()), "too many indices for tensor of dimension ",
                    self.dim(), " (got ", orig.size(), ")");
  // Masks become nonzero() indices (our nonzero); CPU indices move to the device.
  auto indices = at::native::expandTensors(self, orig, /*ensure_same_device=*/true);
  try {
    indices = at::expand_outplace(indices);
  } catch (std::exception&) {
    TORCH_CHECK_INDEX(false, "shape mismatch: indexing tensors could not be broadcast together with shapes ",
                      shapes_of(indices));
  }
  while (indices.size() < static_cast<size_t>(self.dim())) indices.emplace_back();
  Advanced a;
  a.src = self;
  if (!at::native::hasContiguousSubspace(indices)) {
    std::tie(a.src, indices) = at::native::transposeToFront(a.src, indices);
  }
  int64_t before = 0, after = 0, indexed = 0;
  std::vector<int64_t> replacement;
  for (size_t d = 0; d < indices.size(); ++d) {
    if (!indices[d].defined()) {
      (indexed == 0 ? before : after)++;
    } else {
      ++indexed;
      replacement.assign(indices[d].sizes().begin(), indices[d].sizes().end());
      a.sizes.push_back(a.src.size(d));
      a.strides.push_back(a.src.stride(d));
    }
  }
  const bool empty_dim = std::find(a.sizes.begin(), a.sizes.end(), 0) != a.sizes.end();
  const bool empty_result = std::find(replacement.begin(), replacement.end(), 0) != replacement.end();
  TORCH_CHECK_INDEX(!empty_dim || empty_result, "index is out of bounds for dimension with size 0");
  for (int64_t d = 0; d < before; ++d) {
    a.shape.push_back(a.src.size(d));
    a.src_strides.push_back(a.src.stride(d));
  }
  for (int64_t s : replacement) {
    a.shape.push_back(s);
    a.src_strides.push_back(0);
  }
  for (int64_t d = before + indexed; d < a.src.dim(); ++d) {
    a.shape.push_back(a.src.size(d));
    a.src_strides.push_back(a.src.stride(d));
  }
  for (auto& index : indices) {
    if (!index.defined()) continue;
    at::Tensor i = long_index(index, self.device());
    std::vector<int64_t> st(before, 0);
    for (int64_t d = 0; d < i.dim(); ++d) st.push_back(i.stride(d));
    st.resize(a.shape.size(), 0);
    a.index_views.push_back(view(i, a.shape, std::move(st)));
    a.indices.push_back(std::move(i));
  }
  return a;
}

void index_into(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices, at::Tensor& out,
                bool resize) {
  check_supported_dtype(self.scalar_type(), "index");
  const Advanced a = advanced(self, indices);
  if (resize) {
    TORCH_CHECK(out.scalar_type() == self.scalar_type(), "index_out: self (", self.scalar_type(), ") and result (",
                out.scalar_type(), ") must have the same scalar type");
    at::native::resize_output(out, a.shape);
    at::assert_no_internal_overlap(out);
    at::assert_no_overlap(out, self);
    for (const auto& i : a.indices) at::assert_no_overlap(out, i);
  }
  if (out.numel() == 0) return;
  const View src = view(a.src, a.shape, a.src_strides);
  const c10::DeviceGuard guard(self.device());
  const FooTensor o = describe(out), s = src.desc();
  const auto ix = a.indexers();
  idx::check_index(foo_index_gather(&o, &s, ix.data(), static_cast<int32_t>(ix.size()), FOO_INDEX_BOUNDS_INDEX), "index",
                   OutOfRange::IndexError);
}

// ---- scatter helpers ---------------------------------------------------------------------------

int32_t scatter_reduce_code(c10::string_view reduce) {
  if (reduce == "add") return FOO_INDEX_REDUCE_ADD;
  if (reduce == "multiply") return FOO_INDEX_REDUCE_MUL;
  TORCH_CHECK(false, "reduce argument must be either add or multiply.");
}

// self[.., index[..], ..] (reduce)= src (or value) along `dim`, in place.
void scatter_impl(const at::Tensor& self, int64_t dim, const at::Tensor& index, const std::optional<at::Tensor>& src,
                  const std::optional<c10::Scalar>& value, int32_t reduce, const char* name) {
  check_supported_dtype(self.scalar_type(), name);
  dim = at::maybe_wrap_dim(dim, self.dim());
  at::native::scatter_gather_dtype_check(name, self, index, src);
  at::native::scatter_shape_check(self, dim, index, src);
  if (index.numel() == 0) return;
  at::assert_no_internal_overlap(self);
  at::assert_no_overlap(self, index);
  const at::Tensor i = long_index(index, self.device());
  at::Tensor s;
  std::vector<int64_t> s_strides;
  if (src) {
    s = *src;
    TORCH_CHECK(s.device() == self.device(), name, "(): expected src on ", self.device(), ", got ", s.device());
    if (at::get_overlap_status(self, s) != at::MemOverlapStatus::No) s = s.clone();
    s_strides = strides_of(s, i.dim(), -1);
  } else {
    s = at::full({}, *value, self.options());
    s_strides.assign(i.dim(), 0);
  }
  const c10::DeviceGuard guard(self.device());
  scatter_call(view(self, i.sizes(), strides_of(self, i.dim(), dim)), view(s, i.sizes(), std::move(s_strides)),
               view(i, i.sizes(), strides_of(i, i.dim(), -1)), size_or1(self, dim), stride_or0(self, dim), dim,
               FOO_INDEX_BOUNDS_STRICT, reduce, std::nullopt, OutOfRange::RuntimeError, name);
}

at::Tensor& into_out(const at::Tensor& self, at::Tensor& out, const char* name) {
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), name, "(): Expected out tensor to have dtype ",
              self.scalar_type(), ", but got ", out.scalar_type(), " instead");
  at::native::resize_output(out, self.sizes());
  if (!out.is_same(self)) out.copy_(self);
  return out;
}

c10::Scalar reduce_identity(at::ScalarType t, c10::string_view reduce) {
  const bool lowest = reduce == "amax";
  if (reduce == "sum" || reduce == "mean") return c10::Scalar(0);
  if (reduce == "prod") return c10::Scalar(1);
  if (at::isFloatingType(t)) {
    const double inf = std::numeric_limits<double>::infinity();
    return c10::Scalar(lowest ? -inf : inf);
  }
  switch (t) {
    case at::kBool: return c10::Scalar(!lowest);
    case at::kByte: return c10::Scalar(lowest ? int64_t{0} : int64_t{255});
    case at::kChar: return c10::Scalar(lowest ? int64_t{-128} : int64_t{127});
    case at::kShort: return c10::Scalar(lowest ? int64_t{-32768} : int64_t{32767});
    case at::kInt:
      return c10::Scalar(lowest ? int64_t{std::numeric_limits<int32_t>::min()} : int64_t{std::numeric_limits<int32_t>::max()});
    case at::kUInt16: return c10::Scalar(lowest ? int64_t{0} : int64_t{65535});
    case at::kUInt32: return c10::Scalar(lowest ? int64_t{0} : int64_t{std::numeric_limits<uint32_t>::max()});
    case at::kUInt64: return c10::Scalar(lowest ? uint64_t{0} : std::numeric_limits<uint64_t>::max());
    default: return c10::Scalar(lowest ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max());
  }
}

void scatter_reduce_two_impl(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                             c10::string_view reduce, bool include_self) {
  // The mean's count division has no complex kernel here; the CPU has one.
  if (reduce == "mean" && self.is_complex()) needs_fallback("scatter_reduce: no foo kernel for a complex mean");
  int32_t code = 0;
  if (reduce == "sum" || reduce == "mean") {
    code = FOO_INDEX_REDUCE_ADD;
  } else if (reduce == "prod") {
    code = FOO_INDEX_REDUCE_MUL;
  } else if (reduce == "amax") {
    code = FOO_INDEX_REDUCE_MAX;
  } else if (reduce == "amin") {
    code = FOO_INDEX_REDUCE_MIN;
  } else {
    TORCH_CHECK(false, "reduce argument must be either sum, prod, mean, amax or amin, got ", reduce);
  }
  dim = at::maybe_wrap_dim(dim, self.dim());
  at::native::scatter_gather_dtype_check("scatter_reduce", self, index, src);
  at::native::scatter_shape_check(self, dim, index, src);
  if (index.numel() == 0) return;
  if (!include_self) {
    // As ATen: the scattered-to elements start from the reduction's identity.
    scatter_impl(self, dim, index, std::nullopt, reduce_identity(self.scalar_type(), reduce), FOO_INDEX_REDUCE_ASSIGN,
                 "scatter_reduce");
  }
  scatter_impl(self, dim, index, src, std::nullopt, code, "scatter_reduce");
  if (reduce == "mean") {
    at::Tensor count = include_self ? at::ones_like(self) : at::zeros_like(self);
    scatter_impl(count, dim, index, std::nullopt, c10::Scalar(1), FOO_INDEX_REDUCE_ADD, "scatter_reduce");
    count.clamp_min_(1);
    if (at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type())) {
      self.div_(count);
    } else {
      self.div_(count, "floor");
    }
  }
}

// ---- index_add / index_copy / index_fill ---------------------------------------------------

// Checks shared by index_add and index_copy (source's slices match self's).
void check_index_source(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                        const char* name) {
  const int64_t n = index.numel();
  const int64_t src_n = source.dim() == 0 ? 1 : source.size(dim);
  if (std::string_view(name) == "index_add_") {
    TORCH_CHECK(n == src_n, name, "(): Number of indices (", n, ") should be equal to source.size(dim): (", src_n,
                "), for dim: ", dim);
  }
  TORCH_CHECK_INDEX(n == src_n, name, "(): Number of indices (", n, ") should be equal to source.size(dim) (", src_n,
                    ")");
  // index_copy lets a 0-d and a 1-d operand stand for each other; index_add wants equal ranks.
  const bool scalars = std::string_view(name) != "index_add_" && self.dim() <= 1 && source.dim() <= 1;
  bool match = scalars || self.dim() == source.dim();
  for (int64_t d = 0; match && !scalars && d < self.dim(); ++d) {
    if (d != dim && self.size(d) != source.size(d)) match = false;
  }
  TORCH_CHECK(match, name, "(): source tensor shape must match self tensor shape, excluding the specified dimension. ",
              "Got self.shape = ", self.sizes(), " source.shape = ", source.sizes());
}

// self[.., index[j], ..] (reduce)= source[.., j, ..] along `dim`.
void index_reduce_impl(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                       int32_t reduce, const std::optional<c10::Scalar>& alpha, OutOfRange kind, const char* name,
                       const char* prefix, int32_t bounds = FOO_INDEX_BOUNDS_STRICT) {
  if (self.numel() == 0 && index.numel() == 0) return;
  const at::Tensor i = long_index(index, self.device());
  at::Tensor src = source;
  if (at::get_overlap_status(self, src) != at::MemOverlapStatus::No) src = src.clone();
  // Iterate over source's shape (a 0-d source of a 1-d self counts as one slice).
  std::vector<int64_t> shape(src.sizes().begin(), src.sizes().end());
  if (self.dim() == 1 && src.dim() == 0) shape = {1};
  if (shape.empty() && self.dim() == 0) shape = {};
  const size_t n = shape.size();
  if (c10::multiply_integers(shape) == 0) return;
  const c10::DeviceGuard guard(self.device());
  scatter_call(view(self, shape, strides_of(self, n, dim)), view(src, shape, strides_of(src, n, -1)),
               view(i, shape, only_dim(n, dim, i.dim() == 0 ? 0 : i.stride(0))), size_or1(self, dim),
               stride_or0(self, dim), dim, bounds, reduce, alpha, kind, name, prefix);
}

void index_add_impl(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                    const c10::Scalar& alpha) {
  check_supported_dtype(self.scalar_type(), "index_add_");
  dim = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_add_(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_add_(): Expected dtype int32/int64 for index");
  TORCH_CHECK(self.scalar_type() == source.scalar_type(), "index_add_(): self (", self.scalar_type(),
              ") and source (", source.scalar_type(), ") must have the same scalar type");
  TORCH_CHECK(dim == 0 || dim < source.dim(), "index_add_(): Indexing dim ", dim,
              " is out of bounds of the source tensor with dim ", source.dim());
  check_index_source(self, dim, index, source, "index_add_");
  at::assert_no_internal_overlap(self);
  at::assert_no_overlap(self, index);
  // The CPU returns before reading the indices when self has more than one dimension and it or
  // the index is empty (an out-of-range index into an empty self is no error there).
  if (self.dim() > 1 && (index.numel() == 0 || self.numel() == 0)) return;
  // The CPU's errors: along the first or last dim of a self of rank > 1, with alpha 1, it runs
  // scatter_add (a RuntimeError naming the index and dim); otherwise its loop's IndexError
  // "index out of range in self" (measured over ranks 2-26, every dim, alpha 1/2/2.5/0).
  // scatter_add adds the source as it is; the loop multiplies it by alpha first, which for
  // complex numbers is no identity even at 1 (nan + 0i becomes nan + nan i).
  const bool scatter = self.dim() > 1 && (dim == 0 || dim == self.dim() - 1) && alpha.equal(1);
  index_reduce_impl(self, dim, index, source, FOO_INDEX_REDUCE_ADD, scatter ? std::nullopt : std::optional(alpha),
                    scatter ? OutOfRange::RuntimeError : OutOfRange::IndexError, "index_add_", "",
                    scatter ? FOO_INDEX_BOUNDS_STRICT : FOO_INDEX_BOUNDS_SELECT);
}

void index_copy_impl(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source) {
  check_supported_dtype(self.scalar_type(), "index_copy_");
  dim = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK_INDEX(index.dim() < 2, "index_copy_(): Index should have dimension 1 or 0 (got ", index.dim(), ")");
  TORCH_CHECK(index.scalar_type() == at::kLong, "index_copy_(): Expected a long tensor for index, but got ",
              index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(),
              "index_copy_(): self and source expected to have the same dtype, but got (self) ", self.scalar_type(),
              " and (source) ", source.scalar_type());
  check_index_source(self, dim, index, source, "index_copy_");
  at::assert_no_internal_overlap(self);
  at::assert_no_overlap(self, index);
  index_reduce_impl(self, dim, index, source, FOO_INDEX_REDUCE_ASSIGN, std::nullopt, OutOfRange::IndexError, "index_copy_",
                    "index_copy_(): ");
}

// ---- index.Tensor / index_put_ --------------------------------------------------------------

at::Tensor index(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  at::Tensor out = at::empty({0}, self.options());
  index_into(self, indices, out, /*resize=*/true);
  return out;
}

at::Tensor& index_out(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices, at::Tensor& out) {
  index_into(self, indices, out, /*resize=*/true);
  return out;
}

at::Tensor& index_put_impl_(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                            const at::Tensor& values, bool accumulate, bool /*unsafe*/) {
  check_supported_dtype(self.scalar_type(), "index_put_");
  TORCH_CHECK_INDEX(indices.size() <= static_cast<size_t>(self.dim()), "too many indices for tensor of dimension ",
                    self.dim(), " (got ", indices.size(), ")");
  if (at::has_internal_overlap(self) == at::MemOverlap::Yes) {
    // As the CPU: allowed with a warning (the kernel then writes on one thread, in order).
    TORCH_WARN("Use of index_put_ on expanded tensors is deprecated. Please clone() the tensor before performing "
               "this operation. This also applies to advanced indexing e.g. tensor[indices] = tensor");
  }
  at::Tensor value = values;
  if (value.device() != self.device() && value.numel() == 1 && value.dim() == 0) value = value.to(self.device());
  TORCH_CHECK(value.device() == self.device(), "index_put_: expected value on ", self.device(), ", got ",
              value.device());
  TORCH_CHECK(value.scalar_type() == self.scalar_type(),
              "Index put requires the source and destination dtypes match, got ", self.scalar_type(),
              " for the destination and ", value.scalar_type(), " for the source.");
  at::assert_no_overlap(self, value);
  for (const std::optional<at::Tensor> i : indices) {
    if (i.has_value() && i->defined() && i->device() == self.device()) at::assert_no_overlap(self, *i);
  }
  const Advanced a = advanced(self, indices);
  TORCH_CHECK(at::is_expandable_to(value.sizes(), a.shape), "shape mismatch: value tensor of shape ", value.sizes(),
              " cannot be broadcast to indexing result of shape ", c10::IntArrayRef(a.shape));
  if (c10::multiply_integers(a.shape) == 0) return self;
  const at::Tensor v = value.expand(a.shape);
  const View dst = view(a.src, a.shape, a.src_strides);
  const c10::DeviceGuard guard(self.device());
  const FooTensor d = dst.desc(), s = describe(v);
  const auto ix = a.indexers();
  idx::check_index(foo_index_scatter(&d, &s, ix.data(), static_cast<int32_t>(ix.size()), FOO_INDEX_BOUNDS_INDEX,
                                     accumulate ? FOO_INDEX_REDUCE_ADD : FOO_INDEX_REDUCE_ASSIGN, nullptr),
                   "index_put_", OutOfRange::IndexError);
  return self;
}

// ---- index_select / take / gather ----------------------------------------------------------

// The CPU's bound check of index_select's dim-1 and empty-self paths: a RuntimeError naming the
// first index outside [0, size).
void check_select_bounds(const at::Tensor& index, int64_t size) {
  const at::Tensor ic = index.to(at::kCPU, at::kLong).reshape(-1);
  const int64_t* p = ic.const_data_ptr<int64_t>();
  for (int64_t k = 0; k < ic.numel(); ++k) {
    TORCH_CHECK(p[k] >= 0 && p[k] < size, "INDICES element is out of DATA bounds, id=", p[k], " axis_dim=", size);
  }
}

at::Tensor& index_select_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, at::Tensor& out) {
  check_supported_dtype(self.scalar_type(), "index_select");
  dim = at::maybe_wrap_dim(dim, self.dim());
  const int64_t n = index.numel();
  TORCH_CHECK_INDEX(index.dim() <= 1, "index_select(): Index is supposed to be a vector");
  TORCH_CHECK(!(self.dim() == 0 && n != 1), "index_select(): Index to scalar can have only 1 value, got ", n,
              " value(s)");
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "index_select(): Expected dtype int32 or int64 for index");
  TORCH_CHECK(self.scalar_type() == out.scalar_type(), "index_select(): self and result must have the same scalar type");
  // The CPU's check on its matrix path (rank 2 and up); below, the index check says out of range.
  TORCH_CHECK(self.dim() <= 1 || self.size(dim) > 0 || n == 0, "index_select(): self indexing axis dim should be positive");
  // Overlap is checked on `out` as given, before the resize, as the CPU does (an expanded out= is refused).
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  at::assert_no_overlap(out, index);
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
  if (self.dim() > 0) shape[dim] = n;
  at::native::resize_output(out, shape);
  // As the CPU: an empty self of rank 2 and up still has its indices checked (no elements are
  // read, so the kernel below would not see them).
  if (self.dim() > 1 && self.numel() == 0 && n > 0) check_select_bounds(index, self.size(dim));
  if (out.numel() == 0) return out;
  const at::Tensor i = long_index(index, self.device());
  const size_t nd = shape.size();
  try {
    gather_call(out, view(self, shape, strides_of(self, nd, dim)),
                view(i, shape, only_dim(nd, dim, i.dim() == 0 ? 0 : i.stride(0))), size_or1(self, dim),
                stride_or0(self, dim), dim, FOO_INDEX_BOUNDS_SELECT, OutOfRange::IndexError, "index_select");
  } catch (const c10::IndexError&) {
    // The CPU's kernel for dim 1 of a matrix or higher reports the index as a RuntimeError.
    if (self.dim() > 1 && dim == 1) check_select_bounds(index, self.size(dim));
    throw;
  }
  return out;
}

at::Tensor index_select(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
  at::Tensor out = at::empty({0}, self.options());
  return index_select_out(self, dim, index, out);
}

at::Tensor& take_out(const at::Tensor& self, const at::Tensor& index, at::Tensor& out) {
  check_supported_dtype(self.scalar_type(), "take");
  TORCH_CHECK(index.scalar_type() == at::kLong, "take(): Expected a long tensor for index, but got ",
              index.scalar_type());
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "take(): self and out expected to have the same dtype, but got self.dtype = ",
              self.scalar_type(), " and out.dtype = ", out.scalar_type());
  TORCH_CHECK_INDEX(!(self.numel() == 0 && index.numel() != 0), "take(): tried to take from an empty tensor");
  at::native::resize_output(out, index.sizes());
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  at::assert_no_overlap(out, index);
  if (out.numel() == 0) return out;
  const at::Tensor flat = self.reshape({-1});
  const at::Tensor i = long_index(index, self.device());
  const size_t nd = static_cast<size_t>(i.dim());
  gather_call(out, view(flat, i.sizes(), std::vector<int64_t>(nd, 0)), view(i, i.sizes(), strides_of(i, nd, -1)),
              flat.numel(), flat.stride(0), 0, FOO_INDEX_BOUNDS_TAKE, OutOfRange::IndexError, "take");
  return out;
}

at::Tensor take(const at::Tensor& self, const at::Tensor& index) {
  at::Tensor out = at::empty({0}, self.options());
  return take_out(self, index, out);
}

at::Tensor& put_(at::Tensor& self, const at::Tensor& index, const at::Tensor& source, bool accumulate) {
  check_supported_dtype(self.scalar_type(), "put_");
  TORCH_CHECK(index.scalar_type() == at::kLong, "put_(): Expected a long tensor for index, but got ",
              index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(),
              "put_(): self and source expected to have the same dtype, but got self.dtype = ", self.scalar_type(),
              " and source.dtype = ", source.scalar_type());
  TORCH_CHECK_INDEX(source.numel() == index.numel(),
                    "put_(): Expected source and index to have the same number of elements, but got source.numel() = ",
                    source.numel(), ", index.numel() = ", index.numel());
  TORCH_CHECK_INDEX(!(self.numel() == 0 && index.numel() != 0), "put_(): Tried to put elements into an empty tensor");
  at::assert_no_internal_overlap(self);
  at::assert_no_overlap(self, index);
  at::assert_no_overlap(self, source);
  if (index.numel() == 0) return self;
  // Indices address self in row-major order: work on a contiguous buffer when self is strided.
  at::Tensor flat = self.is_contiguous() ? self.view({-1}) : self.contiguous().view({-1});
  const at::Tensor i = long_index(index, self.device());
  const at::Tensor src = source.device() == self.device() ? source : source.to(self.device());
  const size_t nd = static_cast<size_t>(i.dim());
  {
    const c10::DeviceGuard guard(self.device());
    scatter_call(view(flat, i.sizes(), std::vector<int64_t>(nd, 0)), view(src.reshape(i.sizes()), i.sizes(), strides_of(src.reshape(i.sizes()), nd, -1)),
                 view(i, i.sizes(), strides_of(i, nd, -1)), flat.numel(), 1, 0, FOO_INDEX_BOUNDS_TAKE,
                 accumulate ? FOO_INDEX_REDUCE_ADD : FOO_INDEX_REDUCE_ASSIGN, std::nullopt, OutOfRange::IndexError, "put_");
  }
  if (!self.is_contiguous()) self.copy_(flat.view(self.sizes()));
  return self;
}

at::Tensor& gather_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool /*sparse_grad*/,
                       at::Tensor& out) {
  check_supported_dtype(self.scalar_type(), "gather");
  dim = at::maybe_wrap_dim(dim, self.dim());
  // The out= dtype first, as the CPU's structured kernel checks it when it sets the output up.
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "Expected out tensor to have dtype ", self.dtype(),
              ", but got ", out.dtype(), " instead");
  // As the CPU: an empty index skips the shape check (gather(x1d, 0, zeros(2, 0)) is valid).
  if (index.numel() != 0) at::native::gather_shape_check(self, dim, index);
  at::native::scatter_gather_dtype_check("gather", self, index, out);
  at::native::resize_output(out, index.sizes());
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  at::assert_no_partial_overlap(out, index);
  if (index.numel() == 0) return out;
  const at::Tensor i = long_index(index, self.device());
  const size_t nd = static_cast<size_t>(i.dim());
  gather_call(out, view(self, i.sizes(), strides_of(self, nd, dim)), view(i, i.sizes(), strides_of(i, nd, -1)),
              size_or1(self, dim), stride_or0(self, dim), dim, FOO_INDEX_BOUNDS_STRICT, OutOfRange::RuntimeError, "gather");
  return out;
}

at::Tensor gather(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad) {
  at::Tensor out = at::empty(index.sizes(), self.options());
  return gather_out(self, dim, index, sparse_grad, out);
}

// ---- scatter ---------------------------------------------------------------------------------

at::Tensor& scatter_src_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
  scatter_impl(self, dim, index, src, std::nullopt, FOO_INDEX_REDUCE_ASSIGN, "scatter");
  return self;
}
at::Tensor scatter_src(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
  at::Tensor out = self.clone(at::MemoryFormat::Contiguous);
  return scatter_src_(out, dim, index, src);
}
at::Tensor& scatter_src_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                            at::Tensor& out) {
  return scatter_src_(into_out(self, out, "scatter"), dim, index, src);
}

at::Tensor& scatter_value_(at::Tensor& self, int64_t dim, const at::Tensor& index, const c10::Scalar& value) {
  scatter_impl(self, dim, index, std::nullopt, value, FOO_INDEX_REDUCE_ASSIGN, "scatter");
  return self;
}
at::Tensor scatter_value(const at::Tensor& self, int64_t dim, const at::Tensor& index, const c10::Scalar& value) {
  at::Tensor out = self.clone(at::MemoryFormat::Contiguous);
  return scatter_value_(out, dim, index, value);
}
at::Tensor& scatter_value_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const c10::Scalar& value,
                              at::Tensor& out) {
  return scatter_value_(into_out(self, out, "scatter"), dim, index, value);
}

at::Tensor& scatter_reduce_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                            c10::string_view reduce) {
  scatter_impl(self, dim, index, src, std::nullopt, scatter_reduce_code(reduce), "scatter");
  return self;
}
at::Tensor scatter_reduce(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                          c10::string_view reduce) {
  at::Tensor out = self.clone(at::MemoryFormat::Contiguous);
  return scatter_reduce_(out, dim, index, src, reduce);
}
at::Tensor& scatter_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                               c10::string_view reduce, at::Tensor& out) {
  return scatter_reduce_(into_out(self, out, "scatter"), dim, index, src, reduce);
}

at::Tensor& scatter_value_reduce_(at::Tensor& self, int64_t dim, const at::Tensor& index, const c10::Scalar& value,
                                  c10::string_view reduce) {
  scatter_impl(self, dim, index, std::nullopt, value, scatter_reduce_code(reduce), "scatter");
  return self;
}
at::Tensor scatter_value_reduce(const at::Tensor& self, int64_t dim, const at::Tensor& index, const c10::Scalar& value,
                                c10::string_view reduce) {
  at::Tensor out = self.clone(at::MemoryFormat::Contiguous);
  return scatter_value_reduce_(out, dim, index, value, reduce);
}
at::Tensor& scatter_value_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index,
                                     const c10::Scalar& value, c10::string_view reduce, at::Tensor& out) {
  return scatter_value_reduce_(into_out(self, out, "scatter"), dim, index, value, reduce);
}

at::Tensor& scatter_add_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
  scatter_impl(self, dim, index, src, std::nullopt, FOO_INDEX_REDUCE_ADD, "scatter_add");
  return self;
}
at::Tensor scatter_add(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
  at::Tensor out = self.clone(at::MemoryFormat::Contiguous);
  return scatter_add_(out, dim, index, src);
}
at::Tensor& scatter_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                            at::Tensor& out) {
  return scatter_add_(into_out(self, out, "scatter_add"), dim, index, src);
}

at::Tensor& scatter_reduce_two_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                c10::string_view reduce, bool include_self) {
  scatter_reduce_two_impl(self, dim, index, src, reduce, include_self);
  return self;
}
at::Tensor scatter_reduce_two(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                              c10::string_view reduce, bool include_self) {
  at::Tensor out = self.clone(at::MemoryFormat::Contiguous);
  return scatter_reduce_two_(out, dim, index, src, reduce, include_self);
}
at::Tensor& scatter_reduce_two_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                                   c10::string_view reduce, bool include_self, at::Tensor& out) {
  return scatter_reduce_two_(into_out(self, out, "scatter_reduce"), dim, index, src, reduce, include_self);
}

// ---- index_add / index_copy / index_fill ---------------------------------------------------

at::Tensor& index_add_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                       const c10::Scalar& alpha) {
  index_add_impl(self, dim, index, source, alpha);
  return self;
}
at::Tensor index_add(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                     const c10::Scalar& alpha) {
  at::Tensor out = self.clone(at::MemoryFormat::Contiguous);
  return index_add_(out, dim, index, source, alpha);
}
at::Tensor& index_add_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                          const c10::Scalar& alpha, at::Tensor& out) {
  return index_add_(into_out(self, out, "index_add"), dim, index, source, alpha);
}

at::Tensor& index_copy_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source) {
  index_copy_impl(self, dim, index, source);
  return self;
}
at::Tensor index_copy(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source) {
  at::Tensor out = self.clone(at::MemoryFormat::Contiguous);
  return index_copy_(out, dim, index, source);
}
at::Tensor& index_copy_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                           at::Tensor& out) {
  return index_copy_(into_out(self, out, "index_copy"), dim, index, source);
}

at::Tensor& index_fill_scalar_(at::Tensor& self, int64_t dim, const at::Tensor& index, const c10::Scalar& value) {
  check_supported_dtype(self.scalar_type(), "index_fill_");
  TORCH_CHECK(self.is_complex() || !value.isComplex(),
              "index_fill_(): Converting complex Scalar to non-complex type is not supported");
  check_scalar_fits(value, self.scalar_type());
  dim = at::maybe_wrap_dim(dim, self.dim());
  TORCH_CHECK_INDEX(index.dim() <= 1, "Index has to be a vector/scalar");
  TORCH_CHECK_INDEX(index.scalar_type() == at::kLong, "index_fill_(): Expected dtype int64 for index.");
  // CUDA's kernel iterates over `index` restrided to self's shape: a CPU index is never a scalar.
  check_same_device(self, {index}, false);
  at::assert_no_internal_overlap(self);
  at::assert_no_overlap(self, index);
  if (self.numel() == 0 || index.numel() == 0) return self;
  if (self.dim() == 0 && index.numel() > 1) {
    // The kernel below fills a 0-d self through index[0] only; the CPU checks every index
    // against the one element (0 or -1).
    const at::Tensor ix = index.reshape({-1}).cpu();
    const auto* p = ix.const_data_ptr<int64_t>();
    for (int64_t k = 0; k < ix.numel(); ++k) {
      TORCH_CHECK_INDEX(p[k] == 0 || p[k] == -1, "index ", p[k], " is out of bounds for dimension 0 with size 1");
    }
  }
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end());
  if (self.dim() > 0) shape[dim] = index.numel();
  const size_t nd = shape.size();
  const at::Tensor i = long_index(index, self.device());
  const at::Tensor v = at::full({}, value, self.options());
  const c10::DeviceGuard guard(self.device());
  scatter_call(view(self, shape, strides_of(self, nd, dim)), view(v, shape, std::vector<int64_t>(nd, 0)),
               view(i, shape, only_dim(nd, dim, i.dim() == 0 ? 0 : i.stride(0))), size_or1(self, dim),
               stride_or0(self, dim), dim, FOO_INDEX_BOUNDS_INDEX, FOO_INDEX_REDUCE_ASSIGN, std::nullopt, OutOfRange::IndexError,
               "index_fill_");
  return self;
}

at::Tensor& index_fill_tensor_(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "index_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  return index_fill_scalar_(self, dim, index, value.item());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // advanced indexing
  FOO_IMPL(m, "index.Tensor", index);
  FOO_IMPL(m, "index.Tensor_out", index_out);
  FOO_IMPL(m, "_index_put_impl_", index_put_impl_);
  FOO_IMPL(m, "index_select", index_select);
  FOO_IMPL(m, "index_select.out", index_select_out);
  FOO_IMPL(m, "take", take);
  FOO_IMPL(m, "take.out", take_out);
  FOO_IMPL(m, "put_", put_);
  FOO_IMPL(m, "gather", gather);
  FOO_IMPL(m, "gather.out", gather_out);
  FOO_IMPL(m, "scatter.src", scatter_src);
  FOO_IMPL(m, "scatter_.src", scatter_src_);
  FOO_IMPL(m, "scatter.src_out", scatter_src_out);
  FOO_IMPL(m, "scatter.value", scatter_value);
  FOO_IMPL(m, "scatter_.value", scatter_value_);
  FOO_IMPL(m, "scatter.value_out", scatter_value_out);
  FOO_IMPL(m, "scatter.reduce", scatter_reduce);
  FOO_IMPL(m, "scatter_.reduce", scatter_reduce_);
  FOO_IMPL(m, "scatter.reduce_out", scatter_reduce_out);
  FOO_IMPL(m, "scatter.value_reduce", scatter_value_reduce);
  FOO_IMPL(m, "scatter_.value_reduce", scatter_value_reduce_);
  FOO_IMPL(m, "scatter.value_reduce_out", scatter_value_reduce_out);
  FOO_IMPL(m, "scatter_add", scatter_add);
  FOO_IMPL(m, "scatter_add_", scatter_add_);
  FOO_IMPL(m, "scatter_add.out", scatter_add_out);
  FOO_IMPL(m, "scatter_reduce.two", scatter_reduce_two);
  FOO_IMPL(m, "scatter_reduce_.two", scatter_reduce_two_);
  FOO_IMPL(m, "scatter_reduce.two_out", scatter_reduce_two_out);
  FOO_IMPL(m, "index_add", index_add);
  FOO_IMPL(m, "index_add_", index_add_);
  FOO_IMPL(m, "index_add.out", index_add_out);
  FOO_IMPL(m, "index_copy", index_copy);
  FOO_IMPL(m, "index_copy_", index_copy_);
  FOO_IMPL(m, "index_copy.out", index_copy_out);
  FOO_IMPL(m, "index_fill_.int_Scalar", index_fill_scalar_);
  FOO_IMPL(m, "index_fill_.int_Tensor", index_fill_tensor_);
}

}  // namespace foo::ops
