// The reference backend as a subprocess for tests/python/torch_activation_parity.py:
//
//   activation_harness CASE_DIR
//
// reads CASE_DIR/case.json and float32 .npy inputs (logical N, C, spatial... order, whatever the
// layout), runs the case on the reference backend and writes float32 .npy outputs next to them:
//   {"op": "act", "kind", "alpha", "ceiling", "dims", "layout"}
//       in:  src.npy, diff_dst.npy
//       out: dst.npy, diff_src.npy (backward from src), and diff_src_from_dst.npy (backward from
//            dst alone, as after an in-place forward pass) for the kinds that allow it
//   {"op": "add", "src_dims", "dst_dims", "alpha", "beta", "layout"}
//       in:  src.npy, dst.npy (dst's contents before the add), diff_dst.npy
//       out: out.npy (dst after the add), diff_src.npy
// Exit 0 on success, 1 with one line on stderr on any failure, 2 on bad usage.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/activation.hpp>
#include <dnnx/ops/add.hpp>

#include "python/harness_common.hpp"

#include <span>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using dnnx::test::harness::load;
using dnnx::test::harness::save;

dnnx::Dims dims_of(const nlohmann::json& value, const char* field) {
  if (!value.is_array() || value.empty() || value.size() > 5) {
    throw std::runtime_error(std::string("case.json: '") + field +
                             "' must be a list of 1 to 5 sizes, got " + value.dump());
  }
  std::vector<std::int64_t> sizes;
  for (const auto& size : value) sizes.push_back(size.get<std::int64_t>());
  return dnnx::Dims(std::span<const std::int64_t>(sizes));
}

void run_activation(const fs::path& dir, const nlohmann::json& json) {
  dnnx::ActivationDesc desc;
  desc.kind = dnnx::parse_activation_kind(json.at("kind").get<std::string>());
  desc.alpha = json.value("alpha", 1.0);
  desc.ceiling = json.value("ceiling", 6.0);
  desc.dims = dims_of(json.at("dims"), "dims");
  desc.layout = dnnx::parse_layout(json.value("layout", "nchw"));
  desc.validate();
  const dnnx::Tensor src = load(dir, "src.npy", desc.dims, desc.layout);
  const dnnx::Tensor diff_dst = load(dir, "diff_dst.npy", desc.dims, desc.layout);

  dnnx::Context context(dnnx::BackendKind::reference);
  dnnx::Tensor dst = dnnx::Tensor::empty(desc.dims, dnnx::DType::f32, desc.layout);
  dnnx::activation_fwd(context, desc, src, dst);
  save(dir, "dst.npy", dst);

  dnnx::ActivationDesc from_src = desc;
  from_src.saved = dnnx::ActivationSaved::src;
  dnnx::Tensor diff_src = dnnx::Tensor::empty(desc.dims, dnnx::DType::f32, desc.layout);
  dnnx::activation_bwd(context, from_src, &src, nullptr, diff_dst, diff_src);
  save(dir, "diff_src.npy", diff_src);

  dnnx::ActivationDesc from_dst = desc;
  from_dst.saved = dnnx::ActivationSaved::dst;
  if (from_dst.bwd_computable()) {
    dnnx::activation_bwd(context, from_dst, nullptr, &dst, diff_dst, diff_src);
    save(dir, "diff_src_from_dst.npy", diff_src);
  }
}

void run_add(const fs::path& dir, const nlohmann::json& json) {
  dnnx::AddDesc desc;
  desc.src_dims = dims_of(json.at("src_dims"), "src_dims");
  desc.dst_dims = dims_of(json.at("dst_dims"), "dst_dims");
  desc.alpha = json.value("alpha", 1.0f);
  desc.beta = json.value("beta", 1.0f);
  desc.layout = dnnx::parse_layout(json.value("layout", "nchw"));
  desc.validate();
  const dnnx::Tensor src = load(dir, "src.npy", desc.src_dims, desc.layout);
  dnnx::Tensor dst = load(dir, "dst.npy", desc.dst_dims, desc.layout);
  const dnnx::Tensor diff_dst = load(dir, "diff_dst.npy", desc.dst_dims, desc.layout);

  dnnx::Context context(dnnx::BackendKind::reference);
  dnnx::add_fwd(context, desc, src, dst);
  save(dir, "out.npy", dst);
  dnnx::Tensor diff_src = dnnx::Tensor::empty(desc.src_dims, dnnx::DType::f32, desc.layout);
  dnnx::add_bwd(context, desc, diff_dst, diff_src);
  save(dir, "diff_src.npy", diff_src);
}

void run(const fs::path& dir) {
  const nlohmann::json json = dnnx::test::harness::read_json(dir / "case.json");
  const std::string op = json.at("op").get<std::string>();
  if (op == "act") {
    run_activation(dir, json);
  } else if (op == "add") {
    run_add(dir, json);
  } else {
    throw std::runtime_error("case.json: 'op' must be 'act' or 'add', got '" + op + "'");
  }
}

}  // namespace

int main(int argc, char** argv) {
  return dnnx::test::harness::main(argc, argv, "activation_harness",
                                   "(with case.json and the .npy inputs)", run);
}
