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

float SoftmaxCase::largest() const { return clustered_largest(magnitude, centers); }

bool SoftmaxCase::clustered_large() const { return has_large_center(centers); }

// Note [large-logit rows]
// Logits spread uniformly over [-1e4, 1e4) do not show how a candidate rounds its shift: the
// second largest logit of a group lies hundreds below the maximum, so the sum of exponentials is
// 1 exactly and log(sum) is 0. The clustered rows put every logit within 4 of a large center
// (1e4, 1e5, -1e5), or mix such clusters with far ones (1e4 / -1e4 / 0 / 2.5e3, 1e5 / -1e5 / 30 /
// -3e4), so that several logits share the maximum's neighbourhood and log(sum) is of order 1: a
// log-softmax computed as x - (max + log(sum)) is then off by up to half an ulp of the maximum
// (4.9e-4 at 1e4, 3.9e-3 at 1e5), far outside Note [large-logit tolerance] in f32. In f16, logits
// near 1e4 are multiples of 8 and ties at the maximum make |y| >= log 2, where such an error is
// below the output's own rounding; the "spread1e4" rows (within 48 of 1e4) give most groups a
// single maximum with y near -e^-8, whose f16 value shows it. bf16 logits near 1e4 are 64 apart:
// log(sum) is 0 or log of the number of ties, and the rows check only that the result is right.
// The shapes reach the cpu kernel's rows with a vector tail (3 x 37, nhwc with C = 21, instance
// over 105), its columns over two blocks of positions (nchw, 66 positions), and each GPU kernel
// shape but the block one.
std::vector<SoftmaxCase> softmax_cases() {
  std::vector<SoftmaxCase> cases;
  auto add = [&](const Dims& dims, SoftmaxMode mode, bool log, Layout layout, float magnitude,
                 std::vector<float> centers = {0.0f}, const std::string& tag = "") {
    SoftmaxCase c;
    c.desc.dims = dims;
    c.desc.mode = mode;
    c.desc.log = log;
    c.desc.layout = layout;
    c.magnitude = magnitude;
    c.centers = std::move(centers);
    c.name = dims_name(dims) + "_" + std::string(to_string(mode)) + (log ? "_log" : "_exp") + "_" +
             std::string(to_string(layout)) + (magnitude > 100 ? "_large" : "") +
             (tag.empty() ? "" : "_" + tag);
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
  // Note [large-logit rows].
  struct Cluster {
    std::vector<float> centers;
    float spread;
    const char* tag;
  };
  const Cluster clusters[] = {{{1e4f}, 4, "near1e4"},
                              {{1e4f}, 48, "spread1e4"},
                              {{1e5f}, 4, "near1e5"},
                              {{-1e5f}, 4, "nearneg1e5"},
                              {{1e4f, -1e4f, 0.0f, 2.5e3f}, 4, "mixed1e4"},
                              {{1e5f, -1e5f, 30.0f, -3e4f}, 4, "mixed1e5"}};
  for (const Cluster& cluster : clusters) {
    add(Dims{3, 37}, SoftmaxMode::channel, true, Layout::channels_first, cluster.spread,
        cluster.centers, cluster.tag);
    for (const Layout layout : {Layout::channels_first, Layout::channels_last}) {
      add(Dims{2, 21, 6, 11}, SoftmaxMode::channel, true, layout, cluster.spread, cluster.centers,
          cluster.tag);
    }
    add(Dims{2, 3, 5, 7}, SoftmaxMode::instance, true, Layout::channels_last, cluster.spread,
        cluster.centers, cluster.tag);
  }
  // Groups above the GPU warp kernel's 1024 values.
  add(Dims{2, 1100}, SoftmaxMode::channel, true, Layout::channels_first, 4, clusters[0].centers,
      clusters[0].tag);
  // Softmax itself on the same inputs (max-subtracted everywhere, so within a few ulps too).
  for (const Cluster& cluster : {clusters[0], clusters[5]}) {
    add(Dims{3, 37}, SoftmaxMode::channel, false, Layout::channels_first, cluster.spread,
        cluster.centers, cluster.tag);
    add(Dims{2, 21, 6, 11}, SoftmaxMode::channel, false, Layout::channels_first, cluster.spread,
        cluster.centers, cluster.tag);
  }
  return cases;
}

std::vector<LargeLogitExample> large_logit_examples() {
  std::vector<LargeLogitExample> examples;
  for (const float base : {1e4f, 1e5f, -1e5f}) {
    for (const Dims& dims : {Dims{1, 4}, Dims{1, 4, 2, 1}, Dims{2, 12}, Dims{1, 1028}}) {
      LargeLogitExample example;
      example.desc.dims = dims;
      example.desc.log = true;
      example.base = base;
      const std::int64_t classes = dims[1];
      const std::int64_t positions = dims.product() / (dims[0] * classes);
      double sum = 0;
      for (int k = 0; k < 4; ++k) sum += std::exp(static_cast<double>(k - 3));
      const double log_sum = std::log(static_cast<double>(classes / 4) * sum);
      std::vector<float> values;
      for (std::int64_t n = 0; n < dims[0]; ++n) {
        for (std::int64_t c = 0; c < classes; ++c) {
          for (std::int64_t p = 0; p < positions; ++p) {
            values.push_back(base + static_cast<float>(c % 4));
            example.expected.push_back(
                static_cast<float>(static_cast<double>(c % 4 - 3) - log_sum));
          }
        }
      }
      example.src = tensor_from(dims, DType::f32, example.desc.layout, values);
      examples.push_back(std::move(example));
    }
  }
  return examples;
}

bool representable(const SoftmaxCase& c, DType dtype) {
  // The largest finite f16 is 65504; f32 and bf16 reach 3.4e38.
  return dtype != DType::f16 || c.largest() <= 65504.0f;
}

SoftmaxDesc with_dtype(SoftmaxDesc desc, DType dtype) {
  desc.dtype = dtype;
  return desc;
}

Tensor softmax_src(const SoftmaxCase& c, const SoftmaxDesc& desc) {
  const auto count = static_cast<std::size_t>(desc.dims.product());
  const std::vector<float> values = clustered_uniform(
      count, seed_from(c.name + "/src"), seed_from(c.name + "/centers"), c.magnitude, c.centers);
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

// Note [large-logit tolerance]
// The reference rounds an f64 result once. A candidate computing (x - max) - log(sum) in f32 gets
// x - max exactly when x and max are within a factor 2 of each other (Sterbenz) and otherwise
// rounded relative to itself, with |x - max| <= |y|; what remains is the error of log(sum), which
// is absolute (log(s (1 + e)) = log(s) + e): the relative error of the sum (a few exps added in
// lanes) and of log itself. So a candidate is held, for f32 outputs, to
//   log-softmax  |actual - expected| <= u * 2^-23 * max(1, |y|)
//   softmax      |actual - expected| <= u * 2^-23 * |y|   (+ the dtype's absolute slack)
// with u = large_logit_ulps(): 8 for exp and log good to a couple of ulps (dnnx's kernels,
// oneDNN's reference; within 3 on the development host), 64 for oneDNN's jit, whose exp and log
// are coarser polynomials (within 30 on its avx2 code); and for f16 / bf16 four units of the
// dtype's rounding of |y| on top (both sides round to the dtype, and oneDNN's jit may round x - max
// to it first). The clustered rows' groups hold up to 1100 values, whose lane-wise sums stay well
// inside u. A shift rounded to the maximum's ulp (Note [log-softmax shift] in
// src/backends/onednn/softmax.cpp) is off by up to 4096 ulps at 1e4 and 32768 at 1e5. The absolute
// slack covers softmax outputs below f32's normal range, as in Note [softmax tolerances].
double large_logit_ulps(const AlgoInfo& algo) {
  const bool polynomial =
      std::find(algo.notes.begin(), algo.notes.end(), "jit") != algo.notes.end();
  return polynomial ? 64 : 8;
}

SoftmaxBound softmax_forward_bound(const SoftmaxCase& c, const SoftmaxDesc& desc,
                                   const std::vector<float>& dst, const AlgoInfo& algo) {
  if (!c.clustered_large())
    return {softmax_forward_scale(desc, dst), softmax_tolerance(desc.dtype)};
  const double f32_units = large_logit_ulps(algo) * 0x1p-23;
  const double dtype_units = desc.dtype == DType::f16    ? 4 * 0x1p-11
                             : desc.dtype == DType::bf16 ? 4 * 0x1p-8
                                                         : 0.0;
  SoftmaxBound bound;
  bound.tolerance = {1.0, softmax_tolerance(desc.dtype).abs};
  bound.scale.resize(dst.size());
  for (std::size_t k = 0; k < dst.size(); ++k) {
    const double y = std::abs(static_cast<double>(dst[k]));
    const double computed = desc.log ? std::max(1.0, y) : y;
    bound.scale[k] = static_cast<float>(f32_units * computed + dtype_units * y);
  }
  return bound;
}

SoftmaxBound softmax_backward_bound(const SoftmaxDesc& desc, const std::vector<float>& dst,
                                    const std::vector<float>& diff_dst) {
  return {softmax_backward_scale(desc, dst, diff_dst), softmax_tolerance(desc.dtype)};
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
