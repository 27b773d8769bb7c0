// What index_misc.cpp shares of index.cpp (the index family's two files).
#pragma once

#include <cstdint>

namespace foo::idx {

// Which Python exception an out-of-range index raises (ATen's CPU choice per op).
enum class OutOfRange { IndexError, RuntimeError };

// Like check(), but a FOO_STATUS_INVALID_ARGUMENT (an out-of-range index) becomes `kind` with the
// Rust message, preceded by `prefix`.
void check_index(int32_t status, const char* what, OutOfRange kind, const char* prefix = "");

}  // namespace foo::idx
