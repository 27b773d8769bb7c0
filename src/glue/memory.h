// What other families call of memory.cpp (elementwise.cpp's CPU scalars, foreach.cpp's scalar
// tensors).
#pragma once

#include <ATen/ATen.h>

namespace foo::ops {

// fill_ without ATen's range check: `value` converted as a tensor copy converts it (the glue's own
// 0-dim operands, e.g. a CPU scalar tensor moved to foo).
at::Tensor& fill_wrapping(at::Tensor& self, const c10::Scalar& value);

}  // namespace foo::ops
