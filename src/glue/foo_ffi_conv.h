// The C side of src/ffi/conv.rs (convolution and pooling). Keep the structs in step with
// ConvParams (kernels/conv.rs) and Pool2dParams (kernels/conv/pool.rs); a Rust test checks them.
#pragma once

#include "foo_ffi.h"

#ifdef __cplusplus
extern "C" {
#endif

// Spatial dims are (D, H, W); 1-D/2-D convolutions use 1 for the missing leading dims.
typedef struct FooConvParams {
  int64_t stride[3];
  int64_t padding[3];
  int64_t dilation[3];
  int64_t groups;
} FooConvParams;

// Every tensor is 5-D [N, C, D, H, W] / weight [O, C/groups, kD, kH, kW]. Inputs may be strided;
// weight, grad_output and every written tensor must be contiguous. float32/float64.
int32_t foo_conv_forward(const FooTensor* out, const FooTensor* input, const FooTensor* weight, const FooTensor* bias,
                         const FooConvParams* p);
// grad_input (overwritten) = transpose-conv(grad_output, weight) (+ bias per channel, may be null).
int32_t foo_conv_backward_input(const FooTensor* grad_input, const FooTensor* grad_output, const FooTensor* weight,
                                const FooTensor* bias, const FooConvParams* p);
int32_t foo_conv_backward_weight(const FooTensor* grad_weight, const FooTensor* input, const FooTensor* grad_output,
                                 const FooConvParams* p);
int32_t foo_conv_backward_bias(const FooTensor* grad_bias, const FooTensor* grad_output);

// 2-D pooling over 4-D [N, C, H, W]; divisor_override <= 0 means none. Outputs contiguous.
typedef struct FooPool2dParams {
  int64_t kernel[2];
  int64_t stride[2];
  int64_t padding[2];
  int64_t dilation[2];
  int32_t count_include_pad;
  int64_t divisor_override;
} FooPool2dParams;

int32_t foo_max_pool2d(const FooTensor* out, const FooTensor* indices, const FooTensor* input,
                       const FooPool2dParams* p);
// grad_output and indices contiguous.
int32_t foo_max_pool2d_backward(const FooTensor* grad_input, const FooTensor* grad_output, const FooTensor* indices);
int32_t foo_avg_pool2d(const FooTensor* out, const FooTensor* input, const FooPool2dParams* p);
int32_t foo_avg_pool2d_backward(const FooTensor* grad_input, const FooTensor* grad_output, const FooPool2dParams* p);
int32_t foo_adaptive_avg_pool2d(const FooTensor* out, const FooTensor* input);
int32_t foo_adaptive_avg_pool2d_backward(const FooTensor* grad_input, const FooTensor* grad_output);

#ifdef __cplusplus
}
#endif
