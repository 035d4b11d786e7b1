#include "ops/softmax_cases.hpp"

#include "support/random.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace dnnx::test {
namespace {

std::string dims_name(const Dims& dims) {
  std::string text = dims.to_string();
  return text;
}

// Group walk in logical order (Note [axis geometry] in src/core/softmax_args.hpp, channels_first).
template <typename F>
void for_each_group(const SoftmaxDesc& desc, F&& f) {
  const std::int64_t n = desc.dims[0];
  const std::int64_t c = desc.dims[1];
  const std::int64_t s = desc.dims.product() / (n * c);
  const bool instance = desc.mode == SoftmaxMode::instance;
  const std::int64_t outer = n;
  const std::int64_t axis = instance ? c * s : c;
  const std::int64_t inner = instance ? 1 : s;
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) f(o * axis * inner + i, axis, inner);
}

}  // namespace

std::vector<SoftmaxCase> softmax_cases() {
  std::vector<SoftmaxCase> cases;
  auto add = [&](const Dims& dims, SoftmaxMode mode, bool log, Layout layout, float magnitude) {
    SoftmaxCase c;
    c.desc.dims = dims;
    c.desc.mode = mode;
    c.desc.log = log;
    c.desc.layout = layout;
    c.magnitude = magnitude;
    c.name = dims_name(dims) + "_" + std::string(to_string(mode)) + (log ? "_log" : "_exp") + "_" +
             std::string(to_string(layout)) + (magnitude > 100 ? "_large" : "");
    cases.push_back(c);
  };
  // N x C: both modes coincide, so channel mode everywhere and instance once.
  for (const Dims& dims : {Dims{1, 10}, Dims{64, 1000}, Dims{3, 17}, Dims{5, 1}, Dims{4, 2049}}) {
    for (const bool log : {false, true})
      add(dims, SoftmaxMode::channel, log, Layout::channels_first, 4);
  }
  add(Dims{3, 17}, SoftmaxMode::instance, false, Layout::channels_first, 4);
  add(Dims{3, 17}, SoftmaxMode::instance, true, Layout::channels_first, 4);
  // 1-D, 2-D, 3-D spatial, both modes and layouts.
  for (const Dims& dims :
       {Dims{2, 5, 9}, Dims{2, 3, 7, 5}, Dims{1, 21, 8, 8}, Dims{2, 4, 3, 5, 6}}) {
    for (const SoftmaxMode mode : {SoftmaxMode::channel, SoftmaxMode::instance}) {
      for (const bool log : {false, true}) {
        for (const Layout layout : {Layout::channels_first, Layout::channels_last})
          add(dims, mode, log, layout, 4);
      }
    }
  }
  // Logits of magnitude 1e4: exp overflows without the max subtraction.
  for (const bool log : {false, true}) {
    add(Dims{3, 17}, SoftmaxMode::channel, log, Layout::channels_first, 1e4f);
    add(Dims{2, 3, 7, 5}, SoftmaxMode::channel, log, Layout::channels_first, 1e4f);
    add(Dims{2, 3, 7, 5}, SoftmaxMode::instance, log, Layout::channels_last, 1e4f);
  }
  return cases;
}

SoftmaxDesc with_dtype(SoftmaxDesc desc, DType dtype) {
  desc.dtype = dtype;
  return desc;
}

Tensor softmax_src(const SoftmaxCase& c, const SoftmaxDesc& desc) {
  std::vector<float> values = random_uniform(static_cast<std::size_t>(desc.dims.product()),
                                             seed_from(c.name + "/src"), -c.magnitude, c.magnitude);
  return tensor_from(desc.dims, desc.dtype, desc.layout, values);
}

Tensor softmax_diff_dst(const SoftmaxCase& c, const SoftmaxDesc& desc) {
  return random_tensor(desc.dims, desc.dtype, desc.layout, seed_from(c.name + "/diff_dst"));
}

SoftmaxRun run_softmax(Context& context, const SoftmaxDesc& desc, Direction direction,
                       const Tensor& src_or_dst, const Tensor* diff_dst) {
  SoftmaxRun run;
  run.output = nan_tensor(desc.dims, desc.dtype, desc.layout);
  if (direction == Direction::fwd) {
    run.choice = softmax_fwd(context, desc, src_or_dst, run.output);
  } else {
    run.choice = softmax_bwd(context, desc, src_or_dst, *diff_dst, run.output);
  }
  return run;
}

std::vector<float> softmax_forward_scale(const SoftmaxDesc& desc, const std::vector<float>& dst) {
  std::vector<float> scale(dst.size());
  for (std::size_t k = 0; k < dst.size(); ++k)
    scale[k] = std::abs(dst[k]) + (desc.log ? 1.0f : 0.0f);
  return scale;
}

std::vector<float> softmax_backward_scale(const SoftmaxDesc& desc, const std::vector<float>& dst,
                                          const std::vector<float>& diff_dst) {
  std::vector<float> scale(dst.size());
  for_each_group(desc, [&](std::int64_t first, std::int64_t axis, std::int64_t step) {
    double sum = 0;
    for (std::int64_t a = 0; a < axis; ++a) {
      const auto k = static_cast<std::size_t>(first + a * step);
      sum += desc.log ? std::abs(diff_dst[k]) : std::abs(static_cast<double>(diff_dst[k]) * dst[k]);
    }
    for (std::int64_t a = 0; a < axis; ++a) {
      const auto k = static_cast<std::size_t>(first + a * step);
      const double y = dst[k];
      const double dy = std::abs(diff_dst[k]);
      scale[k] = static_cast<float>(desc.log ? dy + std::exp(y) * sum : std::abs(y) * (dy + sum));
    }
  });
  return scale;
}

// Note [softmax tolerances]
// Candidates compute in f32: exp and log within a few ulps, sums over up to 2049 elements in
// whatever order the implementation likes (random-walk growth, ~sqrt(n) ulps, not the n-ulp worst
// case), then round once to the output dtype. Relative to the scales above that is: f32 2e-5; f16
// and bf16 four units of their own rounding (2^-11, 2^-8 relative) on top. The absolute slack
// covers outputs near zero: the exp of a value 87 below the maximum is below f32's normal range,
// where implementations flush or approximate differently.
Tolerance softmax_tolerance(DType dtype) {
  switch (dtype) {
    case DType::f16: return {4 * 0.00048828125 + 2e-5, 1e-7};
    case DType::bf16: return {4 * 0.00390625 + 2e-5, 1e-30};
    default: return {2e-5, 1e-30};
  }
}

std::string softmax_context(const SoftmaxDesc& desc, Direction direction,
                            const std::string& candidate) {
  std::ostringstream out;
  out << "softmax " << to_string(direction) << " [" << candidate << "] " << desc << " | "
      << desc.repro(direction);
  return out.str();
}

Context softmax_context_for(BackendKind backend, Direction direction, const AlgoPolicy& policy) {
  Context context(backend);
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  context.tune().policy(OpKind::softmax, direction) = policy;
  return context;
}

}  // namespace dnnx::test
