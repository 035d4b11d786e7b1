// The reference backend's batch normalization as a subprocess for
// tests/python/torch_bnorm_parity.py:
//
//   bnorm_harness CASE_DIR
//
// reads CASE_DIR/case.json (dims, mode, training, affine, eps, momentum, layout, steps) and the
// float32 .npy inputs (logical N, C, spatial... order whatever the layout): src_0.npy ...
// src_<steps-1>.npy, diff_dst.npy, running_mean.npy, running_var.npy and, when affine, scale.npy
// and shift.npy (parameters shaped as BatchNormDesc::param_dims()). It runs `steps` forwards on
// the reference backend, carrying the running statistics (updated by training forwards), then a
// backward of the last step, and writes dst.npy (last step), running_mean_out.npy,
// running_var_out.npy, saved_mean.npy and saved_inv_std.npy (training), diff_src.npy and, when
// affine, diff_scale.npy and diff_shift.npy. Exit 0 on success, 1 with one line on stderr on any
// failure, 2 on bad usage.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/batch_norm.hpp>

#include "python/harness_common.hpp"

#include <span>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using dnnx::Dims;
using dnnx::Tensor;
using dnnx::test::harness::load;
using dnnx::test::harness::save;

struct Case {
  dnnx::BatchNormDesc desc;
  int steps = 1;
};

Case read_case(const fs::path& path) {
  const nlohmann::json json = dnnx::test::harness::read_json(path);
  Case c;
  c.desc.dims =
      Dims(std::span<const std::int64_t>(json.at("dims").get<std::vector<std::int64_t>>()));
  c.desc.mode = dnnx::parse_batch_norm_mode(json.at("mode").get<std::string>());
  c.desc.training = json.at("training").get<bool>();
  c.desc.affine = json.at("affine").get<bool>();
  c.desc.eps = json.at("eps").get<double>();
  c.desc.momentum = json.at("momentum").get<double>();
  c.desc.layout = dnnx::parse_layout(json.value("layout", "nchw"));
  c.desc.dtype = dnnx::DType::f32;
  c.steps = json.value("steps", 1);
  if (c.steps < 1) throw std::runtime_error("case.json: steps must be >= 1");
  c.desc.validate();
  return c;
}

dnnx::Layout param_layout(const dnnx::BatchNormDesc& desc) {
  return desc.param_dims().rank() == 1 ? dnnx::Layout::channels_first : desc.layout;
}

void run(const fs::path& dir) {
  const Case c = read_case(dir / "case.json");
  const dnnx::BatchNormDesc& desc = c.desc;
  const Dims params = desc.param_dims();
  const dnnx::Layout layout = param_layout(desc);
  dnnx::Context context(dnnx::BackendKind::reference);

  Tensor scale, shift;
  if (desc.affine) {
    scale = load(dir, "scale.npy", params, layout);
    shift = load(dir, "shift.npy", params, layout);
  }
  Tensor running_mean = load(dir, "running_mean.npy", params, layout);
  Tensor running_var = load(dir, "running_var.npy", params, layout);
  Tensor saved_mean = Tensor::empty(params, dnnx::DType::f32, layout);
  Tensor saved_inv_std = Tensor::empty(params, dnnx::DType::f32, layout);
  dnnx::BatchNormTensors tensors;
  if (desc.affine) {
    tensors.scale = &scale;
    tensors.shift = &shift;
  }
  tensors.running_mean = &running_mean;
  tensors.running_var = &running_var;
  if (desc.training) {
    tensors.saved_mean = &saved_mean;
    tensors.saved_inv_std = &saved_inv_std;
  }

  Tensor src;
  Tensor dst = Tensor::empty(desc.dims, dnnx::DType::f32, desc.layout);
  // The backward reads the running statistics the last forward normalised with (inference
  // leaves them unchanged).
  for (int step = 0; step < c.steps; ++step) {
    src = load(dir, "src_" + std::to_string(step) + ".npy", desc.dims, desc.layout);
    dnnx::batch_norm_fwd(context, desc, src, dst, tensors);
  }
  save(dir, "dst.npy", dst);
  save(dir, "running_mean_out.npy", running_mean);
  save(dir, "running_var_out.npy", running_var);
  if (desc.training) {
    save(dir, "saved_mean.npy", saved_mean);
    save(dir, "saved_inv_std.npy", saved_inv_std);
  }

  const Tensor diff_dst = load(dir, "diff_dst.npy", desc.dims, desc.layout);
  Tensor diff_src = Tensor::empty(desc.dims, dnnx::DType::f32, desc.layout);
  Tensor diff_scale = Tensor::empty(params, dnnx::DType::f32, layout);
  Tensor diff_shift = Tensor::empty(params, dnnx::DType::f32, layout);
  dnnx::batch_norm_bwd(context, desc, src, diff_dst, tensors, diff_src,
                       desc.affine ? &diff_scale : nullptr, desc.affine ? &diff_shift : nullptr);
  save(dir, "diff_src.npy", diff_src);
  if (desc.affine) {
    save(dir, "diff_scale.npy", diff_scale);
    save(dir, "diff_shift.npy", diff_shift);
  }
}

}  // namespace

int main(int argc, char** argv) {
  return dnnx::test::harness::main(argc, argv, "bnorm_harness",
                                   "(with case.json, src_<i>.npy, diff_dst.npy, running_mean.npy, "
                                   "running_var.npy, scale.npy, shift.npy)",
                                   run);
}
