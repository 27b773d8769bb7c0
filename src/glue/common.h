// Shared helpers of the glue: error translation, tensor descriptors, scalars, op counting.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Device.h>
#include <c10/util/Exception.h>

#include <string>
#include <utility>

#include "foo_ffi.h"

namespace foo {

constexpr c10::DeviceType kFoo = c10::DeviceType::PrivateUse1;

// Turns a Rust status into the matching Python exception (via c10's exception types).
[[noreturn]] void raise_status(int32_t status, const char* what);

inline void check(int32_t status, const char* what) {
  if (status != FOO_OK) {
    raise_status(status, what);
  }
}

// The dtypes foo kernels handle (mirrors DType in src/dtype.rs).
bool is_supported_dtype(c10::ScalarType t);
void check_supported_dtype(c10::ScalarType t, const char* op);

// A FooTensor describing `t`; `t` must outlive it (the sizes/strides pointers are t's).
FooTensor describe(const at::Tensor& t);
// A 1-D uint8 descriptor of `nbytes` bytes at `data`.
FooTensor describe_bytes(void* data, const int64_t* nbytes, const int64_t* one);

FooScalar to_ffi(const c10::Scalar& s);
c10::Scalar from_ffi(const FooScalar& s);

// Grows or shrinks a foo storage to `nbytes`, keeping min(old, new) bytes (copied by Rust).
void resize_storage_bytes(c10::StorageImpl* storage, size_t nbytes);

// Byte copy between two foo (or host) buffers, done by Rust.
void copy_bytes(void* dst, const void* src, size_t nbytes);

// ---- native-op accounting ----------------------------------------------------------------
// FOO_IMPL(m, "op.overload", fn) registers fn for PrivateUse1 and counts each call under the
// op's name (foo_rs.native_counts()).
template <size_t N>
struct OpName {
  constexpr OpName(const char (&s)[N]) {  // NOLINT(google-explicit-constructor)
    for (size_t i = 0; i < N; ++i) value[i] = s[i];
  }
  char value[N];
};

template <OpName Name, auto Fn>
struct Counted;

template <OpName Name, typename R, typename... Args, R (*Fn)(Args...)>
struct Counted<Name, Fn> {
  static R call(Args... args) {
    static const void* slot = foo_native_slot((std::string("aten::") + Name.value).c_str());
    foo_native_hit(slot);
    return Fn(std::forward<Args>(args)...);
  }
};

#define FOO_IMPL(m, name, fn) m.impl(name, TORCH_FN((&::foo::Counted<name, &fn>::call)))

}  // namespace foo
