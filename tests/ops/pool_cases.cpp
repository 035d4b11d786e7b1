#include "ops/pool_cases.hpp"

#include "support/random.hpp"

#include <array>
#include <initializer_list>
#include <numeric>
#include <ostream>
#include <random>
#include <stdexcept>
#include <utility>

namespace dnnx::test {
namespace {

using Sizes = std::initializer_list<std::int64_t>;

std::array<std::int64_t, 3> spatial(Sizes values, int spatial_dims, std::int64_t fill) {
  if (values.size() != 1 && values.size() != static_cast<std::size_t>(spatial_dims))
    throw std::logic_error("pool case table: spatial list of the wrong length");
  std::array<std::int64_t, 3> out{fill, fill, fill};
  for (int i = 0; i < spatial_dims; ++i)
    out[static_cast<std::size_t>(i)] = values.size() == 1 ? *values.begin() : *(values.begin() + i);
  return out;
}

// Reads like the table it builds: Shape(n, c, input, kernel).stride(...).pad(...).ceil().
class Shape {
 public:
  Shape(std::int64_t batch, std::int64_t channels, Sizes input, Sizes kernel) {
    desc_.spatial_dims = static_cast<int>(input.size());
    desc_.batch = batch;
    desc_.channels = channels;
    desc_.input = spatial(input, desc_.spatial_dims, 0);
    desc_.kernel = spatial(kernel, desc_.spatial_dims, 0);
    desc_.stride = desc_.kernel;  // PyTorch's default
  }
  Shape& stride(Sizes stride) {
    desc_.stride = spatial(stride, desc_.spatial_dims, 1);
    return *this;
  }
  Shape& pad(Sizes pad) { return pad2(pad, pad); }
  Shape& pad2(Sizes before, Sizes after) {
    desc_.pad_before = spatial(before, desc_.spatial_dims, 0);
    desc_.pad_after = spatial(after, desc_.spatial_dims, 0);
    return *this;
  }
  Shape& ceil() {
    desc_.ceil_mode = true;
    return *this;
  }
  Shape& dilation(Sizes dilation) {
    desc_.dilation = spatial(dilation, desc_.spatial_dims, 1);
    return *this;
  }
  const PoolDesc& desc() const { return desc_; }

 private:
  PoolDesc desc_;
};

std::string suffix(const PoolDesc& desc) {
  return std::string(to_string(desc.mode)) + (desc.indices ? "_indices_" : "_") +
         std::string(to_string(desc.dtype)) + "_" + std::string(to_string(desc.layout));
}

}  // namespace

std::vector<PoolShape> pool_edge_shapes() {
  const std::vector<std::pair<const char*, Shape>> shapes = {
      {"1d_k3s2p1", Shape(2, 3, {17}, {3}).stride({2}).pad({1})},
      // Ceil mode, per-side padding; the last window overhangs input + pad_after.
      {"1d_ceil_asym_pad", Shape(2, 5, {10}, {4}).stride({3}).pad2({0}, {1}).ceil()},
      // ResNet's stem pool on an odd size.
      {"2d_k3s2p1_odd", Shape(2, 8, {13, 13}, {3}).stride({2}).pad({1})},
      // Non-overlapping windows (stride = kernel, PyTorch's default).
      {"2d_k2s2", Shape(2, 4, {8, 8}, {2})},
      // Ceil mode: along W the last window overhangs the input by one (include-pad divisor 2).
      {"2d_ceil_overhang", Shape(1, 3, {7, 10}, {3}).stride({2}).ceil()},
      // Ceil mode where PyTorch drops the last window: it would start in the back padding.
      {"2d_ceil_start_rule", Shape(2, 3, {5, 6}, {2}).stride({2}).pad({1}).ceil()},
      {"2d_asym_pad", Shape(2, 3, {9, 8}, {3, 4}).stride({2, 1}).pad2({0, 2}, {1, 1})},
      {"2d_batch1_odd", Shape(1, 5, {11, 7}, {3, 2}).stride({1, 2}).pad({1, 0})},
      // The kernel covers the whole input: output 1x1.
      {"2d_kernel_eq_input", Shape(2, 3, {5, 6}, {5, 6}).stride({1})},
      // Stride larger than the kernel: some src elements feed no window (diff_src must be 0).
      {"2d_stride_gt_kernel", Shape(2, 3, {10, 11}, {2}).stride({3})},
      // Padding of half the kernel on every side: corner windows are mostly padding.
      {"2d_half_kernel_pad", Shape(1, 4, {4, 4}, {4}).stride({1}).pad({2})},
      // Channel counts that are not a multiple of the GPU kernels' 16-byte packs, and one that is.
      {"2d_channels17_ceil", Shape(2, 17, {9, 9}, {3}).stride({2}).pad({1}).ceil()},
      {"2d_channels16", Shape(2, 16, {12, 12}, {3}).stride({2}).pad({1})},
      {"3d_k3s2p1", Shape(1, 4, {5, 6, 7}, {3}).stride({2}).pad({1})},
      {"3d_asym_pad_ceil",
       Shape(2, 3, {6, 5, 7}, {2, 3, 3}).stride({2, 1, 2}).pad2({1, 0, 1}, {0, 1, 0}).ceil()},
      {"3d_k2s2_channels16", Shape(1, 16, {4, 4, 4}, {2})},
      // Rows long enough for the cpu kernels' 16-output groups, with strides 1 and 3 (the
      // contiguous and the lane-by-lane loads; 2d_k3s2p1_odd and the benchmark shape have 2).
      {"2d_wide_stride1", Shape(1, 3, {4, 41}, {2, 3}).stride({1}).pad({1})},
      {"1d_wide_stride3_ceil", Shape(2, 2, {71}, {4}).stride({3}).pad({2}).ceil()},
      // Dilated windows (PyTorch's max_pool dilation; the averages over the same positions).
      // Ceil mode with an overhang past the padded input, padding of half the effective kernel.
      {"1d_dilated_ceil", Shape(2, 3, {20}, {3}).stride({2}).pad({2}).dilation({2}).ceil()},
      // Padding beyond half the kernel but within half the effective kernel; dilation 3 along W.
      {"2d_dilated_odd", Shape(2, 5, {13, 11}, {3}).stride({2, 1}).pad({2, 3}).dilation({2, 3})},
      // A row long enough for the cpu kernels' groups of 16 outputs, stride 2, ceil mode.
      {"2d_dilated_wide_ceil",
       Shape(1, 3, {5, 46}, {2, 3}).stride({1, 2}).pad({1, 2}).dilation({2}).ceil()},
      {"3d_dilated_asym_pad", Shape(1, 16, {7, 6, 9}, {2, 2, 3})
                                  .stride({1, 2, 2})
                                  .pad2({1, 0, 2}, {0, 1, 1})
                                  .dilation({2, 3, 2})},
  };
  std::vector<PoolShape> out;
  for (const auto& [name, shape] : shapes) {
    shape.desc().validate();
    out.push_back({name, shape.desc()});
  }
  return out;
}

std::vector<PoolCase> pool_variants(const PoolShape& shape) {
  std::vector<PoolCase> cases;
  // Max with indices is the fourth "mode".
  for (const auto& [mode, indices] :
       {std::pair{PoolMode::max, false}, std::pair{PoolMode::max, true},
        std::pair{PoolMode::avg_include_pad, false}, std::pair{PoolMode::avg_exclude_pad, false}}) {
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
        PoolDesc desc = shape.desc;
        desc.mode = mode;
        desc.indices = indices;
        desc.dtype = dtype;
        desc.layout = layout;
        cases.push_back({shape.name + "_" + suffix(desc), desc});
      }
    }
  }
  return cases;
}

std::vector<PoolCase> pool_edge_cases() {
  std::vector<PoolCase> cases;
  for (const PoolShape& shape : pool_edge_shapes()) {
    for (PoolCase& c : pool_variants(shape)) cases.push_back(std::move(c));
  }
  return cases;
}

std::vector<PoolCase> pool_benchmark_cases(std::int64_t batch) {
  std::vector<PoolCase> cases;
  for (const bool indices : {false, true}) {
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
        PoolDesc desc = PoolDesc::from_shapes({batch, 64, 112, 112}, {3}, {2}, {1}, PoolMode::max,
                                              false, dtype, layout);
        desc.indices = indices;
        cases.push_back(
            {std::string(indices ? "resnet50_maxpool_indices_n" : "resnet50_maxpool_n") +
                 std::to_string(batch) + "_" + std::string(to_string(dtype)) + "_" +
                 std::string(to_string(layout)),
             desc});
      }
    }
  }
  return cases;
}

Tensor pool_src(const PoolDesc& desc, std::uint64_t seed) {
  const Dims dims = desc.src_dims();
  if (desc.mode != PoolMode::max) return random_tensor(dims, desc.dtype, desc.layout, seed);
  // Note [tie-free inputs]: 3-D view (D, H, W) of the spatial dims, missing leading dims size 1.
  std::array<std::int64_t, 3> in{1, 1, 1}, kernel{1, 1, 1}, dilation{1, 1, 1};
  const int missing = 3 - desc.spatial_dims;
  for (int i = 0; i < desc.spatial_dims; ++i) {
    const auto k = static_cast<std::size_t>(missing + i), s = static_cast<std::size_t>(i);
    in[k] = desc.input[s];
    kernel[k] = desc.kernel[s];
    dilation[k] = desc.dilation[s];
  }
  const std::int64_t window = kernel[0] * kernel[1] * kernel[2];
  if (window > 256) throw std::logic_error("pool_src: tie-free inputs need windows of <= 256");
  const std::int64_t plane = in[0] * in[1] * in[2];
  std::vector<float> values(static_cast<std::size_t>(dims.product()));
  std::mt19937_64 engine(seed);
  std::vector<std::int64_t> perm(static_cast<std::size_t>(window));
  // The residue of a position along one dim: positions of one window differ in it.
  const auto residue = [&](std::size_t k, std::int64_t x) { return x / dilation[k] % kernel[k]; };
  for (std::int64_t p = 0; p < desc.batch * desc.channels; ++p) {
    std::iota(perm.begin(), perm.end(), 0);
    for (std::size_t i = perm.size(); i > 1; --i)  // Fisher-Yates with a portable draw
      std::swap(perm[i - 1], perm[static_cast<std::size_t>(engine() % i)]);
    for (std::int64_t at = 0; at < plane; ++at) {
      const std::int64_t d = at / (in[1] * in[2]), h = at / in[2] % in[1], w = at % in[2];
      const std::int64_t r =
          (residue(0, d) * kernel[1] + residue(1, h)) * kernel[2] + residue(2, w);
      values[static_cast<std::size_t>(p * plane + at)] =
          static_cast<float>(perm[static_cast<std::size_t>(r)] - window / 2);
    }
  }
  return tensor_from(dims, desc.dtype, desc.layout, values);
}

Tensor pool_diff_dst(const PoolDesc& desc, std::uint64_t seed) {
  return random_tensor(desc.dst_dims(), desc.dtype, desc.layout, seed);
}

void PrintTo(const PoolCase& c, std::ostream* out) { *out << c.name << " (" << c.desc << ")"; }

void PrintTo(const PoolShape& shape, std::ostream* out) {
  *out << shape.name << " (" << shape.desc << ")";
}

bool is_valid_pool_case_name(const std::string& name) {
  if (name.empty()) return false;
  for (const char c : name) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

}  // namespace dnnx::test
