// The reference softmax as a subprocess for tests/python/torch_softmax_parity.py:
//
//   softmax_harness CASE_DIR
//
// reads CASE_DIR/case.json ({"dims": [...], "mode": "channel"|"instance", "log": bool,
// "layout": "nchw"|"nhwc"}) and the float32 .npy inputs src.npy and diff_dst.npy (logical N, C,
// spatial... order, whatever the layout), runs the forward and then the backward (from the
// forward's dst) on the reference backend in f32, and writes dst.npy and diff_src.npy next to
// them. Exit 0 on success, 1 with one line on stderr on any failure, 2 on bad usage.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/softmax.hpp>

#include "support/npy.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <span>
#include <string>
#include <vector>

namespace {

using dnnx::test::NpyArray;
namespace fs = std::filesystem;

dnnx::SoftmaxDesc read_desc(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path.string() + ": cannot open");
  const nlohmann::json json = nlohmann::json::parse(in);
  const std::vector<std::int64_t> dims = json.at("dims").get<std::vector<std::int64_t>>();
  if (dims.empty() || dims.size() > 5) {
    throw std::runtime_error("case.json: 'dims' must hold 1 to 5 integers, got " +
                             json.at("dims").dump());
  }
  dnnx::SoftmaxDesc desc;
  desc.dims = dnnx::Dims(std::span<const std::int64_t>(dims));
  desc.mode = dnnx::parse_softmax_mode(json.at("mode").get<std::string>());
  desc.log = json.at("log").get<bool>();
  desc.layout = dnnx::parse_layout(json.value("layout", "nchw"));
  desc.dtype = dnnx::DType::f32;
  desc.validate();
  return desc;
}

dnnx::Tensor load(const fs::path& dir, const char* name, const dnnx::SoftmaxDesc& desc) {
  const NpyArray array = dnnx::test::read_npy((dir / name).string());
  if (!(dnnx::Dims(std::span<const std::int64_t>(array.shape)) == desc.dims)) {
    throw std::runtime_error((dir / name).string() + ": shape " +
                             dnnx::Dims(std::span<const std::int64_t>(array.shape)).to_string() +
                             " does not match the desc, which expects " + desc.dims.to_string());
  }
  dnnx::Tensor tensor = dnnx::Tensor::empty(desc.dims, dnnx::DType::f32, desc.layout);
  tensor.copy_from_f32(array.data);
  return tensor;
}

void save(const fs::path& dir, const char* name, const dnnx::Tensor& tensor) {
  dnnx::test::write_npy((dir / name).string(),
                        std::vector<std::int64_t>(tensor.dims().begin(), tensor.dims().end()),
                        tensor.to_f32());
}

int run(const fs::path& dir) {
  const dnnx::SoftmaxDesc desc = read_desc(dir / "case.json");
  const dnnx::Tensor src = load(dir, "src.npy", desc);
  const dnnx::Tensor diff_dst = load(dir, "diff_dst.npy", desc);
  dnnx::Context context(dnnx::BackendKind::reference);
  dnnx::Tensor dst = dnnx::Tensor::empty(desc.dims, dnnx::DType::f32, desc.layout);
  dnnx::Tensor diff_src = dnnx::Tensor::empty(desc.dims, dnnx::DType::f32, desc.layout);
  dnnx::softmax_fwd(context, desc, src, dst);
  dnnx::softmax_bwd(context, desc, dst, diff_dst, diff_src);
  save(dir, "dst.npy", dst);
  save(dir, "diff_src.npy", diff_src);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: softmax_harness CASE_DIR (with case.json, src.npy, diff_dst.npy)\n";
    return 2;
  }
  try {
    return run(argv[1]);
  } catch (const std::exception& error) {
    std::cerr << "softmax_harness: " << error.what() << "\n";
    return 1;
  }
}
