// The reference pooling as a subprocess for tests/python/torch_pool_parity.py:
//
//   pool_harness CASE_DIR
//
// reads CASE_DIR/case.json (the PoolDesc fields: spatial_dims, batch, channels, input, kernel,
// stride, pad_before, pad_after, ceil_mode, mode, layout, and optionally dilation and indices)
// and the float32
// .npy inputs src.npy and diff_dst.npy (logical N, C, spatial... order, whatever the layout),
// runs forward and backward on the reference backend in f32 and writes dst.npy and diff_src.npy
// next to them. With "indices": true the forward also writes its i64 argmax indices, saved as
// indices.npy (float32, exact: every case's planes are far below 2^24 elements), and the backward
// reads them. Exit 0 on success, 1 with one line on stderr on any failure, 2 on bad usage.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/pool.hpp>

#include "python/harness_common.hpp"

#include <array>
#include <string>

namespace {

namespace fs = std::filesystem;
using dnnx::test::harness::load;
using dnnx::test::harness::save;

std::array<std::int64_t, 3> spatial(const nlohmann::json& value, int spatial_dims,
                                    const char* field, std::int64_t fill) {
  if (!value.is_array() || value.size() != static_cast<std::size_t>(spatial_dims)) {
    throw std::runtime_error(std::string("case.json: '") + field + "' must be a list of " +
                             std::to_string(spatial_dims) + " integers, got " + value.dump());
  }
  std::array<std::int64_t, 3> out{fill, fill, fill};
  for (int i = 0; i < spatial_dims; ++i)
    out[static_cast<std::size_t>(i)] = value[static_cast<std::size_t>(i)];
  return out;
}

dnnx::PoolDesc read_desc(const fs::path& path) {
  const nlohmann::json json = dnnx::test::harness::read_json(path);
  dnnx::PoolDesc desc;
  desc.spatial_dims = json.at("spatial_dims").get<int>();
  if (desc.spatial_dims < 1 || desc.spatial_dims > 3) {
    throw std::runtime_error("case.json: spatial_dims must be 1, 2 or 3, got " +
                             std::to_string(desc.spatial_dims));
  }
  desc.batch = json.at("batch").get<std::int64_t>();
  desc.channels = json.at("channels").get<std::int64_t>();
  desc.input = spatial(json.at("input"), desc.spatial_dims, "input", 0);
  desc.kernel = spatial(json.at("kernel"), desc.spatial_dims, "kernel", 1);
  desc.stride = spatial(json.at("stride"), desc.spatial_dims, "stride", 1);
  desc.pad_before = spatial(json.at("pad_before"), desc.spatial_dims, "pad_before", 0);
  desc.pad_after = spatial(json.at("pad_after"), desc.spatial_dims, "pad_after", 0);
  if (json.contains("dilation"))
    desc.dilation = spatial(json.at("dilation"), desc.spatial_dims, "dilation", 1);
  desc.ceil_mode = json.at("ceil_mode").get<bool>();
  desc.mode = dnnx::parse_pool_mode(json.at("mode").get<std::string>());
  desc.indices = json.value("indices", false);
  desc.layout = dnnx::parse_layout(json.value("layout", "nchw"));
  desc.dtype = dnnx::DType::f32;
  desc.validate();
  return desc;
}

void run(const fs::path& dir) {
  const dnnx::PoolDesc desc = read_desc(dir / "case.json");
  const dnnx::Tensor src = load(dir, "src.npy", desc.src_dims(), desc.layout);
  const dnnx::Tensor diff_dst = load(dir, "diff_dst.npy", desc.dst_dims(), desc.layout);
  dnnx::Context context(dnnx::BackendKind::reference);
  context.set_choice_cache(std::make_shared<dnnx::ChoiceCache>());
  dnnx::Tensor dst = dnnx::Tensor::empty(desc.dst_dims(), dnnx::DType::f32, desc.layout);
  dnnx::Tensor diff_src = dnnx::Tensor::empty(desc.src_dims(), dnnx::DType::f32, desc.layout);
  if (desc.indices) {
    dnnx::Tensor indices = dnnx::Tensor::empty(desc.dst_dims(), dnnx::DType::i64, desc.layout);
    dnnx::pool_fwd(context, desc, src, dst, indices);
    dnnx::pool_bwd(context, desc, diff_dst, indices, diff_src);
    save(dir, "indices.npy", indices);
  } else {
    dnnx::pool_fwd(context, desc, src, dst);
    dnnx::pool_bwd(context, desc, src, dst, diff_dst, diff_src);
  }
  save(dir, "dst.npy", dst);
  save(dir, "diff_src.npy", diff_src);
}

}  // namespace

int main(int argc, char** argv) {
  return dnnx::test::harness::main(argc, argv, "pool_harness",
                                   "(with case.json, src.npy, diff_dst.npy)", run);
}
