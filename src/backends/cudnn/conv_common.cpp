#include "backends/cudnn/conv_common.hpp"

#include "backends/cudnn/layer_common.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <climits>

namespace dnnx::cudnn {
namespace {

template <std::size_t N>
void fill(std::array<std::int64_t, N>& out, const Dims& dims) {
  for (int i = 0; i < dims.rank(); ++i) out[static_cast<std::size_t>(i)] = dims[i];
}

}  // namespace

cudnnDataType_t data_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return CUDNN_DATA_FLOAT;
    case DType::f16: return CUDNN_DATA_HALF;
    case DType::bf16: return CUDNN_DATA_BFLOAT16;
    case DType::i32: return CUDNN_DATA_INT32;
    case DType::i64: return CUDNN_DATA_INT64;
  }
  return CUDNN_DATA_FLOAT;
}

Geometry conv_geometry(const ConvDesc& desc) {
  Geometry g;
  const bool one_d = desc.spatial_dims == 1;
  g.spatial = one_d ? 2 : desc.spatial_dims;
  g.nb_dims = g.spatial + 2;
  // Spatial parameters, 1-D lifted to 2-D with a unit height (Note [cuDNN geometry]).
  std::array<std::int64_t, 3> input{}, kernel{}, output{};
  for (int i = 0; i < g.spatial; ++i) {
    const auto s = static_cast<std::size_t>(i);
    if (one_d && i == 0) {
      input[s] = kernel[s] = output[s] = 1;
      g.stride[s] = g.dilation[s] = 1;
      g.pad_before[s] = g.pad_after[s] = 0;
      continue;
    }
    const auto d = static_cast<std::size_t>(one_d ? 0 : i);
    input[s] = desc.input[d];
    kernel[s] = desc.kernel[d];
    output[s] = desc.output_size(static_cast<int>(d));
    g.stride[s] = desc.stride[d];
    g.dilation[s] = desc.dilation[d];
    g.pad_before[s] = desc.pad_before[d];
    g.pad_after[s] = desc.pad_after[d];
    if (g.pad_before[s] != g.pad_after[s]) g.symmetric_padding = false;
  }
  std::vector<std::int64_t> src{desc.batch, desc.in_channels};
  std::vector<std::int64_t> dst{desc.batch, desc.out_channels};
  std::vector<std::int64_t> weights{desc.out_channels, desc.in_channels / desc.groups};
  std::vector<std::int64_t> bias{1, desc.out_channels};
  for (int i = 0; i < g.spatial; ++i) {
    const auto s = static_cast<std::size_t>(i);
    src.push_back(input[s]);
    dst.push_back(output[s]);
    weights.push_back(kernel[s]);
    bias.push_back(1);
  }
  auto set = [&](const std::vector<std::int64_t>& values, std::array<std::int64_t, 5>& dims,
                 std::array<std::int64_t, 5>& strides) {
    const Dims d{std::span<const std::int64_t>(values)};
    fill(dims, d);
    fill(strides, dense_strides(d, desc.layout));
  };
  set(src, g.src, g.src_strides);
  set(dst, g.dst, g.dst_strides);
  set(weights, g.weights, g.weights_strides);
  set(bias, g.bias, g.bias_strides);
  g.data_type = data_type(desc.dtype);
  return g;
}

kernels::SpatialDims kernel_dims(const ConvDesc& desc, std::int64_t cap) {
  kernels::SpatialDims dims;
  auto value = [cap](std::int64_t v) { return static_cast<int>(std::min(v, cap)); };
  const int offset = 3 - desc.spatial_dims;  // 1-D and 2-D: leading dims of size 1
  for (int i = 0; i < desc.spatial_dims; ++i) {
    const auto s = static_cast<std::size_t>(i);
    const auto t = static_cast<std::size_t>(i + offset);
    dims.input[t] = value(desc.input[s]);
    dims.output[t] = value(desc.output_size(i));
    dims.kernel[t] = value(desc.kernel[s]);
    dims.stride[t] = value(desc.stride[s]);
    dims.pad_before[t] = value(desc.pad_before[s]);
    dims.dilation[t] = value(desc.dilation[s]);
  }
  return dims;
}

std::int64_t elements_of(const Geometry& g, const std::array<std::int64_t, 5>& dims) {
  std::int64_t product = 1;
  for (int i = 0; i < g.nb_dims; ++i) product *= dims[static_cast<std::size_t>(i)];
  return product;
}

bool fits_legacy_int(const Geometry& g) {
  auto fits = [&](const std::array<std::int64_t, 5>& values) {
    return std::all_of(values.begin(), values.begin() + g.nb_dims,
                       [](std::int64_t v) { return v <= INT_MAX; });
  };
  return fits(g.src) && fits(g.src_strides) && fits(g.dst) && fits(g.dst_strides) &&
         fits(g.weights) && fits(g.weights_strides);
}

void check_legacy_range(const Geometry& g, const ErrorContext& context) {
  if (!fits_legacy_int(g)) detail::raise(ErrorKind::Unsupported, legacy_range_reason, context);
}

ErrorContext conv_context(const ConvDesc& desc, Direction direction, std::string implementation) {
  return detail::op_context(BackendKind::cudnn, desc, direction, std::move(implementation));
}

BoundTensors bind_tensors(const detail::ConvArgs& args, Direction direction,
                          const ErrorContext& context) {
  auto need = [&](const Tensor* tensor, const char* role) {
    if (tensor == nullptr || tensor->data() == nullptr) {
      detail::raise(ErrorKind::InvalidArgument, detail::cat(role, " is null"), context);
    }
    return tensor->data();
  };
  switch (direction) {
    case Direction::fwd:
      return {need(args.src, "src"), need(args.weights, "weights"), need(args.dst, "dst")};
    case Direction::bwd_data:
      return {need(args.diff_dst, "diff_dst"), need(args.weights, "weights"),
              need(args.diff_src, "diff_src")};
    case Direction::bwd_weights:
      return {need(args.src, "src"), need(args.diff_dst, "diff_dst"),
              need(args.diff_weights, "diff_weights")};
    case Direction::fwd_training: break;  // not a convolution direction
  }
  return {};
}

TensorRoles tensor_roles(const BoundTensors& t, Direction direction) {
  void* first = const_cast<void*>(t.first);
  void* second = const_cast<void*>(t.second);
  switch (direction) {
    case Direction::fwd: return {first, t.output, second};
    case Direction::bwd_data: return {t.output, first, second};
    case Direction::bwd_weights: return {first, second, t.output};
    case Direction::fwd_training: break;  // not a convolution direction
  }
  return {};
}

void execute_at(detail::ConvPlan& plan, const ConvDesc& desc, Direction direction,
                const TensorRoles& at, const Device& device, void* workspace) {
  Tensor x = Tensor::view(at.x, desc.src_dims(), desc.dtype, desc.layout, device);
  Tensor y = Tensor::view(at.y, desc.dst_dims(), desc.dtype, desc.layout, device);
  Tensor w = Tensor::view(at.w, desc.weights_dims(), desc.dtype, desc.layout, device);
  detail::ConvArgs args;
  switch (direction) {
    case Direction::fwd: args.src = &x, args.weights = &w, args.dst = &y; break;
    case Direction::bwd_data: args.diff_dst = &y, args.weights = &w, args.diff_src = &x; break;
    case Direction::bwd_weights: args.src = &x, args.diff_dst = &y, args.diff_weights = &w; break;
    case Direction::fwd_training: return;  // not a convolution direction
  }
  plan.execute(args, {workspace, plan.algo().workspace_bytes});
}

std::size_t geometry_dim(const ConvDesc& desc, int i) {
  return static_cast<std::size_t>(2 + (desc.spatial_dims == 1 ? 1 : i));
}

void check_workspace(const detail::Workspace& workspace, std::size_t needed,
                     const ErrorContext& context) {
  detail::check_workspace_bytes(workspace.bytes, workspace.data, needed, context);
}

bool contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

AlgoInfo off_entry(std::string_view id, std::string name, std::string reason, std::string note) {
  AlgoInfo info;
  info.id = std::string(id);
  info.name = std::move(name);
  info.reason = std::move(reason);
  info.notes = {std::move(note)};
  return info;
}

}  // namespace dnnx::cudnn
