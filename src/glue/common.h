// Shared helpers of the glue: error translation, tensor descriptors, scalars, op counting.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/op_registration/adaption.h>
#include <c10/core/Device.h>
#include <c10/util/Exception.h>

#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "foo_ffi.h"
#include "profiler.h"

namespace foo {

constexpr c10::DeviceType kFoo = c10::DeviceType::PrivateUse1;

// Turns a Rust status into the matching Python exception (via c10's exception types).
[[noreturn]] void raise_status(int32_t status, const char* what);

inline void check(int32_t status, const char* what) {
  if (status != FOO_STATUS_OK) {
    raise_status(status, what);
  }
}

// The dtypes foo kernels handle (mirrors DType in src/dtype.rs).
bool is_supported_dtype(c10::ScalarType t);
void check_supported_dtype(c10::ScalarType t, const char* op);

// The CPU's layout rule for 4-d results of conv, pooling, batch_norm and elementwise losses: a
// channels-last input gives a channels-last result (for 5-d results only where `with_3d`:
// batch_norm keeps channels_last_3d, the CPU's conv3d does not). foo's kernels write row-major,
// so such a result is restrided (one copy) to the strides the CPU returns.
inline at::Tensor in_layout_of(const at::Tensor& out, const at::Tensor& like, bool with_3d = false) {
  if (out.dim() != like.dim() || (out.dim() != 4 && !(with_3d && out.dim() == 5))) return out;
  const at::MemoryFormat f = like.suggest_memory_format();
  if (f == at::MemoryFormat::ChannelsLast || f == at::MemoryFormat::ChannelsLast3d) return out.contiguous(f);
  return out;
}

// A FooTensor describing `t`; `t` must outlive it (the sizes/strides pointers are t's).
FooTensor describe(const at::Tensor& t);
// `t`, contiguous, described with another shape of as many elements, without a view (an at::view
// is a dispatcher call and a TensorImpl: layer_norm's eight cost ~3 us a call). `t`, `sizes` and
// `strides` must outlive it; a zero-size or undefined `t` describes no data.
FooTensor describe_as(const at::Tensor& t, c10::IntArrayRef sizes, c10::IntArrayRef strides);
// A 1-D uint8 descriptor of `nbytes` bytes at `data`.
FooTensor describe_bytes(void* data, const int64_t* nbytes, const int64_t* one);

FooScalar to_ffi(const c10::Scalar& s);
// Raises ATen's "value cannot be converted to type T without overflow" (RuntimeError) where a
// CPU kernel converts `s` with c10::Scalar::to<T>() and it does not fit `t` (fill_, masked_fill,
// an integer alpha, ...). Rust would wrap or saturate it instead.
void check_scalar_fits(const c10::Scalar& s, c10::ScalarType t);
// The same for kernels that compute in float for float16/bfloat16 inputs (at::opmath_type).
void check_scalar_fits_opmath(const c10::Scalar& s, c10::ScalarType t);
c10::Scalar from_ffi(const FooScalar& s);

// Grows or shrinks a foo storage to `nbytes`, keeping min(old, new) bytes (copied by Rust).
void resize_storage_bytes(c10::StorageImpl* storage, size_t nbytes);

// Byte copy between two foo (or host) buffers, done by Rust.
void copy_bytes(void* dst, const void* src, size_t nbytes);

// ---- device checks ---------------------------------------------------------------------------
// The check of PyTorch's generated CUDA wrappers (torchgen's gen_device_check): an op's out
// arguments, then its positional tensor arguments, must all be on one device; an op whose
// native_functions.yaml entry says `device_check: NoCheck` checks for itself instead (e.g.
// TensorIterator, which also takes CPU 0-dim tensors as scalars). FOO_IMPL applies it to every
// native kernel and fallback.cpp to every op that reaches the CPU fallback.
struct DeviceCheck {
  bool enabled = false;
  uint64_t out = 0;         // bit i: argument i is an out argument
  uint64_t positional = 0;  // bit i: argument i is positional
  const c10::FunctionSchema* schema = nullptr;
  std::string method;
};
DeviceCheck device_check_for(const c10::OperatorHandle& op);
// For `NoCheck` ops with out= arguments (which check devices themselves, as TensorIterator does):
// an out= tensor off the foo device is an error, as an out= tensor off CUDA is for CUDA kernels.
[[noreturn]] void out_off_device(const DeviceCheck& c, size_t i, const at::Tensor& t);
// Checks the arguments of `op` on a boxed stack (the CPU fallback's view of a call).
void check_stack_devices(const c10::OperatorHandle& op, const torch::jit::Stack& stack);

namespace detail {
inline const char* arg_name(const DeviceCheck& c, size_t i) { return c.schema->arguments()[i].name().c_str(); }
inline void same_device(std::optional<c10::Device>& common, const at::Tensor& t, const DeviceCheck& c, size_t i) {
  c10::impl::check_and_update_common_device(common, t, c.method.c_str(), arg_name(c, i));
}
inline void same_device(std::optional<c10::Device>& common, const std::optional<at::Tensor>& t, const DeviceCheck& c,
                        size_t i) {
  c10::impl::check_and_update_common_device(common, t, c.method.c_str(), arg_name(c, i));
}
inline void same_device(std::optional<c10::Device>& common, at::TensorList ts, const DeviceCheck& c, size_t i) {
  for (const auto& t : ts) same_device(common, t, c, i);
}
inline void same_device(std::optional<c10::Device>& common, const at::ITensorListRef& ts, const DeviceCheck& c,
                        size_t i) {
  c10::impl::check_and_update_common_device(common, ts, c.method.c_str(), arg_name(c, i));
}
inline void same_device(std::optional<c10::Device>& common, const c10::List<std::optional<at::Tensor>>& ts,
                        const DeviceCheck& c, size_t i) {
  c10::impl::check_and_update_common_device(common, ts, c.method.c_str(), arg_name(c, i));
}
template <typename T>
void same_device(std::optional<c10::Device>&, const T&, const DeviceCheck&, size_t) {
  static_assert(!std::is_convertible_v<T, at::ITensorListRef>, "a tensor-list type without a same_device overload");
}
}  // namespace detail

template <typename... Args>
void check_devices(const DeviceCheck& c, const Args&... args) {
  static_assert(sizeof...(Args) <= 64, "DeviceCheck holds 64 arguments");
  std::optional<c10::Device> common;
  size_t i = 0;
  ((c.out >> i & 1 ? detail::same_device(common, args, c, i) : void(), ++i), ...);
  i = 0;
  ((c.positional >> i & 1 ? detail::same_device(common, args, c, i) : void(), ++i), ...);
}

// The device rule of TensorIterator, for `device_check: NoCheck` ops whose foo kernel builds none
// (losses, index_fill_): every tensor on self's device, a 0-dim CPU tensor allowed as a scalar
// when `cpu_scalars`. Undefined tensors are skipped.
void check_same_device(const at::Tensor& self, std::initializer_list<std::reference_wrapper<const at::Tensor>> others,
                       bool cpu_scalars);

// ---- CPU fallback for inputs a native kernel cannot handle -----------------------------------
// Thrown (through raise_status for FOO_STATUS_UNSUPPORTED, or needs_fallback) by a native kernel that
// has no code for its inputs, e.g. a complex dtype: FOO_IMPL's wrapper catches it and runs the op
// through the counted CPU fallback instead (correct, counted, an error under FOO_RS_STRICT=1).
// Escaping anyway, it is still a NotImplementedError.
class NeedsFallback : public c10::NotImplementedError {
 public:
  using c10::NotImplementedError::NotImplementedError;
};
[[noreturn]] void needs_fallback(const std::string& why);

// Counts a call of `op` ("aten::name.overload") that runs on the CPU, warns the first time, and
// raises NotImplementedError in strict mode; `why` as for needs_fallback (empty: no kernel).
void count_fallback(const std::string& op, const std::string& why);

// The boxed CPU fallback (fallback.cpp), saying why a native kernel handed the op over.
c10::BoxedKernel cpu_fallback_kernel(std::string why);

// ---- native-op accounting --------------------------------------------------------------------
// FOO_IMPL(m, "op.overload", fn) registers fn for PrivateUse1, checks devices as above, counts
// each call that ran natively under the op's name (foo_rs.native_counts()), and hands calls the
// kernel cannot handle (NeedsFallback) to the CPU fallback.
template <size_t N>
struct OpName {
  constexpr OpName(const char (&s)[N]) {  // NOLINT(google-explicit-constructor)
    for (size_t i = 0; i < N; ++i) value[i] = s[i];
  }
  char value[N];
};

struct NativeOp {
  c10::OperatorHandle handle;
  const void* slot;
  DeviceCheck devices;
};
// `name` is "op.overload" of the aten namespace; `arity` the kernel's argument count.
NativeOp native_op(const char* name, size_t arity);

namespace detail {
inline void out_on_foo(const at::Tensor& t, const DeviceCheck& c, size_t i) {
  if (t.defined() && !t.device().is_privateuseone()) out_off_device(c, i, t);
}
template <typename T>
inline void out_on_foo(const T&, const DeviceCheck&, size_t) {}
// 1 for an input on foo, 2 for an input of one or more dims elsewhere (a CPU 0-dim one is a scalar).
inline int input_place(const at::Tensor& t) {
  if (!t.defined()) return 0;
  return t.device().is_privateuseone() ? 1 : (t.dim() > 0 ? 2 : 0);
}
inline int input_place(const std::optional<at::Tensor>& t) { return t.has_value() ? input_place(*t) : 0; }
template <typename T>
inline int input_place(const T&) {
  return 0;
}
}  // namespace detail

// The out= tensors are on foo, and so is at least one input when another input is elsewhere
// (lgamma(cpu_x, out=foo_y) would read CPU memory as foo's).
template <typename... Args>
void check_out_on_foo(const DeviceCheck& c, const Args&... args) {
  size_t i = 0;
  ((c.out >> i & 1 ? detail::out_on_foo(args, c, i) : void(), ++i), ...);
  int places = 0;
  i = 0;
  ((places |= (c.out >> i & 1) ? 0 : detail::input_place(args), ++i), ...);
  TORCH_CHECK(places != 2, "Expected all tensors to be on the same device, but found at least two devices, foo:0 and cpu! ",
              "(", c.method, " got an out= tensor on foo and its inputs on the CPU)");
}

namespace detail {
// The foo device of the first foo tensor among an op's arguments (-1: none), for the profiler.
inline int foo_device_of(const at::Tensor& t) {
  return t.defined() && t.device().is_privateuseone() ? t.device().index() : -1;
}
inline int foo_device_of(const std::optional<at::Tensor>& t) { return t.has_value() ? foo_device_of(*t) : -1; }
// A factory's device= argument (-1 for "the current device" too).
inline int foo_device_of(const std::optional<c10::Device>& d) {
  return d.has_value() && d->is_privateuseone() ? d->index() : -1;
}
template <typename T>
inline int foo_device_of(const T&) {
  return -1;
}
template <typename... Args>
int first_foo_device(const Args&... args) {
  int device = -1;
  ((device = device >= 0 ? device : foo_device_of(args)), ...);
  return device;
}
}  // namespace detail

// Kernel: whether the op computes on device memory (a profiler's device kernel). Metadata-only
// ops (views, factories that only allocate, set_) are FOO_IMPL_META: counted and checked alike,
// but no device activity, as CUDA launches no kernel for them.
template <OpName Name, auto Fn, bool Kernel = true>
struct Counted;

template <OpName Name, typename R, typename... Args, R (*Fn)(Args...), bool Kernel>
struct Counted<Name, Fn, Kernel> {
  static R call(Args... args) {
    const NativeOp& op = native();
    if (op.devices.enabled) {
      check_devices(op.devices, args...);
    } else if (op.devices.out != 0) {
      check_out_on_foo(op.devices, args...);
    }
    try {
      if constexpr (Kernel) {
        // The kernel's time, for the profilers; it ends before a CPU fallback starts.
        prof::KernelScope kernel(Name.value);
        if (kernel.timed()) kernel.set_device(detail::first_foo_device(args...));
        return run(args...);
      } else {
        return run(args...);
      }
    } catch (const NeedsFallback& e) {
      return c10::impl::BoxedKernelWrapper<R(Args...)>::call(cpu_fallback_kernel(e.msg()), op.handle,
                                                             c10::DispatchKeySet(), args...);
    }
  }

 private:
  static const NativeOp& native() {
    static const NativeOp op = native_op(Name.value, sizeof...(Args));
    return op;
  }

  static R run(Args... args) {
    if constexpr (std::is_void_v<R>) {
      Fn(args...);
      foo_native_hit(native().slot);
    } else {
      R result = Fn(args...);
      foo_native_hit(native().slot);
      return result;
    }
  }
};

#define FOO_IMPL(m, name, fn) m.impl(name, TORCH_FN((&::foo::Counted<name, &fn>::call)))
#define FOO_IMPL_META(m, name, fn) m.impl(name, TORCH_FN((&::foo::Counted<name, &fn, false>::call)))

}  // namespace foo
