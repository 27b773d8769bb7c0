// foo_rs._C._empty_strided(size, stride, dtype, device_index): the buffer allocation of the
// Python wrappers inductor generates for foo graphs (python/foo_rs/compile/inductor.py), as
// torch's `_empty_strided_cpu`/`_cuda` (torch/csrc/dynamo/guards.cpp) are for the CPU's and
// CUDA's: tuples and a dtype read with the C API, no argument parser, no dispatcher. A
// [16, 32, 32, 32] buffer took 1.9 us through `torch.empty_strided(..., device="foo:0")`.
#include <Python.h>

#include <ATen/EmptyTensor.h>
#include <c10/core/DeviceGuard.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include "common.h"

namespace {

// The ints of a tuple, or false with a Python error set.
bool read_ints(PyObject* tuple, c10::SmallVector<int64_t, 8>& out) {
  if (!PyTuple_Check(tuple)) {
    PyErr_SetString(PyExc_TypeError, "_empty_strided: size and stride must be tuples of ints");
    return false;
  }
  const Py_ssize_t n = PyTuple_GET_SIZE(tuple);
  out.resize(n);
  for (Py_ssize_t i = 0; i < n; ++i) {
    const long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple, i));
    if (v == -1 && PyErr_Occurred()) return false;
    out[i] = v;
  }
  return true;
}

PyObject* empty_strided(PyObject* /*module*/, PyObject* args) {
  HANDLE_TH_ERRORS
  PyObject *size = nullptr, *stride = nullptr, *dtype = nullptr;
  long long index = 0;
  if (!PyArg_ParseTuple(args, "OOOL", &size, &stride, &dtype, &index)) return nullptr;
  c10::SmallVector<int64_t, 8> sizes, strides;
  if (!read_ints(size, sizes) || !read_ints(stride, strides)) return nullptr;
  if (!THPDtype_Check(dtype)) {
    PyErr_SetString(PyExc_TypeError, "_empty_strided: dtype must be a torch.dtype");
    return nullptr;
  }
  TORCH_CHECK_VALUE(sizes.size() == strides.size(), "_empty_strided: ", sizes.size(), " sizes but ", strides.size(),
                    " strides");
  TORCH_CHECK_VALUE(index >= 0, "_empty_strided: device index ", index, " is negative");
  // The guard checks the index (foo's guard refuses a device that does not exist); the
  // allocator allocates on the current device.
  const c10::DeviceGuard guard(c10::Device(foo::kFoo, static_cast<c10::DeviceIndex>(index)));
  return THPVariable_Wrap(at::detail::empty_strided_generic(sizes, strides, c10::GetAllocator(foo::kFoo),
                                                            c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                            reinterpret_cast<THPDtype*>(dtype)->scalar_type));
  END_HANDLE_TH_ERRORS
}

PyMethodDef empty_strided_def = {
    "_empty_strided", empty_strided, METH_VARARGS,
    "_empty_strided(size, stride, dtype, device_index) -> Tensor\n\n"
    "An uninitialized foo tensor of these sizes and strides on foo:device_index (inductor's buffers)."};

}  // namespace

// A new reference to the function, or null with the Python error set.
extern "C" PyObject* foo_glue_empty_strided_function() { return PyCFunction_New(&empty_strided_def, nullptr); }
