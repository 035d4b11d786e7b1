#pragma once
// The spatial part of a convolution as dnnx's own convolution kernels take it
// (kernels/depthwise.hpp, kernels/narrow.hpp): three dims D, H, W, a 1-D or 2-D convolution lifted
// with leading dims of size 1 (kernel 1, stride 1, dilation 1, no padding). Plain ints; no CUDA
// types.

namespace dnnx::cudnn::kernels {

struct SpatialDims {
  int input[3] = {1, 1, 1};
  int output[3] = {1, 1, 1};
  int kernel[3] = {1, 1, 1};
  int stride[3] = {1, 1, 1};
  int pad_before[3] = {0, 0, 0};  ///< the padding after each dim is implied by `output`
  int dilation[3] = {1, 1, 1};
};

/// Copies `dims` into a kernel file's geometry, whose fields are in, out, k, s, p and d.
template <typename Geometry>
void copy_dims(Geometry& g, const SpatialDims& dims) {
  for (int i = 0; i < 3; ++i) {
    g.in[i] = dims.input[i];
    g.out[i] = dims.output[i];
    g.k[i] = dims.kernel[i];
    g.s[i] = dims.stride[i];
    g.p[i] = dims.pad_before[i];
    g.d[i] = dims.dilation[i];
  }
}

}  // namespace dnnx::cudnn::kernels
