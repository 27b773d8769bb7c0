// Launching the Rust elementwise kernels over a TensorIterator built for metadata only
// (broadcast shape, output allocation/resizing, type promotion, overlap checks).
#pragma once

#include <ATen/TensorIterator.h>

#include <initializer_list>
#include <vector>

#include "common.h"
#include "foo_ffi.h"

namespace foo::ew {

// A CPU scalar becomes a foo scalar, a tensor of another dtype is converted (by Rust), and the
// result is broadcast to `shape`. Returns `t` itself when it needs none of that, else the
// converted tensor, held in `keep`.
const at::Tensor& input_as(const at::Tensor& t, at::ScalarType dtype, c10::IntArrayRef shape,
                           const at::TensorOptions& options, at::Tensor& keep);

// Runs a Rust kernel that writes `result` from inputs read as `inputs` (one dtype per iterator
// input). Returns the iterator's output (a reference into `iter`: copying it is the caller's
// choice, see the borrowing builders above).
const at::Tensor& launch_unary(at::TensorIterator& iter, int32_t op, at::ScalarType result, at::ScalarType input,
                        std::initializer_list<c10::Scalar> params = {});
// The same with raw parameters (some may be `absent()`).
const at::Tensor& launch_unary_raw(at::TensorIterator& iter, int32_t op, at::ScalarType result, at::ScalarType input,
                            const std::vector<FooScalar>& params);
const at::Tensor& launch_binary(at::TensorIterator& iter, int32_t op, at::ScalarType result, at::ScalarType a, at::ScalarType b,
                         std::initializer_list<c10::Scalar> params = {});
const at::Tensor& launch_ternary(at::TensorIterator& iter, int32_t op, at::ScalarType result, at::ScalarType a,
                          at::ScalarType b, at::ScalarType c, std::initializer_list<c10::Scalar> params = {});

// TensorIterator's metadata builders with every operand borrowed, as ATen's own structured
// kernels build them. Why not `TensorIterator::binary_op` and friends: they copy each operand
// into the iterator, and copying a tensor that Python owns (refcount 1 -> 2) takes the GIL to
// incref its PyObject, and again to decref it; on a 1-element add that was 4 GIL round trips,
// about a quarter of the op. Temporaries are refused at compile time (they would dangle).
//
// Two inputs of different dtypes (or integer inputs of a float op such as true division): the
// CPU's iterator converts an input to the common dtype first
// (`x.to(common)`, which gives a non-dense input dense strides) and only then orders the output
// by the inputs' strides; on other devices it orders by the unconverted input. So an expanded
// float16 input next to a float32 one gave foo a contiguous result where the CPU's follows the
// inputs' memory order. Such an input is converted up front, as the CPU does (its kernel would
// convert it anyway), and the iterator owns the converted copy.
bool promotes_layout(const at::TensorBase& a, const at::TensorBase& b);
at::TensorIterator promoted_iterator(int kind, const at::TensorBase& out, const at::TensorBase& a,
                                     const at::TensorBase& b);
enum BuilderKind { kBinaryOp, kBinaryFloatOp, kComparisonOp };
#define FOO_BORROWING_BUILDER3(name, kind)                                                    \
  inline at::TensorIterator name(const at::TensorBase& out, const at::TensorBase& a,         \
                                 const at::TensorBase& b) {                                   \
    if ((a.scalar_type() != b.scalar_type() ||                                                \
         (kind == kBinaryFloatOp && at::isIntegralType(a.scalar_type(), true))) &&             \
        promotes_layout(a, b)) {                                                              \
      return promoted_iterator(kind, out, a, b);                                              \
    }                                                                                         \
    at::TensorIterator it;                                                                    \
    it.build_borrowing_##name(out, a, b);                                                     \
    return it;                                                                                \
  }                                                                                           \
  at::TensorIterator name(at::TensorBase&&, const at::TensorBase&, const at::TensorBase&) = delete; \
  at::TensorIterator name(const at::TensorBase&, at::TensorBase&&, const at::TensorBase&) = delete; \
  at::TensorIterator name(const at::TensorBase&, const at::TensorBase&, at::TensorBase&&) = delete;
#define FOO_BORROWING_BUILDER2(name)                                                          \
  inline at::TensorIterator name(const at::TensorBase& out, const at::TensorBase& a) {       \
    at::TensorIterator it;                                                                    \
    it.build_borrowing_##name(out, a);                                                        \
    return it;                                                                                \
  }                                                                                           \
  at::TensorIterator name(at::TensorBase&&, const at::TensorBase&) = delete;                  \
  at::TensorIterator name(const at::TensorBase&, at::TensorBase&&) = delete;
FOO_BORROWING_BUILDER3(binary_op, kBinaryOp)
FOO_BORROWING_BUILDER3(binary_float_op, kBinaryFloatOp)
FOO_BORROWING_BUILDER3(comparison_op, kComparisonOp)
FOO_BORROWING_BUILDER2(unary_op)
FOO_BORROWING_BUILDER2(unary_float_op)
#undef FOO_BORROWING_BUILDER3
#undef FOO_BORROWING_BUILDER2

// Operands TensorIterator would pass through untouched: row-major foo tensors (the strides of
// `empty`) of one shape and one dtype (a floating one for a float op: integers would promote), no
// conjugate or negative bit, or such a float32/float64 tensor and a Python number. Their iterator allocates a contiguous output of that shape and dtype and the kernel
// runs over the dense memory, so the dense_* launchers below do that without building one: on a
// 1-element add the iterator and the dispatched output allocation were a third of the op (see
// docs/PERFORMANCE.md, "Per-op overhead").
// `out` is undefined (a new result) or is `a` (in place), sharing no memory with `b` or all of it.
bool dense_operands(bool float_op, const at::Tensor& out, const at::Tensor& a, const at::Tensor* b = nullptr);
// Run the op on operands dense_operands accepted (callers check the op's parameters first);
// an undefined `out` becomes the new result.
void dense_unary(at::Tensor& out, int32_t op, const at::Tensor& a, std::initializer_list<c10::Scalar> params = {});
void dense_binary(at::Tensor& out, int32_t op, const at::Tensor& a, const at::Tensor& b,
                  std::initializer_list<c10::Scalar> params = {});
// Whether a builder of the borrowing builders above is a float op (integers promote).
#define FOO_FLOAT_OP_binary_op false
#define FOO_FLOAT_OP_binary_float_op true
#define FOO_FLOAT_OP_unary_op false
#define FOO_FLOAT_OP_unary_float_op true

// A parameter that is absent (e.g. clamp's missing bound).
FooScalar absent();
std::vector<FooScalar> to_ffi(std::initializer_list<c10::Scalar> params);

// An iterator with one output and the given inputs whose output dtype is fixed (bool for
// predicates, or a requested dtype); inputs keep their dtypes.
at::TensorIterator fixed_dtype_op(at::Tensor& out, std::initializer_list<const at::Tensor*> inputs, at::ScalarType dtype);

}  // namespace foo::ew
