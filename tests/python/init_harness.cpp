// dnnx's initialisers and dropout as a subprocess for tests/python/torch_init_parity.py:
//
//   init_harness
//
// prints one JSON document on stdout: calculate_gain of every nonlinearity (and leaky_relu's
// slopes), the fans and the bound / std of xavier_uniform, xavier_normal, kaiming_uniform and
// kaiming_normal for a table of weight dims and arguments, the moments of large dnnx
// initialisations on the reference backend, and dropout's outputs on a ones tensor and on special
// values (training and inference). Exit 0 on success, 1 with one line on stderr on any failure.

#include <dnnx/dnnx.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <exception>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace {

using nlohmann::json;

json moments(const dnnx::Tensor& tensor) {
  const std::vector<float> v = tensor.to_f32();
  double sum = 0, squares = 0, lo = INFINITY, hi = -INFINITY;
  for (const float x : v) sum += x, lo = std::min<double>(lo, x), hi = std::max<double>(hi, x);
  const double mean = sum / static_cast<double>(v.size());
  for (const float x : v) squares += (x - mean) * (x - mean);
  return {{"n", v.size()},
          {"mean", mean},
          {"std", std::sqrt(squares / static_cast<double>(v.size() - 1))},
          {"min", lo},
          {"max", hi}};
}

json run() {
  using namespace dnnx;
  json out;
  for (const char* name :
       {"linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
        "conv_transpose3d", "sigmoid", "tanh", "relu", "leaky_relu", "selu"})
    out["gain"][name] = init::calculate_gain(name);
  for (const double slope : {0.0, 0.2, 3.0})
    out["leaky_gain"].push_back({slope, init::calculate_gain("leaky_relu", slope)});

  const std::vector<Dims> dims = {{1000, 2048}, {64, 3, 7, 7},    {256, 64, 1, 1},
                                  {8, 4, 3},    {16, 2, 3, 3, 3}, {5, 1}};
  for (const Dims& d : dims) {
    json entry;
    entry["dims"] = std::vector<std::int64_t>(d.begin(), d.end());
    const init::Fans fans = init::calculate_fans(d);
    entry["fan_in"] = fans.fan_in;
    entry["fan_out"] = fans.fan_out;
    for (const double gain : {1.0, 0.5}) {
      entry["xavier_uniform"].push_back({gain, init::xavier_uniform_bound(d, gain)});
      entry["xavier_normal"].push_back({gain, init::xavier_normal_std(d, gain)});
    }
    for (const init::FanMode mode : {init::FanMode::fan_in, init::FanMode::fan_out}) {
      for (const char* nonlinearity : {"leaky_relu", "relu", "tanh"}) {
        for (const double a : {0.0, std::sqrt(5.0)}) {
          entry["kaiming"].push_back({std::string(init::to_string(mode)), nonlinearity, a,
                                      init::kaiming_uniform_bound(d, a, mode, nonlinearity),
                                      init::kaiming_std(d, a, mode, nonlinearity)});
        }
      }
    }
    out["weights"].push_back(entry);
  }

  // Large initialisations: their moments against the formulas' (judged in Python).
  Context context(BackendKind::reference);
  context.set_choice_cache(std::make_shared<ChoiceCache>());  // never the user's cache file
  Generator generator(2718);
  Tensor w = Tensor::empty({512, 256, 3, 3}, DType::f32);
  init::kaiming_uniform(context, generator, w, std::sqrt(5.0));
  out["empirical"]["kaiming_uniform_sqrt5"] = moments(w);
  init::kaiming_normal(context, generator, w, 0, init::FanMode::fan_out, "relu");
  out["empirical"]["kaiming_normal_fan_out_relu"] = moments(w);
  init::xavier_uniform(context, generator, w, 2.0);
  out["empirical"]["xavier_uniform_gain2"] = moments(w);
  init::xavier_normal(context, generator, w);
  out["empirical"]["xavier_normal"] = moments(w);
  init::trunc_normal(context, generator, w, 0.0f, 0.02f, -0.04f, 0.04f);
  out["empirical"]["trunc_normal_002"] = moments(w);
  init::uniform(context, generator, w, -0.5f, 0.25f);
  out["empirical"]["uniform"] = moments(w);
  init::normal(context, generator, w, 1.0f, 0.5f);
  out["empirical"]["normal"] = moments(w);

  // Dropout on ones (rate and scale) and on special values.
  for (const float p : {0.1f, 0.5f, 0.8f}) {
    DropoutDesc desc;
    desc.dims = {1 << 20};
    desc.p = p;
    Tensor ones = Tensor::empty(desc.dims, DType::f32), dst = Tensor::empty(desc.dims, DType::f32);
    ones.fill(1.0f);
    SavedState state;
    dropout_fwd_training(context, desc, generator, ones, dst, state);
    double kept = 0;
    std::vector<float> values;
    for (const float v : dst.to_f32()) {
      if (v != 0) {
        ++kept;
        if (values.empty() || values.back() != v) values.push_back(v);
      }
    }
    out["dropout"].push_back({{"p", p}, {"n", desc.dims[0]}, {"kept", kept}, {"values", values}});
  }
  const std::vector<float> special = {1.0f, -2.0f, NAN, INFINITY, 0.0f, 3.0f};
  for (const float p : {0.0f, 1.0f}) {
    DropoutDesc desc;
    desc.dims = {static_cast<std::int64_t>(special.size())};
    desc.p = p;
    Tensor src = Tensor::empty(desc.dims, DType::f32), dst = Tensor::empty(desc.dims, DType::f32);
    src.copy_from_f32(special);
    SavedState state;
    dropout_fwd_training(context, desc, generator, src, dst, state);
    json values = json::array();
    for (const float v : dst.to_f32())
      values.push_back(std::isnan(v) ? json("nan") : json(std::isinf(v) ? json("inf") : json(v)));
    out["dropout_special"].push_back({{"p", p}, {"values", values}});
    Tensor eval = Tensor::empty(desc.dims, DType::f32);
    dropout_fwd(context, desc, src, eval);
    json same = json::array();
    for (const float v : eval.to_f32())
      same.push_back(std::isnan(v) ? json("nan") : json(std::isinf(v) ? json("inf") : json(v)));
    out["dropout_eval"].push_back({{"p", p}, {"values", same}});
  }
  return out;
}

}  // namespace

int main() {
  try {
    std::cout << run().dump() << "\n";
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "init_harness: %s\n", error.what());
    return 1;
  }
}
