#include "ops/reorder_cases.hpp"

#include <dnnx/context.hpp>

#include "support/compare.hpp"
#include "support/gpu.hpp"
#include "support/layer_cases.hpp"
#include "support/random.hpp"
#include "support/unsupported.hpp"

#include <cmath>
#include <regex>
#include <sstream>

namespace dnnx::test {
namespace {

struct Shape {
  const char* name;
  Dims dims;
};

const std::vector<Shape>& shapes() {
  static const std::vector<Shape> list = {
      {"odd4d", Dims{3, 5, 7, 9}},
      {"c1", Dims{2, 1, 4, 5}},  // channels_first and channels_last share their order
      {"n1", Dims{1, 3, 4, 5}},
      {"hw1", Dims{2, 16, 1, 1}},      // also the same order in both layouts
      {"tiles4d", Dims{2, 40, 9, 7}},  // 40 x 63 matrices: partial 32 x 32 tiles both ways
      {"rank3", Dims{2, 3, 7}},
      {"rank5", Dims{2, 3, 2, 3, 4}},
      {"rank2", Dims{5, 8}},
      {"rank1", Dims{17}},
      {"empty", Dims{0, 3, 4, 5}},
  };
  return list;
}

struct Scales {
  const char* name;
  float alpha, beta;
};

constexpr Scales scales[] = {
    {"a1_b0", 1.0f, 0.0f}, {"a0p5_bneg2", 0.5f, -2.0f}, {"a2_b1", 2.0f, 1.0f}};

constexpr DType dtypes[] = {DType::f32, DType::f16, DType::bf16};
constexpr Layout layouts[] = {Layout::channels_first, Layout::channels_last};

// Note [expected unsupported reorders]: the only reasons a listed candidate may be unsupported
// (src/backends/onednn/reorder.cpp, Note [cpu reorder candidates]; src/backends/cudnn/reorder.cpp,
// Note [cudnn reorder candidates]). dnnx's own kernels must run everything.
const std::vector<ExpectedReason<ReorderDesc>>& expected_reasons() {
  static const std::vector<ExpectedReason<ReorderDesc>> reasons = {
      // oneDNN 3.2 has no f16 <-> bf16 reorder; dnnx's loops run it.
      {"oneDNN has no f16 <-> bf16 reorder", std::regex("^onednn:unavailable:reorder$"),
       std::regex("has no implementation of reorder"),
       [](const ReorderDesc& d, Direction) {
         return d.src_dtype != d.dst_dtype && d.src_dtype != DType::f32 &&
                d.dst_dtype != DType::f32;
       }},
      {"cudnnTransformTensor converts no dtype", std::regex("^cudnn:legacy:transform_tensor$"),
       std::regex("needs src and dst of one data type"),
       [](const ReorderDesc& d, Direction) { return d.src_dtype != d.dst_dtype; }},
      {"cuDNN descriptors take no zero size", std::regex("^cudnn:legacy:transform_tensor$"),
       std::regex("hold no element"),
       [](const ReorderDesc& d, Direction) { return d.dims.product() == 0; }},
  };
  return reasons;
}

// `host` in `context`'s memory (itself on the cpu), and back.
Tensor place(const Tensor& host, Context& context) {
  if (context.device() == Device::cpu()) return host;
  return device_copy(host, context);
}
Tensor fetch(const Tensor& tensor) {
  if (tensor.device() == Device::cpu()) return tensor;
  return host_copy_of(tensor);
}

}  // namespace

std::vector<ReorderShape> reorder_shapes() {
  std::vector<ReorderShape> out;
  for (const Shape& shape : shapes()) {
    ReorderShape group{shape.name, {}};
    std::size_t index = 0;
    for (const Layout src_layout : layouts) {
      for (const Layout dst_layout : layouts) {
        for (const DType src_dtype : dtypes) {
          for (const DType dst_dtype : dtypes) {
            const Scales& s = scales[index++ % std::size(scales)];
            ReorderDesc desc;
            desc.dims = shape.dims;
            desc.src_dtype = src_dtype;
            desc.dst_dtype = dst_dtype;
            desc.src_layout = src_layout;
            desc.dst_layout = dst_layout;
            desc.alpha = s.alpha;
            desc.beta = s.beta;
            desc.validate();
            group.cases.push_back(
                {std::string(shape.name) + "_" + std::string(to_string(src_dtype)) +
                     std::string(to_string(src_layout)) + "_" + std::string(to_string(dst_dtype)) +
                     std::string(to_string(dst_layout)) + "_" + s.name,
                 desc});
          }
        }
      }
    }
    out.push_back(std::move(group));
  }
  return out;
}

// Note [reorder tolerances]
// A plain conversion (alpha 1, beta 0) rounds an f32-exact value once to dst's dtype, to nearest
// even, on every backend: the result must equal the reference's exactly. Otherwise, alpha * s +
// beta * d computed in f32 rounds the two products and the sum (at most 3 f32 units of roundoff
// of |alpha s| + |beta d|), then once more to f16/bf16 (one unit of the dtype): rel = 4 units
// (f32) or 2 units of the dtype plus 4 of f32, as add's (tests/ops/add_cases.cpp).
::testing::AssertionResult reorder_close(const ReorderDesc& desc, const Tensor& actual,
                                         const Tensor& expected, const Tensor& src,
                                         const Tensor& dst0, std::string_view context,
                                         double* worst) {
  const std::vector<float> got = actual.to_f32();
  ::testing::AssertionResult finite = all_finite(got, actual.dims(), "output", context);
  if (!finite) return finite;
  const std::vector<float> s = src.to_f32();
  const std::vector<float> d = dst0.to_f32();
  std::vector<float> scale(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    double magnitude = std::fabs(static_cast<double>(desc.alpha) * s[i]);
    if (desc.beta != 0) magnitude += std::fabs(static_cast<double>(desc.beta) * d[i]);
    scale[i] = static_cast<float>(magnitude);
  }
  const bool plain = desc.alpha == 1 && desc.beta == 0;
  const double u32 = std::ldexp(1.0, -24);
  const double u = unit_roundoff(desc.dst_dtype);
  Tolerance tolerance;
  if (!plain) {
    tolerance.rel = desc.dst_dtype == DType::f32 ? 4 * u32 : 2 * u + 4 * u32;
    // f16 results may round into its subnormals, spaced 2^-24.
    tolerance.abs = desc.dst_dtype == DType::f16 ? std::ldexp(1.0, -24) : 0.0;
  }
  return close_within_scale(got, expected.to_f32(), scale, actual.dims(), tolerance, "output",
                            context, worst);
}

std::string reorder_context(const ReorderDesc& desc, std::string_view candidate) {
  std::ostringstream out;
  out << "reorder fwd [" << candidate << "] " << desc << "\n  repro: " << desc.repro();
  return out.str();
}

ReorderParityCase::ReorderParityCase(const ReorderCase& c)
    : name_(c.name),
      desc_(c.desc),
      src_(random_tensor(desc_.dims, desc_.src_dtype, desc_.src_layout, seed_from(name_ + "src"))),
      dst0_(desc_.beta == 0 ? nan_tensor(desc_.dims, desc_.dst_dtype, desc_.dst_layout)
                            : random_tensor(desc_.dims, desc_.dst_dtype, desc_.dst_layout,
                                            seed_from(name_ + "dst"))) {}

std::string ReorderParityCase::where(Direction, std::string_view candidate) const {
  return reorder_context(desc_, candidate);
}

std::vector<AlgoInfo> ReorderParityCase::list(Context& context, Direction direction) const {
  return reorder_list(context, desc_, direction);
}

ParityRun ReorderParityCase::run(Context& context, Direction) const {
  ParityRun run;
  Tensor initial = Tensor::empty(desc_.dims, desc_.dst_dtype, desc_.dst_layout);
  initial.copy_from_f32(dst0_.to_f32());
  const Tensor src = place(src_, context);
  Tensor out = place(initial, context);
  run.choice = reorder_fwd(context, desc_, src, out);
  run.outputs.push_back({"output", fetch(out)});
  return run;
}

::testing::AssertionResult ReorderParityCase::close(Direction, const AlgoInfo&,
                                                    const ParityRun& actual,
                                                    const ParityExpected& expected,
                                                    std::string_view where, double* worst) const {
  return reorder_close(desc_, actual.outputs[0].tensor, expected.run.outputs[0].tensor, src_, dst0_,
                       where, worst);
}

bool ReorderParityCase::expected_unsupported(Direction direction, const AlgoInfo& algo) const {
  return unsupported_category(expected_reasons(), desc_, direction, algo) != nullptr;
}

}  // namespace dnnx::test
