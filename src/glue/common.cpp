#include "common.h"

#include <c10/core/StorageImpl.h>
#include <c10/util/accumulate.h>

namespace foo {

void raise_status(int32_t status, const char* what) {
  std::string msg = foo_last_error();
  switch (status) {
    case FOO_STATUS_OUT_OF_MEMORY:
      TORCH_CHECK_WITH(OutOfMemoryError, false, msg);
    case FOO_STATUS_NOT_IMPLEMENTED:
      TORCH_CHECK_NOT_IMPLEMENTED(false, what, ": ", msg);
    case FOO_STATUS_INVALID_ARGUMENT:
      TORCH_CHECK_VALUE(false, what, ": ", msg);
    case FOO_STATUS_INVALID_DEVICE:
      TORCH_CHECK(false, msg);
    case FOO_STATUS_UNSUPPORTED:
      needs_fallback(std::string(what) + ": " + msg);
    default:
      TORCH_CHECK(false, what, ": ", msg);
  }
}

void needs_fallback(const std::string& why) {
  throw NeedsFallback({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, why);
}

bool is_supported_dtype(c10::ScalarType t) {
  // The list lives in Rust (src/dtype.rs); read once.
  static const uint64_t supported = foo_supported_dtype_mask();
  const auto code = static_cast<int>(t);
  return code >= 0 && code < 64 && ((supported >> code) & 1) != 0;
}

void check_supported_dtype(c10::ScalarType t, const char* op) {
  TORCH_CHECK_NOT_IMPLEMENTED(is_supported_dtype(t), op, ": the foo device does not support dtype ", t,
                              " (see foo_rs.UNSUPPORTED_DTYPES)");
}

FooTensor describe(const at::Tensor& t) {
  FooTensor d{};
  d.data = t.numel() == 0 ? nullptr : const_cast<void*>(t.const_data_ptr());
  d.sizes = t.sizes().data();
  d.strides = t.strides().data();
  d.ndim = static_cast<int32_t>(t.dim());
  d.dtype = static_cast<int32_t>(t.scalar_type());
  d.device = t.device().is_privateuseone() ? t.device().index() : -1;
  return d;
}

FooTensor describe_as(const at::Tensor& t, c10::IntArrayRef sizes, c10::IntArrayRef strides) {
  if (!t.defined()) return FooTensor{};
  TORCH_CHECK(t.is_contiguous() && sizes.size() == strides.size() && c10::multiply_integers(sizes) == t.numel(),
              "foo: a tensor of shape ", t.sizes(), " cannot be described as shape ", sizes);
  FooTensor d = describe(t);
  d.sizes = sizes.data();
  d.strides = strides.data();
  d.ndim = static_cast<int32_t>(sizes.size());
  return d;
}

FooTensor describe_bytes(void* data, const int64_t* nbytes, const int64_t* one) {
  FooTensor d{};
  d.data = data;
  d.sizes = nbytes;
  d.strides = one;
  d.ndim = 1;
  d.dtype = static_cast<int32_t>(c10::kByte);
  d.device = -1;
  return d;
}

FooScalar to_ffi(const c10::Scalar& s) {
  FooScalar r{};
  if (s.isBoolean()) {
    r.tag = FOO_SCALAR_TAG_BOOL;
    r.i = s.toBool();
  } else if (s.isComplex()) {
    auto c = s.toComplexDouble();
    r.tag = FOO_SCALAR_TAG_COMPLEX;
    r.f = c.real();
    r.imag = c.imag();
  } else if (s.isFloatingPoint()) {
    r.tag = FOO_SCALAR_TAG_FLOAT;
    r.f = s.toDouble();
  } else if (s.type() == c10::kUInt64) {
    r.tag = FOO_SCALAR_TAG_UINT;
    r.i = static_cast<int64_t>(s.toUInt64());
  } else {
    r.tag = FOO_SCALAR_TAG_INT;
    r.i = s.toLong();
  }
  return r;
}

void check_scalar_fits(const c10::Scalar& s, c10::ScalarType t) {
  switch (t) {
    case c10::kByte: (void)s.to<uint8_t>(); break;
    case c10::kChar: (void)s.to<int8_t>(); break;
    case c10::kShort: (void)s.to<int16_t>(); break;
    case c10::kInt: (void)s.to<int32_t>(); break;
    case c10::kLong: (void)s.to<int64_t>(); break;
    case c10::kUInt16: (void)s.to<uint16_t>(); break;
    case c10::kUInt32: (void)s.to<uint32_t>(); break;
    case c10::kUInt64: (void)s.to<uint64_t>(); break;
    case c10::kHalf: (void)s.to<c10::Half>(); break;
    case c10::kBFloat16: (void)s.to<c10::BFloat16>(); break;
    case c10::kFloat: (void)s.to<float>(); break;
    case c10::kDouble: (void)s.to<double>(); break;
    case c10::kComplexFloat: (void)s.to<c10::complex<float>>(); break;
    case c10::kComplexDouble: (void)s.to<c10::complex<double>>(); break;
    case c10::kBool: (void)s.to<bool>(); break;
    default: break;
  }
}

void check_scalar_fits_opmath(const c10::Scalar& s, c10::ScalarType t) {
  check_scalar_fits(s, t == c10::kHalf || t == c10::kBFloat16 ? c10::kFloat : t);
}

c10::Scalar from_ffi(const FooScalar& s) {
  switch (s.tag) {
    case FOO_SCALAR_TAG_BOOL:
      return c10::Scalar(s.i != 0);
    case FOO_SCALAR_TAG_INT:
      return c10::Scalar(s.i);
    case FOO_SCALAR_TAG_UINT:
      return c10::Scalar(static_cast<uint64_t>(s.i));
    case FOO_SCALAR_TAG_COMPLEX:
      return c10::Scalar(c10::complex<double>(s.f, s.imag));
    default:
      return c10::Scalar(s.f);
  }
}

void copy_bytes(void* dst, const void* src, size_t nbytes) {
  if (nbytes == 0) return;
  const int64_t n = static_cast<int64_t>(nbytes);
  const int64_t one = 1;
  FooTensor d = describe_bytes(dst, &n, &one);
  FooTensor s = describe_bytes(const_cast<void*>(src), &n, &one);
  check(foo_copy(&d, &s), "foo storage copy");
}

void resize_storage_bytes(c10::StorageImpl* storage, size_t nbytes) {
  TORCH_CHECK(storage->resizable(), "Trying to resize storage that is not resizable");
  at::DataPtr fresh;
  if (nbytes != 0) {
    fresh = storage->allocator()->allocate(nbytes);
  }
  const size_t keep = std::min(nbytes, storage->nbytes());
  if (keep > 0 && storage->data() != nullptr) {
    copy_bytes(fresh.get(), storage->data(), keep);
  }
  storage->set_data_ptr_noswap(std::move(fresh));
  storage->set_nbytes(nbytes);
}

}  // namespace foo
