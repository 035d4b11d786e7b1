// The reference optimizer and loss scaler as a subprocess for tests/python/torch_optim_parity.py:
//
//   optim_harness CASE_DIR
//
// reads CASE_DIR/case.json and float32 .npy files, runs the calls on the reference backend and
// writes float32 .npy results next to them. case.json's "op" is
//   "sgd" or "adam": {"shapes": [[dims]...], "dtype": "f32"|"f16"|"bf16", "master": bool, the
//     desc's flags ("momentum", "nesterov", "maximize" / "amsgrad", "decoupled", "maximize"),
//     the hyperparameters ("lr", "momentum_value", "dampening", "weight_decay" / "lr", "beta1",
//     "beta2", "eps", "weight_decay"), "steps", "found_inf" (one value per step: the desc takes
//     found_inf when any is nonzero), "grad_scale" (0: none)}; inputs param_<i>.npy and
//     grad_<step>_<i>.npy; the state starts at zero as torch's does; outputs param_<i>.npy,
//     master_<i>.npy (with "master"), buf_<i>.npy (sgd with momentum), exp_avg_<i>.npy,
//     exp_avg_sq_<i>.npy, max_exp_avg_sq_<i>.npy (adam, the last with amsgrad), step.npy;
//   "scaler": {"shapes", "dtype", "steps", "init_scale", "growth_factor", "backoff_factor",
//     "growth_interval"}; inputs grad_<step>_<i>.npy (scaled gradients, inf and NaN included);
//     per step GradScaler::unscale then update; outputs unscaled_<step>_<i>.npy,
//     found_inf_<step>.npy, scale_<step>.npy, tracker_<step>.npy.
// Exit 0 on success, 1 with one line on stderr on any failure, 2 on bad usage.

#include <dnnx/dnnx.hpp>

#include "harness_common.hpp"

#include <string>
#include <vector>

namespace {

using dnnx::Dims;
using dnnx::DType;
using dnnx::Tensor;
using dnnx::test::harness::load;
using dnnx::test::harness::save;
using dnnx::test::harness::fs::path;

constexpr dnnx::Layout rows = dnnx::Layout::channels_first;

std::string indexed(const std::string& role, std::size_t i) {
  return role + "_" + std::to_string(i) + ".npy";
}
std::string indexed(const std::string& role, int step, std::size_t i) {
  return role + "_" + std::to_string(step) + "_" + std::to_string(i) + ".npy";
}

Tensor as(const Tensor& f32, DType dtype) {
  Tensor t = Tensor::empty(f32.dims(), dtype, rows);
  t.copy_from_f32(f32.to_f32());
  return t;
}

Tensor scalar(DType dtype, float value) {
  Tensor t = Tensor::empty(Dims{1}, dtype, rows);
  t.fill(value);
  return t;
}

std::vector<Tensor> zeros(const std::vector<Dims>& shapes) {
  std::vector<Tensor> out;
  for (const Dims& dims : shapes) out.push_back(Tensor::zeros(dims, DType::f32));
  return out;
}

void save_all(const path& dir, const std::string& role, const std::vector<Tensor>& list) {
  for (std::size_t i = 0; i < list.size(); ++i) save(dir, indexed(role, i), list[i]);
}

void run(const path& dir) {
  const nlohmann::json json = dnnx::test::harness::read_json(dir / "case.json");
  const std::string op = json.at("op").get<std::string>();
  std::vector<Dims> shapes;
  for (const auto& dims : json.at("shapes"))
    shapes.push_back(Dims(std::span<const std::int64_t>(dims.get<std::vector<std::int64_t>>())));
  const DType dtype = dnnx::parse_dtype(json.at("dtype").get<std::string>());
  const int steps = json.at("steps").get<int>();
  dnnx::Context context(dnnx::BackendKind::reference);

  auto grads_of = [&](int step) {
    std::vector<Tensor> grads;
    for (std::size_t i = 0; i < shapes.size(); ++i)
      grads.push_back(as(load(dir, indexed("grad", step, i), shapes[i], rows), dtype));
    return grads;
  };

  if (op == "scaler") {
    dnnx::GradScaler scaler(
        context, json.at("init_scale").get<float>(),
        {json.at("growth_factor").get<double>(), json.at("backoff_factor").get<double>(),
         json.at("growth_interval").get<std::int64_t>()});
    for (int s = 0; s < steps; ++s) {
      std::vector<Tensor> grads = grads_of(s);
      scaler.unscale(context, grads, dtype);
      for (std::size_t i = 0; i < grads.size(); ++i) save(dir, indexed("unscaled", s, i), grads[i]);
      save(dir, "found_inf_" + std::to_string(s) + ".npy", scaler.found_inf());
      scaler.update(context);
      save(dir, "scale_" + std::to_string(s) + ".npy", scaler.scale());
      save(dir, "tracker_" + std::to_string(s) + ".npy", scaler.growth_tracker());
    }
    return;
  }

  const std::vector<float> found = json.at("found_inf").get<std::vector<float>>();
  bool any_found = false;
  for (const float f : found) any_found = any_found || f != 0.0f;
  const float grad_scale_value = json.at("grad_scale").get<float>();
  const bool master_weights = json.at("master").get<bool>();
  std::vector<Tensor> params, master;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const Tensor p = load(dir, indexed("param", i), shapes[i], rows);
    params.push_back(as(p, dtype));
    if (master_weights) master.push_back(p);
  }
  Tensor step = scalar(DType::f32, 0);
  Tensor grad_scale = scalar(DType::f32, grad_scale_value);
  Tensor found_inf = scalar(DType::f32, 0);
  const Tensor* grad_scale_arg = grad_scale_value != 0 ? &grad_scale : nullptr;
  const Tensor* found_inf_arg = any_found ? &found_inf : nullptr;

  if (op == "sgd") {
    dnnx::SgdDesc d;
    d.shapes = shapes;
    d.dtype = dtype;
    d.master_weights = master_weights;
    d.momentum = json.at("momentum").get<bool>();
    d.nesterov = json.at("nesterov").get<bool>();
    d.maximize = json.at("maximize").get<bool>();
    d.grad_scale = grad_scale_arg != nullptr;
    d.found_inf = found_inf_arg != nullptr;
    const dnnx::SgdHyper h{json.at("lr").get<double>(), json.at("momentum_value").get<double>(),
                           json.at("dampening").get<double>(),
                           json.at("weight_decay").get<double>()};
    std::vector<Tensor> buffers = d.momentum ? zeros(shapes) : std::vector<Tensor>();
    for (int s = 0; s < steps; ++s) {
      found_inf.fill(found.at(static_cast<std::size_t>(s)));
      const std::vector<Tensor> grads = grads_of(s);
      dnnx::sgd_step(context, d, h,
                     {params, grads, master, buffers, &step, grad_scale_arg, found_inf_arg});
    }
    if (d.momentum) save_all(dir, "buf", buffers);
  } else if (op == "adam") {
    dnnx::AdamDesc d;
    d.shapes = shapes;
    d.dtype = dtype;
    d.master_weights = master_weights;
    d.amsgrad = json.at("amsgrad").get<bool>();
    d.decoupled_weight_decay = json.at("decoupled").get<bool>();
    d.maximize = json.at("maximize").get<bool>();
    d.grad_scale = grad_scale_arg != nullptr;
    d.found_inf = found_inf_arg != nullptr;
    const dnnx::AdamHyper h{json.at("lr").get<double>(), json.at("beta1").get<double>(),
                            json.at("beta2").get<double>(), json.at("eps").get<double>(),
                            json.at("weight_decay").get<double>()};
    std::vector<Tensor> m = zeros(shapes), v = zeros(shapes);
    std::vector<Tensor> v_max = d.amsgrad ? zeros(shapes) : std::vector<Tensor>();
    for (int s = 0; s < steps; ++s) {
      found_inf.fill(found.at(static_cast<std::size_t>(s)));
      const std::vector<Tensor> grads = grads_of(s);
      dnnx::adam_step(context, d, h,
                      {params, grads, master, m, v, v_max, &step, grad_scale_arg, found_inf_arg});
    }
    save_all(dir, "exp_avg", m);
    save_all(dir, "exp_avg_sq", v);
    if (d.amsgrad) save_all(dir, "max_exp_avg_sq", v_max);
  } else {
    throw std::runtime_error("case.json: unknown op '" + op + "'");
  }
  save_all(dir, "param", params);
  if (master_weights) save_all(dir, "master", master);
  save(dir, "step.npy", step);
}

}  // namespace

int main(int argc, char** argv) {
  return dnnx::test::harness::main(argc, argv, "optim_harness",
                                   "(with case.json, param_<i>.npy, grad_<step>_<i>.npy)", run);
}
