// Registrations of GradScaler's kernels (ops_amp.cpp). The autocast policy is in autocast.cpp.
#include <torch/library.h>

#include "common.h"
#include "ops_amp.h"

namespace foo {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  FOO_IMPL(m, "_amp_foreach_non_finite_check_and_unscale_", ops::amp_foreach_non_finite_check_and_unscale_);
  FOO_IMPL(m, "_amp_update_scale_", ops::amp_update_scale_);
}

}  // namespace foo
