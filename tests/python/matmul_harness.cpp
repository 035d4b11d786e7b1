// The reference matmul as a subprocess for tests/python/torch_matmul_parity.py:
//
//   matmul_harness CASE_DIR
//
// reads CASE_DIR/case.json ({"batch", "m", "n", "k": integers, "transpose_a", "transpose_b",
// "broadcast_b", "bias": booleans, optional "broadcast_a" (false), "alpha", "beta": numbers,
// optional "activation": "none", "relu" or "gelu_tanh"}) and the float32 .npy inputs a, b,
// diff_dst, bias (with "bias") and the outputs' previous contents dst0, diff_a0, diff_b0,
// diff_bias0 (with "bias"), each as MatmulDesc's dims say; runs fwd, bwd_data and bwd_weights on
// the reference backend in f32 (with an activation: fwd_training, whose SavedState both backward
// passes read) and writes dst.npy, diff_a.npy, diff_b.npy (and diff_bias.npy) next to them. Exit 0
// on success, 1 with one line on stderr on any failure, 2 on bad usage.

#include <dnnx/dnnx.hpp>

#include "harness_common.hpp"

namespace {

using dnnx::test::harness::fs::path;
using dnnx::test::harness::load;
using dnnx::test::harness::save;

dnnx::MatmulDesc read_desc(const path& file) {
  const nlohmann::json json = dnnx::test::harness::read_json(file);
  dnnx::MatmulDesc desc;
  desc.batch = json.at("batch").get<std::int64_t>();
  desc.m = json.at("m").get<std::int64_t>();
  desc.n = json.at("n").get<std::int64_t>();
  desc.k = json.at("k").get<std::int64_t>();
  desc.transpose_a = json.at("transpose_a").get<bool>();
  desc.transpose_b = json.at("transpose_b").get<bool>();
  desc.broadcast_b = json.at("broadcast_b").get<bool>();
  desc.broadcast_a = json.value("broadcast_a", false);
  desc.bias = json.at("bias").get<bool>();
  desc.alpha = json.at("alpha").get<float>();
  desc.beta = json.at("beta").get<float>();
  desc.dtype = dnnx::DType::f32;
  if (json.contains("activation"))
    desc.activation = dnnx::parse_matmul_activation(json.at("activation").get<std::string>());
  desc.validate();
  return desc;
}

void run(const path& dir) {
  const dnnx::MatmulDesc d = read_desc(dir / "case.json");
  const dnnx::Layout rows = dnnx::Layout::channels_first;
  const dnnx::Tensor a = load(dir, "a.npy", d.a_dims(), rows);
  const dnnx::Tensor b = load(dir, "b.npy", d.b_dims(), rows);
  const dnnx::Tensor diff_dst = load(dir, "diff_dst.npy", d.dst_dims(), rows);
  const dnnx::Tensor bias = d.bias ? load(dir, "bias.npy", d.bias_dims(), rows) : dnnx::Tensor();
  dnnx::Tensor dst = load(dir, "dst0.npy", d.dst_dims(), rows);
  dnnx::Tensor diff_a = load(dir, "diff_a0.npy", d.a_dims(), rows);
  dnnx::Tensor diff_b = load(dir, "diff_b0.npy", d.b_dims(), rows);
  dnnx::Tensor diff_bias =
      d.bias ? load(dir, "diff_bias0.npy", d.bias_dims(), rows) : dnnx::Tensor();
  dnnx::Context context(dnnx::BackendKind::reference);
  if (d.activation == dnnx::MatmulActivation::none) {
    dnnx::matmul_fwd(context, d, a, b, bias, dst);
    dnnx::matmul_bwd_data(context, d, diff_dst, b, diff_a);
    dnnx::matmul_bwd_weights(context, d, a, diff_dst, diff_b, diff_bias);
  } else {
    dnnx::SavedState state;
    dnnx::matmul_fwd_training(context, d, a, b, bias, dst, state);
    dnnx::matmul_bwd_data(context, d, diff_dst, b, diff_a, state);
    dnnx::matmul_bwd_weights(context, d, a, diff_dst, diff_b, diff_bias, state);
  }
  save(dir, "dst.npy", dst);
  save(dir, "diff_a.npy", diff_a);
  save(dir, "diff_b.npy", diff_b);
  if (d.bias) save(dir, "diff_bias.npy", diff_bias);
}

}  // namespace

int main(int argc, char** argv) {
  return dnnx::test::harness::main(
      argc, argv, "matmul_harness",
      "(with case.json, a.npy, b.npy, diff_dst.npy, dst0.npy, diff_a0.npy, diff_b0.npy)", run);
}
