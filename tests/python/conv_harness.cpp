// The reference backend as a subprocess for tests/python/torch_conv_parity.py:
//
//   conv_harness CASE_DIR
//
// reads CASE_DIR/case.json (the ConvDesc fields) and the float32 .npy inputs src.npy,
// weights.npy, bias.npy, diff_dst.npy (logical N, C, spatial... order, whatever the layout),
// runs every direction on the reference backend and writes dst.npy (with bias), diff_src.npy,
// diff_weights.npy and diff_bias.npy next to them. Exit 0 on success, 1 with one line on stderr
// on any failure, 2 on bad usage.

#include "support/npy.hpp"

#include <dnnx/dnnx.hpp>

#include <nlohmann/json.hpp>

#include <array>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <span>
#include <vector>

namespace {

using dnnx::test::NpyArray;
namespace fs = std::filesystem;

std::array<std::int64_t, 3> spatial(const nlohmann::json& value, int spatial_dims,
                                    const char* field, std::int64_t fill) {
  if (!value.is_array() || value.size() != static_cast<std::size_t>(spatial_dims)) {
    throw std::runtime_error(std::string("case.json: '") + field + "' must be a list of " +
                             std::to_string(spatial_dims) + " integers, got " + value.dump());
  }
  std::array<std::int64_t, 3> out{fill, fill, fill};
  for (int i = 0; i < spatial_dims; ++i) out[static_cast<std::size_t>(i)] = value[static_cast<std::size_t>(i)];
  return out;
}

dnnx::ConvDesc read_desc(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path.string() + ": cannot open");
  const nlohmann::json json = nlohmann::json::parse(in);
  dnnx::ConvDesc desc;
  desc.spatial_dims = json.at("spatial_dims").get<int>();
  if (desc.spatial_dims < 1 || desc.spatial_dims > 3) {
    throw std::runtime_error("case.json: spatial_dims must be 1, 2 or 3, got " +
                             std::to_string(desc.spatial_dims));
  }
  desc.batch = json.at("batch").get<std::int64_t>();
  desc.in_channels = json.at("in_channels").get<std::int64_t>();
  desc.out_channels = json.at("out_channels").get<std::int64_t>();
  desc.groups = json.at("groups").get<std::int64_t>();
  desc.input = spatial(json.at("input"), desc.spatial_dims, "input", 0);
  desc.kernel = spatial(json.at("kernel"), desc.spatial_dims, "kernel", 0);
  desc.stride = spatial(json.at("stride"), desc.spatial_dims, "stride", 1);
  desc.pad_before = spatial(json.at("pad_before"), desc.spatial_dims, "pad_before", 0);
  desc.pad_after = spatial(json.at("pad_after"), desc.spatial_dims, "pad_after", 0);
  desc.dilation = spatial(json.at("dilation"), desc.spatial_dims, "dilation", 1);
  desc.layout = dnnx::parse_layout(json.value("layout", "nchw"));
  desc.dtype = dnnx::DType::f32;
  desc.validate();
  return desc;
}

// A tensor of the desc's layout holding `file`'s values, after checking its shape.
dnnx::Tensor load(const fs::path& dir, const char* name, const dnnx::Dims& dims,
                  dnnx::Layout layout) {
  const NpyArray array = dnnx::test::read_npy((dir / name).string());
  if (!(dnnx::Dims(std::span<const std::int64_t>(array.shape)) == dims)) {
    throw std::runtime_error((dir / name).string() + ": shape " +
                             dnnx::Dims(std::span<const std::int64_t>(array.shape)).to_string() +
                             " does not match the desc, which expects " + dims.to_string());
  }
  dnnx::Tensor tensor = dnnx::Tensor::empty(dims, dnnx::DType::f32, layout);
  tensor.copy_from_f32(array.data);
  return tensor;
}

void save(const fs::path& dir, const char* name, const dnnx::Tensor& tensor) {
  dnnx::test::write_npy((dir / name).string(),
                        std::vector<std::int64_t>(tensor.dims().begin(), tensor.dims().end()),
                        tensor.to_f32());
}

int run(const fs::path& dir) {
  const dnnx::ConvDesc desc = read_desc(dir / "case.json");
  const dnnx::Layout layout = desc.layout;
  const dnnx::Tensor src = load(dir, "src.npy", desc.src_dims(), layout);
  const dnnx::Tensor weights = load(dir, "weights.npy", desc.weights_dims(), layout);
  const dnnx::Tensor bias = load(dir, "bias.npy", desc.bias_dims(), dnnx::Layout::channels_first);
  const dnnx::Tensor diff_dst = load(dir, "diff_dst.npy", desc.dst_dims(), layout);

  dnnx::Context context(dnnx::BackendKind::reference);
  dnnx::Tensor dst = dnnx::Tensor::empty(desc.dst_dims(), dnnx::DType::f32, layout);
  dnnx::Tensor diff_src = dnnx::Tensor::empty(desc.src_dims(), dnnx::DType::f32, layout);
  dnnx::Tensor diff_weights = dnnx::Tensor::empty(desc.weights_dims(), dnnx::DType::f32, layout);
  dnnx::Tensor diff_bias = dnnx::Tensor::empty(desc.bias_dims(), dnnx::DType::f32);
  dnnx::conv_fwd(context, desc, src, weights, dst, &bias);
  dnnx::conv_bwd_data(context, desc, diff_dst, weights, diff_src);
  dnnx::conv_bwd_weights(context, desc, src, diff_dst, diff_weights, &diff_bias);

  save(dir, "dst.npy", dst);
  save(dir, "diff_src.npy", diff_src);
  save(dir, "diff_weights.npy", diff_weights);
  save(dir, "diff_bias.npy", diff_bias);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: conv_harness CASE_DIR (with case.json, src.npy, weights.npy, bias.npy, "
                 "diff_dst.npy)\n";
    return 2;
  }
  try {
    return run(argv[1]);
  } catch (const std::exception& error) {
    std::cerr << "conv_harness: " << error.what() << "\n";
    return 1;
  }
}
