// The optimizer and loss-scaling case table and its ParityCase: a case runs `steps` calls from a
// state drawn from its name's seed, on tensors placed on the context's device (one element into
// their allocation when misaligned), and returns every list the calls wrote, concatenated per list.

#include "ops/optim_cases.hpp"

#include "support/compare.hpp"
#include "support/random.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace dnnx::test {
namespace {

constexpr Layout rows = Layout::channels_first;

// Odd sizes, an empty tensor, a scalar-like {1}, one tensor of several chunks with a tail.
std::vector<Dims> odd_shapes() {
  return {Dims{7}, Dims{3, 5}, Dims{0}, Dims{1}, Dims{2, 3, 4, 5}, Dims{3, 16387}, Dims{33}};
}

// `count` tensors of sizes 1 to 97 (a few empty), for the many-tensor cases.
std::vector<Dims> many_shapes(int count) {
  std::vector<Dims> shapes;
  for (int i = 0; i < count; ++i) shapes.push_back(i % 37 == 5 ? Dims{0} : Dims{1 + (i * 31) % 97});
  return shapes;
}

std::vector<OptimCase> make_cases() {
  std::vector<OptimCase> cases;
  auto sgd = [&](std::string name, std::vector<Dims> shapes, auto edit) {
    OptimCase c;
    c.name = std::move(name);
    c.op = OpKind::sgd;
    c.shapes = std::move(shapes);
    edit(c);
    cases.push_back(std::move(c));
  };
  auto adam = [&](std::string name, std::vector<Dims> shapes, auto edit) {
    OptimCase c;
    c.name = std::move(name);
    c.op = OpKind::adam;
    c.shapes = std::move(shapes);
    edit(c);
    cases.push_back(std::move(c));
  };
  sgd("sgd_plain", odd_shapes(), [](OptimCase& c) { c.sgd_hyper.lr = 0.1; });
  sgd("sgd_momentum_decay", odd_shapes(), [](OptimCase& c) {
    c.sgd.momentum = true;
    c.sgd_hyper = {0.05, 0.9, 0.1, 0.01};
  });
  sgd("sgd_nesterov_maximize", odd_shapes(), [](OptimCase& c) {
    c.sgd.momentum = c.sgd.nesterov = c.sgd.maximize = true;
    c.sgd_hyper = {0.05, 0.8, 0.0, 0.02};
  });
  // The second call is skipped: the first step's buffer rule must still hold at the third.
  sgd("sgd_master_scaled_skip", odd_shapes(), [](OptimCase& c) {
    c.sgd.momentum = c.sgd.master_weights = c.sgd.grad_scale = c.sgd.found_inf = true;
    c.sgd_hyper = {0.05, 0.9, 0.0, 0.001};
    c.grad_scale = 3.0f;
    c.found_inf = {1, 0, 1, 0};
    c.steps = 4;
  });
  sgd("sgd_many_misaligned", many_shapes(300), [](OptimCase& c) {
    c.sgd.momentum = true;
    c.sgd_hyper = {0.05, 0.9, 0.0, 0.0};
    c.misaligned = true;
  });
  sgd("sgd_over_table", many_shapes(470), [](OptimCase& c) {
    c.sgd.momentum = true;
    c.sgd_hyper = {0.05, 0.5, 0.25, 0.0};
    c.steps = 2;
  });
  adam("adam_plain", odd_shapes(), [](OptimCase& c) { c.adam_hyper.lr = 0.01; });
  adam("adam_amsgrad_decay", odd_shapes(), [](OptimCase& c) {
    c.adam.amsgrad = true;
    c.adam_hyper = {0.01, 0.8, 0.95, 1e-6, 0.05};
  });
  adam("adamw_maximize", odd_shapes(), [](OptimCase& c) {
    c.adam.decoupled_weight_decay = c.adam.maximize = true;
    c.adam_hyper = {0.01, 0.9, 0.999, 1e-8, 0.1};
  });
  adam("adam_master_scaled_skip", odd_shapes(), [](OptimCase& c) {
    c.adam.amsgrad = c.adam.master_weights = c.adam.grad_scale = c.adam.found_inf = true;
    c.adam_hyper = {0.01, 0.9, 0.99, 1e-8, 0.01};
    c.grad_scale = 1024.0f;
    c.found_inf = {0, 1, 0, 0};
    c.steps = 4;
  });
  adam("adam_many_misaligned", many_shapes(200), [](OptimCase& c) {
    c.adam.decoupled_weight_decay = true;
    c.adam_hyper = {0.01, 0.9, 0.999, 1e-8, 0.01};
    c.misaligned = true;
  });
  auto unscale = [&](std::string name, auto edit) {
    OptimCase c;
    c.name = std::move(name);
    c.op = OpKind::unscale;
    c.shapes = odd_shapes();
    c.steps = 1;
    edit(c);
    cases.push_back(std::move(c));
  };
  unscale("unscale_finite", [](OptimCase& c) {
    c.grad_scale = 0.125f;
    c.found_inf = {0};
  });
  unscale("unscale_non_finite", [](OptimCase& c) {
    c.grad_scale = 1.0f / 3.0f;
    c.found_inf = {0};
    c.non_finite = true;
  });
  // found_inf starts at 1 and is reset: it must end 0 (finite gradients).
  unscale("unscale_reset_from_scale", [](OptimCase& c) {
    c.unscale.reset_found_inf = c.unscale.from_scale = true;
    c.grad_scale = 3.0f;
    c.found_inf = {1};
  });
  unscale("unscale_kept_found_inf", [](OptimCase& c) {
    c.grad_scale = 1.0f;
    c.found_inf = {1};
  });
  OptimCase update;
  update.name = "update_scale_sequence";
  update.op = OpKind::update_scale;
  update.update_hyper = {2.0, 0.5, 3};
  update.found_inf = {0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0};
  cases.push_back(update);
  return cases;
}

std::uint64_t seed_of(const std::string& name, DType dtype, const char* role, std::size_t index,
                      int step = 0) {
  return seed_from(name + "/" + std::string(to_string(dtype)) + "/" + role + "/" +
                   std::to_string(index) + "/" + std::to_string(step));
}

Tensor host_values(const Dims& dims, DType dtype, std::uint64_t seed, float lo, float hi,
                   float factor = 1.0f) {
  std::vector<float> values =
      random_uniform(static_cast<std::size_t>(dims.product()), seed, lo, hi);
  for (float& v : values) v *= factor;
  return tensor_from(dims, dtype, rows, values);
}

Tensor host_scalar(DType dtype, float value) {
  Tensor t = Tensor::empty(Dims{1}, dtype);
  t.fill(value);
  return t;
}

Tensor to_host(const Tensor& tensor) {
  Tensor host = Tensor::empty(tensor.dims(), tensor.dtype());
  copy(tensor, host);
  return host;
}

// The tensors of one run on a context: allocations kept alive, views placed as the case asks.
class Placement {
 public:
  Placement(Context& context, bool misaligned) : context_(context), misaligned_(misaligned) {}

  Tensor place(const Tensor& host) {
    if (!misaligned_ || host.numel() == 0) {
      Tensor t = Tensor::empty(host.dims(), host.dtype(), rows, context_.allocator());
      copy(host, t);
      return t;
    }
    Tensor owner = Tensor::empty(Dims{host.numel() + 1}, host.dtype(), rows, context_.allocator());
    owners_.push_back(owner);
    char* data = static_cast<char*>(owner.data()) + size_of(host.dtype());
    Tensor view = Tensor::view(data, host.dims(), host.dtype(), rows, context_.device());
    copy(host, view);
    return view;
  }
  std::vector<Tensor> place_all(const std::vector<Tensor>& hosts) {
    std::vector<Tensor> out;
    out.reserve(hosts.size());
    for (const Tensor& host : hosts) out.push_back(place(host));
    return out;
  }
  Tensor scalar(DType dtype, float value) {
    Tensor t = Tensor::empty(Dims{1}, dtype, rows, context_.allocator());
    copy(host_scalar(dtype, value), t);
    return t;
  }

 private:
  Context& context_;
  bool misaligned_;
  std::vector<Tensor> owners_;
};

// Every tensor of `list` copied back and concatenated into one host tensor {total} of its dtype.
ParityOutput concat(std::string name, const std::vector<Tensor>& list, DType dtype) {
  std::vector<float> values;
  for (const Tensor& t : list) {
    const std::vector<float> v = to_host(t).to_f32();
    values.insert(values.end(), v.begin(), v.end());
  }
  return {std::move(name),
          tensor_from(Dims{static_cast<std::int64_t>(values.size())}, dtype, rows, values)};
}

std::vector<Tensor> random_list(const OptimCase& c, DType dtype, DType list_dtype, const char* role,
                                float lo, float hi, int step = 0, float factor = 1.0f) {
  std::vector<Tensor> list;
  for (std::size_t i = 0; i < c.shapes.size(); ++i)
    list.push_back(host_values(c.shapes[i], list_dtype, seed_of(c.name, dtype, role, i, step), lo,
                               hi, factor));
  return list;
}

std::vector<Tensor> as_f32(const std::vector<Tensor>& list) {
  std::vector<Tensor> out;
  for (const Tensor& t : list) out.push_back(tensor_from(t.dims(), DType::f32, rows, t.to_f32()));
  return out;
}

int non_empty(const std::vector<Dims>& shapes) {
  return static_cast<int>(
      std::count_if(shapes.begin(), shapes.end(), [](const Dims& d) { return d.product() > 0; }));
}

class OptimParityCase final : public ParityCase {
 public:
  OptimParityCase(const OptimCase& c, DType dtype) : c_(c), dtype_(dtype) {
    c_.sgd.shapes = c_.adam.shapes = c_.unscale.shapes = c_.shapes;
    c_.sgd.dtype = c_.adam.dtype = c_.unscale.dtype = dtype;
  }

  OpKind op_kind() const override { return c_.op; }
  std::string label() const override { return c_.name + " " + std::string(to_string(dtype_)); }
  std::string where(Direction direction, std::string_view candidate) const override {
    std::ostringstream out;
    out << to_string(c_.op) << " case " << c_.name << " " << to_string(dtype_) << " [" << candidate
        << "] | " << repro(direction);
    return out.str();
  }
  std::vector<AlgoInfo> list(Context& context, Direction direction) const override {
    switch (c_.op) {
      case OpKind::sgd: return sgd_list(context, c_.sgd, direction);
      case OpKind::adam: return adam_list(context, c_.adam, direction);
      case OpKind::unscale: return unscale_list(context, c_.unscale, direction);
      default: return update_scale_list(context, UpdateScaleDesc{}, direction);
    }
  }
  ParityRun run(Context& context, Direction) const override {
    switch (c_.op) {
      case OpKind::sgd: return run_sgd(context);
      case OpKind::adam: return run_adam(context);
      case OpKind::unscale: return run_unscale(context);
      default: return run_update_scale(context);
    }
  }
  // Non-finite values only where the reference has them (the unscale cases plant some).
  ::testing::AssertionResult finite(const ParityRun& run, const ParityRun& expected,
                                    std::string_view where) const override {
    for (std::size_t i = 0; i < run.outputs.size() && i < expected.outputs.size(); ++i) {
      auto result = finite_where_expected(run.outputs[i].tensor, expected.outputs[i].tensor,
                                          run.outputs[i].name, where);
      if (!result) return result;
    }
    return ::testing::AssertionSuccess();
  }
  // f32 arithmetic against the reference's f64, a few roundings per call over a few calls:
  // 1e-5 of the element, and at least 1e-5 of 5% of the list's largest value (a few f32 units of
  // it, where an update cancelled a large value to a small one). f16/bf16 outputs: two units in
  // the last place of the element, and at least one of the list's largest value (a rounding tie
  // decided the other way in an earlier call, when the element was larger). Such a tie also
  // reaches the f32 state of f16/bf16 parameters without master copies, through the weight
  // decay: there the state is held to state_rel().
  ::testing::AssertionResult close(Direction, const AlgoInfo&, const ParityRun& actual,
                                   const ParityExpected& expected, std::string_view where,
                                   double* worst) const override {
    if (actual.outputs.size() != expected.run.outputs.size())
      return ::testing::AssertionFailure() << "output count differs | " << where;
    for (std::size_t i = 0; i < actual.outputs.size(); ++i) {
      const Tensor& a = actual.outputs[i].tensor;
      const Tensor& e = expected.run.outputs[i].tensor;
      std::vector<float> av = a.to_f32();
      std::vector<float> ev = e.to_f32();
      if (av.size() != ev.size())
        return ::testing::AssertionFailure()
               << actual.outputs[i].name << " sizes differ | " << where;
      float largest = 0;
      for (float v : ev) {
        if (std::isfinite(v)) largest = std::max(largest, std::abs(v));
      }
      std::vector<float> scale(ev.size());
      for (std::size_t k = 0; k < ev.size(); ++k) {
        // Non-finite values must match exactly (NaN with NaN): compared here, then excluded.
        if (!std::isfinite(ev[k]) || !std::isfinite(av[k])) {
          const bool same = (std::isnan(ev[k]) && std::isnan(av[k])) || ev[k] == av[k];
          if (!same) {
            return ::testing::AssertionFailure()
                   << actual.outputs[i].name << "[" << k << "] is " << av[k] << ", expected "
                   << ev[k] << " | " << where;
          }
          av[k] = ev[k] = 0;
        }
        scale[k] = std::max(std::abs(ev[k]), (a.dtype() == DType::f32 ? 0.05f : 0.5f) * largest);
      }
      const double rel = a.dtype() == DType::f32   ? state_rel()
                         : a.dtype() == DType::f16 ? 2.0 / 1024
                                                   : 2.0 / 128;
      double ratio = 0;
      auto result = close_within_scale(av, ev, scale, a.dims(), {rel, 1e-30},
                                       actual.outputs[i].name, where, &ratio);
      if (worst != nullptr) *worst = std::max(*worst, ratio);
      if (!result) return result;
    }
    return ::testing::AssertionSuccess();
  }
  bool expected_unsupported(Direction, const AlgoInfo& algo) const override {
    return algo.id.ends_with(":multi_tensor") && non_empty(c_.shapes) > 384 &&
           algo.reason.find("a multi-tensor launch takes at most") != std::string::npos;
  }

 private:
  std::string repro(Direction direction) const {
    switch (c_.op) {
      case OpKind::sgd: return c_.sgd.repro(direction);
      case OpKind::adam: return c_.adam.repro(direction);
      case OpKind::unscale: return c_.unscale.repro(direction);
      default: return UpdateScaleDesc{}.repro(direction);
    }
  }
  // The relative tolerance of f32 outputs: 1e-5, or (parameters of 16 bits updated in place) one
  // unit in the last place of the parameter dtype, relative.
  double state_rel() const {
    const bool master = c_.op == OpKind::sgd ? c_.sgd.master_weights : c_.adam.master_weights;
    if (dtype_ == DType::f32 || master || c_.op == OpKind::unscale) return 1e-5;
    return dtype_ == DType::f16 ? 1.0 / 1024 : 1.0 / 128;
  }
  float found_inf_at(int step) const {
    return static_cast<std::size_t>(step) < c_.found_inf.size() ? c_.found_inf[step] : 0.0f;
  }
  // The gradients of call `step`, multiplied by the grad scale when the desc has one.
  std::vector<Tensor> grads_at(int step, bool scaled) const {
    return random_list(c_, dtype_, dtype_, "grad", -1, 1, step + 1, scaled ? c_.grad_scale : 1.0f);
  }
  static void load(const std::vector<Tensor>& hosts, std::vector<Tensor>& placed) {
    for (std::size_t i = 0; i < hosts.size(); ++i) copy(hosts[i], placed[i]);
  }

  ParityRun run_sgd(Context& context) const {
    const SgdDesc& d = c_.sgd;
    Placement place(context, c_.misaligned);
    const std::vector<Tensor> params_host = random_list(c_, dtype_, dtype_, "param", -1, 1);
    std::vector<Tensor> params = place.place_all(params_host);
    std::vector<Tensor> master =
        d.master_weights ? place.place_all(as_f32(params_host)) : std::vector<Tensor>();
    std::vector<Tensor> buffers =
        d.momentum ? place.place_all(random_list(c_, dtype_, DType::f32, "buf", -1, 1))
                   : std::vector<Tensor>();
    std::vector<Tensor> grads = place.place_all(grads_at(0, d.grad_scale));
    Tensor step = place.scalar(DType::f32, 0);
    Tensor grad_scale = place.scalar(DType::f32, c_.grad_scale);
    Tensor found_inf = place.scalar(DType::f32, 0);
    ParityRun run;
    for (int s = 0; s < c_.steps; ++s) {
      load(grads_at(s, d.grad_scale), grads);
      copy(host_scalar(DType::f32, found_inf_at(s)), found_inf);
      SgdTensors t{params,
                   grads,
                   master,
                   buffers,
                   &step,
                   d.grad_scale ? &grad_scale : nullptr,
                   d.found_inf ? &found_inf : nullptr};
      run.choice = sgd_step(context, d, c_.sgd_hyper, t);
    }
    run.outputs.push_back(concat("params", params, dtype_));
    if (d.master_weights) run.outputs.push_back(concat("master", master, DType::f32));
    if (d.momentum) run.outputs.push_back(concat("momentum_buffers", buffers, DType::f32));
    run.outputs.push_back({"step", to_host(step)});
    return run;
  }

  ParityRun run_adam(Context& context) const {
    const AdamDesc& d = c_.adam;
    Placement place(context, c_.misaligned);
    const std::vector<Tensor> params_host = random_list(c_, dtype_, dtype_, "param", -1, 1);
    std::vector<Tensor> params = place.place_all(params_host);
    std::vector<Tensor> master =
        d.master_weights ? place.place_all(as_f32(params_host)) : std::vector<Tensor>();
    // A state as after some steps: exp_avg in [-0.1, 0.1), exp_avg_sq in [0, 0.01).
    std::vector<Tensor> m = place.place_all(random_list(c_, dtype_, DType::f32, "m", -0.1f, 0.1f));
    std::vector<Tensor> v = place.place_all(random_list(c_, dtype_, DType::f32, "v", 0, 0.01f));
    std::vector<Tensor> v_max =
        d.amsgrad ? place.place_all(random_list(c_, dtype_, DType::f32, "vmax", 0, 0.01f))
                  : std::vector<Tensor>();
    std::vector<Tensor> grads = place.place_all(grads_at(0, d.grad_scale));
    Tensor step = place.scalar(DType::f32, 0);
    Tensor grad_scale = place.scalar(DType::f32, c_.grad_scale);
    Tensor found_inf = place.scalar(DType::f32, 0);
    ParityRun run;
    for (int s = 0; s < c_.steps; ++s) {
      load(grads_at(s, d.grad_scale), grads);
      copy(host_scalar(DType::f32, found_inf_at(s)), found_inf);
      AdamTensors t{params,
                    grads,
                    master,
                    m,
                    v,
                    v_max,
                    &step,
                    d.grad_scale ? &grad_scale : nullptr,
                    d.found_inf ? &found_inf : nullptr};
      run.choice = adam_step(context, d, c_.adam_hyper, t);
    }
    run.outputs.push_back(concat("params", params, dtype_));
    if (d.master_weights) run.outputs.push_back(concat("master", master, DType::f32));
    run.outputs.push_back(concat("exp_avg", m, DType::f32));
    run.outputs.push_back(concat("exp_avg_sq", v, DType::f32));
    if (d.amsgrad) run.outputs.push_back(concat("max_exp_avg_sq", v_max, DType::f32));
    run.outputs.push_back({"step", to_host(step)});
    return run;
  }

  ParityRun run_unscale(Context& context) const {
    Placement place(context, c_.misaligned);
    std::vector<Tensor> grads_host = random_list(c_, dtype_, dtype_, "grad", -4, 4);
    if (c_.non_finite) {
      std::vector<float> first = grads_host[0].to_f32();
      first[1] = std::numeric_limits<float>::infinity();
      grads_host[0].copy_from_f32(first);
      std::vector<float> last = grads_host.back().to_f32();
      last.back() = std::numeric_limits<float>::quiet_NaN();
      grads_host.back().copy_from_f32(last);
    }
    std::vector<Tensor> grads = place.place_all(grads_host);
    Tensor found_inf = place.scalar(DType::f32, found_inf_at(0));
    Tensor inv_scale = place.scalar(DType::f32, c_.grad_scale);
    ParityRun run;
    run.choice = unscale(context, c_.unscale, grads, found_inf, inv_scale);
    run.outputs.push_back(concat("grads", grads, dtype_));
    run.outputs.push_back({"found_inf", to_host(found_inf)});
    return run;
  }

  ParityRun run_update_scale(Context& context) const {
    Placement place(context, false);
    Tensor scale = place.scalar(DType::f32, 65536);
    Tensor tracker = place.scalar(DType::i32, 0);
    Tensor found_inf = place.scalar(DType::f32, 0);
    std::vector<float> scales, trackers;
    ParityRun run;
    for (const float f : c_.found_inf) {
      copy(host_scalar(DType::f32, f), found_inf);
      run.choice =
          update_scale(context, UpdateScaleDesc{}, c_.update_hyper, scale, tracker, found_inf);
      scales.push_back(to_host(scale).to_f32()[0]);
      trackers.push_back(to_host(tracker).to_f32()[0]);
    }
    const Dims n{static_cast<std::int64_t>(scales.size())};
    run.outputs.push_back({"scale", tensor_from(n, DType::f32, rows, scales)});
    run.outputs.push_back({"growth_tracker", tensor_from(n, DType::f32, rows, trackers)});
    return run;
  }

  OptimCase c_;
  DType dtype_;
};

}  // namespace

const std::vector<OptimCase>& optim_cases() {
  static const std::vector<OptimCase> cases = make_cases();
  return cases;
}

std::unique_ptr<ParityCase> optim_parity_case(const OptimCase& c, DType dtype) {
  return std::make_unique<OptimParityCase>(c, dtype);
}

bool optim_representable(const OptimCase& c, DType dtype) {
  return c.op != OpKind::update_scale || dtype == DType::f32;
}

}  // namespace dnnx::test
