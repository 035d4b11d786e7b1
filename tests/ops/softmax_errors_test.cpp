// Bad inputs to softmax: each case asserts the error kind and that the message names the
// argument and the value received. Every case runs on the reference and the cpu backend.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/softmax.hpp>

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <vector>

namespace dnnx {
namespace {

SoftmaxDesc good_desc() {
  SoftmaxDesc desc;
  desc.dims = Dims{2, 3, 4, 5};
  desc.mode = SoftmaxMode::channel;
  return desc;
}

struct ErrorCase {
  std::string name;
  ErrorKind kind;
  std::vector<std::string> patterns;  // regexes the message must match
  std::function<void(Context&)> call;
};

void PrintTo(const ErrorCase& c, std::ostream* out) { *out << c.name; }

Tensor make(const Dims& dims, DType dtype = DType::f32, Layout layout = Layout::channels_first) {
  Tensor t = Tensor::empty(dims, dtype, layout);
  t.fill(0.5f);
  return t;
}

std::vector<ErrorCase> cases() {
  std::vector<ErrorCase> out;
  auto fwd_with = [](SoftmaxDesc desc) {
    return [desc](Context& context) {
      Tensor src = make(Dims{2, 3, 4, 5}), dst = make(Dims{2, 3, 4, 5});
      softmax_fwd(context, desc, src, dst);
    };
  };
  {
    SoftmaxDesc desc = good_desc();
    desc.dims = Dims{7};
    out.push_back(
        {"rank_1", ErrorKind::InvalidArgument, {"dims", "rank 1", "rank 2 to 5"}, fwd_with(desc)});
  }
  {
    SoftmaxDesc desc = good_desc();
    desc.dims = Dims{2, 0, 4};
    out.push_back({"zero_channels",
                   ErrorKind::InvalidArgument,
                   {"dims 2x0x4", "entry 1 is 0"},
                   fwd_with(desc)});
  }
  {
    // 2^30 x 2^30 x 2^31 x 2^31: the running product passes 2^60 and then wraps in 64 bits.
    SoftmaxDesc desc = good_desc();
    desc.dims = Dims{std::int64_t{1} << 30, std::int64_t{1} << 30, std::int64_t{1} << 31,
                     std::int64_t{1} << 31};
    out.push_back({"element_count_overflow",
                   ErrorKind::InvalidArgument,
                   {"dims 1073741824x1073741824x2147483648x2147483648", "more elements"},
                   fwd_with(desc)});
  }
  // Note [shapes of an unvalidated desc]: the dims are checked before any division by them.
  out.push_back({"axis_size_of_unvalidated_zero_batch",
                 ErrorKind::InvalidArgument,
                 {"dims 0x3", "entry 0 is 0"},
                 [](Context&) {
                   SoftmaxDesc desc = good_desc();
                   desc.dims = Dims{0, 3};
                   desc.mode = SoftmaxMode::instance;
                   desc.axis_size();
                 }});
  out.push_back({"groups_of_unvalidated_rank_one",
                 ErrorKind::InvalidArgument,
                 {"dims 7", "rank 1"},
                 [](Context&) {
                   SoftmaxDesc desc = good_desc();
                   desc.dims = Dims{7};
                   desc.groups();
                 }});
  {
    SoftmaxDesc desc = good_desc();
    desc.mode = static_cast<SoftmaxMode>(7);
    out.push_back({"mode_out_of_range",
                   ErrorKind::InvalidArgument,
                   {"mode must be instance or channel", "value 7"},
                   fwd_with(desc)});
  }
  {
    SoftmaxDesc desc = good_desc();
    desc.dtype = DType::i32;
    out.push_back(
        {"integer_dtype", ErrorKind::InvalidArgument, {"dtype", "got i32"}, fwd_with(desc)});
  }
  {
    SoftmaxDesc desc = good_desc();
    desc.layout = static_cast<Layout>(5);
    out.push_back(
        {"layout_out_of_range", ErrorKind::InvalidArgument, {"layout", "value 5"}, fwd_with(desc)});
  }
  out.push_back({"src_dims_mismatch",
                 ErrorKind::InvalidArgument,
                 {"src dims 2x3x4x6", "expects 2x3x4x5"},
                 [](Context& context) {
                   Tensor src = make(Dims{2, 3, 4, 6}), dst = make(Dims{2, 3, 4, 5});
                   softmax_fwd(context, good_desc(), src, dst);
                 }});
  out.push_back({"dst_dtype_mix",
                 ErrorKind::InvalidArgument,
                 {"dtype mix", "dst is f16", "f32"},
                 [](Context& context) {
                   Tensor src = make(Dims{2, 3, 4, 5}), dst = make(Dims{2, 3, 4, 5}, DType::f16);
                   softmax_fwd(context, good_desc(), src, dst);
                 }});
  out.push_back({"src_layout_mismatch",
                 ErrorKind::InvalidArgument,
                 {"layout mismatch", "src strides", "not dense nchw"},
                 [](Context& context) {
                   Tensor src = make(Dims{2, 3, 4, 5}, DType::f32, Layout::channels_last);
                   Tensor dst = make(Dims{2, 3, 4, 5});
                   softmax_fwd(context, good_desc(), src, dst);
                 }});
  out.push_back(
      {"null_src", ErrorKind::InvalidArgument, {"src has null data"}, [](Context& context) {
         Tensor src = Tensor::view(nullptr, Dims{2, 3, 4, 5}, DType::f32);
         Tensor dst = make(Dims{2, 3, 4, 5});
         softmax_fwd(context, good_desc(), src, dst);
       }});
  out.push_back({"partial_overlap",
                 ErrorKind::InvalidArgument,
                 {"dst overlaps src", "exactly src"},
                 [](Context& context) {
                   Tensor big = make(Dims{2 * 3 * 4 * 5 + 1});
                   auto* base = static_cast<float*>(big.data());
                   Tensor src = Tensor::view(base, Dims{2, 3, 4, 5}, DType::f32);
                   Tensor dst = Tensor::view(base + 1, Dims{2, 3, 4, 5}, DType::f32);
                   softmax_fwd(context, good_desc(), src, dst);
                 }});
  out.push_back({"bwd_in_place",
                 ErrorKind::InvalidArgument,
                 {"diff_src overlaps diff_dst", "cannot run in place"},
                 [](Context& context) {
                   Tensor dst = make(Dims{2, 3, 4, 5}), diff = make(Dims{2, 3, 4, 5});
                   softmax_bwd(context, good_desc(), dst, diff, diff);
                 }});
  out.push_back({"bwd_dst_dims",
                 ErrorKind::InvalidArgument,
                 {"dst dims 2x3x4", "2x3x4x5"},
                 [](Context& context) {
                   Tensor dst = make(Dims{2, 3, 4}), diff_dst = make(Dims{2, 3, 4, 5});
                   Tensor diff_src = make(Dims{2, 3, 4, 5});
                   softmax_bwd(context, good_desc(), dst, diff_dst, diff_src);
                 }});
  out.push_back({"unknown_fixed_id",
                 ErrorKind::InvalidArgument,
                 {"no-such-softmax", "valid ids"},
                 [](Context& context) {
                   context.tune().policy(OpKind::softmax, Direction::fwd) =
                       AlgoPolicy::fixed("no-such-softmax");
                   Tensor src = make(Dims{2, 3, 4, 5}), dst = make(Dims{2, 3, 4, 5});
                   softmax_fwd(context, good_desc(), src, dst);
                 }});
  out.push_back(
      {"bwd_weights_direction",
       ErrorKind::InvalidArgument,
       {"softmax has no direction bwd_weights", "fwd, bwd_data"},
       [](Context& context) { softmax_list(context, good_desc(), Direction::bwd_weights); }});
  out.push_back(
      {"parse_mode", ErrorKind::InvalidArgument, {"'spatial'", "instance, channel"}, [](Context&) {
         parse_softmax_mode("spatial");
       }});
  return out;
}

class SoftmaxErrors : public ::testing::TestWithParam<std::tuple<ErrorCase, BackendKind>> {};

TEST_P(SoftmaxErrors, KindAndMessage) {
  const auto& [c, backend] = GetParam();
  if (!backend_available(backend)) GTEST_SKIP() << to_string(backend) << " not available";
  Context context(backend);
  context.set_choice_cache(std::make_shared<ChoiceCache>());
  try {
    c.call(context);
    FAIL() << c.name << ": no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), c.kind) << error.what();
    for (const std::string& pattern : c.patterns)
      EXPECT_TRUE(std::regex_search(error.message(), std::regex(pattern)))
          << c.name << ": message lacks /" << pattern << "/: " << error.message();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, SoftmaxErrors,
    ::testing::Combine(::testing::ValuesIn(cases()),
                       ::testing::Values(BackendKind::reference, BackendKind::cpu)),
    [](const ::testing::TestParamInfo<std::tuple<ErrorCase, BackendKind>>& info) {
      return std::get<0>(info.param).name + "_" + std::string(to_string(std::get<1>(info.param)));
    });

// A valid call after the bad ones: nothing was left in a bad state.
TEST(SoftmaxErrors, ValidCallStillWorks) {
  Context context(BackendKind::reference);
  Tensor src = make(Dims{2, 3, 4, 5}), dst = make(Dims{2, 3, 4, 5});
  EXPECT_NO_THROW(softmax_fwd(context, good_desc(), src, dst));
  EXPECT_NEAR(dst.to_f32()[0], 1.0f / 3.0f, 1e-6);
}

}  // namespace
}  // namespace dnnx
