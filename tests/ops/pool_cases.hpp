#pragma once
// THE pooling case table (STYLE.md "Tests"): hand-picked edge shapes, each in every mode, dtype and
// layout, plus the benchmark layer of bench/layers_bench.cpp. Every case has a unique name that is
// a valid gtest parameter name; the desc itself prints, validates and reproduces the case. Also
// the inputs every pooling test uses (Note [tie-free inputs]).

#include <dnnx/ops/pool.hpp>
#include <dnnx/tensor.hpp>

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace dnnx::test {

/// One row of the table.
struct PoolCase {
  std::string name;  ///< [A-Za-z0-9_]+, unique within a table
  PoolDesc desc;
};

/// A named shape of the table: everything but mode, dtype and layout.
struct PoolShape {
  std::string name;  ///< e.g. "2d_ceil_overhang"
  PoolDesc desc;     ///< mode max, f32, channels_first
};

/// Hand-picked edge shapes: 1/2/3-D, overlapping and gapped windows (stride below and above the
/// kernel), per-side padding, ceil mode with and without an overhang past the padded input and
/// with PyTorch's "last window starts inside" rule, a kernel as large as the (padded) input,
/// windows made mostly of padding, batch 1, odd sizes, channel counts that are and are not
/// multiples of the kernels' channel packs, dilated windows in 1/2/3-D (with ceil mode, per-side
/// padding and padding past half the kernel).
std::vector<PoolShape> pool_edge_shapes();

/// `shape` in every mode (max, max with indices, avg_include_pad, avg_exclude_pad), dtype (f32,
/// f16, bf16) and layout (nchw, nhwc): 24 variants. Names:
/// <shape>_<mode>[_indices]_<dtype>_<layout>.
std::vector<PoolCase> pool_variants(const PoolShape& shape);

/// Every variant of every edge shape.
std::vector<PoolCase> pool_edge_cases();

/// The pooling benchmark layer (ResNet-50's max-pool 3x3/2 pad 1 on 112x112x64) at `batch`, in
/// both layouts and every dtype, without indices (the first six, f32/f16/bf16 x nchw/nhwc) and
/// with. Names: resnet50_maxpool[_indices]_n<batch>_<dtype>_<layout>.
std::vector<PoolCase> pool_benchmark_cases(std::int64_t batch);

// Note [tie-free inputs]
// A max window with two equal maxima sends its gradient to the first in scan order; an
// implementation that picks another is still "a" max pool, and rounding to f16/bf16 makes ties
// common in random data. Test inputs for max therefore give every element of a window a distinct
// value: value(d, h, w) = perm[(d / dd mod kd, h / dh mod kh, w / dw mod kw)] - kd*kh*kw/2 (dd, dh,
// dw the dilations), a per-plane random permutation of the residue triples: the positions
// x0 + j * dilation, j < kernel, of one window have consecutive (x0 / dilation + j), so distinct,
// residues. They are small integers exact in every dtype (|value| <= 128 while the window holds
// at most 256 positions). Values are negative as well as positive, so padding mistaken for zeros
// would show.

/// Inputs for `desc`'s src: tie-free integers for max (Note [tie-free inputs]), uniform values in
/// [-1, 1) rounded to the dtype for the averages. Dense in desc.layout, desc.dtype; reproducible
/// from `seed`.
Tensor pool_src(const PoolDesc& desc, std::uint64_t seed);

/// A gradient for dst: uniform in [-1, 1) rounded to desc.dtype, dense in desc.layout.
Tensor pool_diff_dst(const PoolDesc& desc, std::uint64_t seed);

/// gtest prints parameters on failure; the default would be a byte dump.
void PrintTo(const PoolCase& c, std::ostream* out);
void PrintTo(const PoolShape& shape, std::ostream* out);

/// True when `name` is non-empty and only [A-Za-z0-9_].
bool is_valid_pool_case_name(const std::string& name);

}  // namespace dnnx::test
