// Bad inputs to cross-entropy: each case asserts the error kind and that the message names the
// argument and the value received. Every case runs on the reference and the cpu backend (host
// backends check labels during the call; the cudnn backend's deferred check is in
// tests/backends/cudnn_cross_entropy_test.cpp).

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/cross_entropy.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <regex>
#include <string>
#include <vector>

namespace dnnx {
namespace {

CrossEntropyDesc good_desc(Dims dims = Dims{4, 5}) {
  CrossEntropyDesc desc;
  desc.dims = dims;
  desc.reduction = Reduction::mean;
  return desc;
}

Tensor make(const Dims& dims, DType dtype = DType::f32, Layout layout = Layout::channels_first) {
  Tensor t = Tensor::empty(dims, dtype, layout);
  t.fill(0.25f);
  return t;
}

Tensor labels(const Dims& dims, const std::vector<std::int64_t>& values, DType dtype = DType::i64) {
  Tensor t = Tensor::empty(dims, dtype);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::i32) {
      const auto v = static_cast<std::int32_t>(values[i]);
      std::memcpy(static_cast<char*>(t.data()) + i * 4, &v, 4);
    } else {
      std::memcpy(static_cast<char*>(t.data()) + i * 8, &values[i], 8);
    }
  }
  return t;
}

// A forward call of `desc` with the standard tensors, some of them replaced.
struct Call {
  CrossEntropyDesc desc = good_desc();
  Tensor logits = make(Dims{4, 5});
  Tensor label_tensor = labels(Dims{4}, {0, 1, 2, 3});
  std::optional<Tensor> weights;
  Tensor loss = make(Dims{1});
  void operator()(Context& context) {
    cross_entropy_fwd(context, desc, logits, label_tensor, weights ? &*weights : nullptr, loss);
  }
};

struct ErrorCase {
  std::string name;
  ErrorKind kind;
  std::vector<std::string> patterns;  // regexes the message must match
  std::function<void(Context&)> call;
  CrossEntropyDesc desc = good_desc();  // whose candidates are each run (when it is valid)
};

void PrintTo(const ErrorCase& c, std::ostream* out) { *out << c.name; }

std::vector<ErrorCase> cases() {
  std::vector<ErrorCase> out;
  {
    Call call;
    call.label_tensor = labels(Dims{4}, {0, 1, 5, 3});
    out.push_back(
        {"label_equal_to_classes",
         ErrorKind::InvalidArgument,
         {"labels\\[n=2\\]", "position 2", "is 5", "\\[0, 5\\)", "ignore_index \\(-100\\)"},
         call});
  }
  {
    Call call;
    call.label_tensor = labels(Dims{4}, {0, -1, 2, -7}, DType::i32);
    call.desc.label_dtype = DType::i32;
    out.push_back({"negative_label_lowest_reported",
                   ErrorKind::InvalidArgument,
                   {"labels\\[n=1\\]", "is -1"},
                   call});
  }
  {
    Call call;
    call.desc = good_desc(Dims{2, 3, 2, 4});
    call.desc.reduction = Reduction::none;
    call.logits = make(Dims{2, 3, 2, 4});
    call.label_tensor = labels(Dims{2, 2, 4}, {0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 9, 2, 0});
    call.loss = make(Dims{2, 2, 4});
    out.push_back({"spatial_label_out_of_range",
                   ErrorKind::InvalidArgument,
                   {"labels\\[n=1, h=1, w=1\\]", "position 13", "is 9"},
                   call,
                   call.desc});
  }
  {
    Call call;
    call.desc.ignore_index = 4;
    call.label_tensor = labels(Dims{4}, {0, -100, 4, 1});
    out.push_back({"ignore_index_is_not_-100",
                   ErrorKind::InvalidArgument,
                   {"labels\\[n=1\\]", "is -100", "ignore_index \\(4\\)"},
                   call});
  }
  {
    Call call;
    call.desc.weighted = true;
    call.weights = make(Dims{4});
    out.push_back(
        {"weights_wrong_dims", ErrorKind::InvalidArgument, {"weights dims 4", "expects 5"}, call});
  }
  {
    Call call;
    call.desc.weighted = true;
    call.weights = make(Dims{5}, DType::f16);
    out.push_back({"weights_wrong_dtype",
                   ErrorKind::InvalidArgument,
                   {"dtype mix", "weights is f16", "f32"},
                   call});
  }
  {
    Call call;
    call.weights = make(Dims{5});
    out.push_back({"weights_not_declared",
                   ErrorKind::InvalidArgument,
                   {"weights were given", "weighted = false"},
                   call});
  }
  {
    Call call;
    call.desc.weighted = true;
    out.push_back({"weights_missing",
                   ErrorKind::InvalidArgument,
                   {"weights are missing", "weighted", "dims 5"},
                   call});
  }
  {
    Call call;
    call.desc.label_dtype = DType::f32;
    out.push_back({"float_label_dtype",
                   ErrorKind::InvalidArgument,
                   {"label_dtype must be i32 or i64", "got f32"},
                   call});
  }
  {
    Call call;
    call.label_tensor = labels(Dims{4}, {0, 1, 2, 3}, DType::i32);
    out.push_back({"labels_dtype_mix",
                   ErrorKind::InvalidArgument,
                   {"dtype mix", "labels is i32", "label_dtype is i64"},
                   call});
  }
  {
    Call call;
    call.label_tensor = labels(Dims{3}, {0, 1, 2});
    out.push_back(
        {"labels_dims_mismatch", ErrorKind::InvalidArgument, {"labels dims 3", "expects 4"}, call});
  }
  {
    Call call;
    call.loss = make(Dims{4});
    out.push_back(
        {"mean_loss_dims", ErrorKind::InvalidArgument, {"loss dims 4", "expects 1"}, call});
  }
  {
    Call call;
    call.logits = make(Dims{4, 5}, DType::f16);
    out.push_back({"logits_dtype_mix",
                   ErrorKind::InvalidArgument,
                   {"dtype mix", "logits is f16", "f32"},
                   call});
  }
  {
    Call call;
    call.desc = good_desc(Dims{2, 3, 2, 4});
    call.logits = make(Dims{2, 3, 2, 4}, DType::f32, Layout::channels_last);
    call.label_tensor = labels(Dims{2, 2, 4}, std::vector<std::int64_t>(16, 0));
    out.push_back({"logits_layout_mismatch",
                   ErrorKind::InvalidArgument,
                   {"layout mismatch", "logits strides", "nchw"},
                   call});
  }
  {
    Call call;
    call.logits = Tensor::view(nullptr, Dims{4, 5}, DType::f32);
    out.push_back({"null_logits", ErrorKind::InvalidArgument, {"logits has null data"}, call});
  }
  {
    Call call;
    call.desc.reduction = static_cast<Reduction>(9);
    out.push_back({"reduction_out_of_range",
                   ErrorKind::InvalidArgument,
                   {"reduction must be none, mean or sum", "value 9"},
                   call});
  }
  {
    Call call;
    call.desc.dims = Dims{20};
    out.push_back(
        {"rank_1_logits", ErrorKind::InvalidArgument, {"logits dims 20", "rank 1"}, call});
  }
  out.push_back({"diff_logits_overlaps_logits",
                 ErrorKind::InvalidArgument,
                 {"diff_logits overlaps logits", "cannot run in place"},
                 [](Context& context) {
                   Tensor logits = make(Dims{4, 5});
                   Tensor y = labels(Dims{4}, {0, 1, 2, 3});
                   Tensor diff_loss = make(Dims{1});
                   cross_entropy_bwd(context, good_desc(), logits, y, nullptr, diff_loss, logits);
                 }});
  out.push_back({"bwd_label_out_of_range",
                 ErrorKind::InvalidArgument,
                 {"labels\\[n=3\\]", "is 42"},
                 [](Context& context) {
                   Tensor logits = make(Dims{4, 5}), diff_logits = make(Dims{4, 5});
                   Tensor y = labels(Dims{4}, {0, 1, 2, 42});
                   Tensor diff_loss = make(Dims{1});
                   cross_entropy_bwd(context, good_desc(), logits, y, nullptr, diff_loss,
                                     diff_logits);
                 }});
  // Note [shapes of an unvalidated desc]: shape accessors check the logits dims first.
  out.push_back({"labels_dims_of_unvalidated_rank_one",
                 ErrorKind::InvalidArgument,
                 {"logits dims 7", "rank 1"},
                 [](Context&) { good_desc(Dims{7}).labels_dims(); }});
  out.push_back({"positions_of_unvalidated_count_overflow",
                 ErrorKind::InvalidArgument,
                 {"logits dims 2147483648x2147483648x2147483648", "more elements"},
                 [](Context&) {
                   const std::int64_t big = std::int64_t{1} << 31;
                   good_desc(Dims{big, big, big}).positions();
                 }});
  out.push_back(
      {"parse_reduction", ErrorKind::InvalidArgument, {"'avg'", "none, mean, sum"}, [](Context&) {
         parse_reduction("avg");
       }});
  return out;
}

class XentErrors : public ::testing::TestWithParam<std::tuple<ErrorCase, BackendKind>> {};

TEST_P(XentErrors, KindAndMessage) {
  const auto& [c, backend] = GetParam();
  if (!backend_available(backend)) GTEST_SKIP() << to_string(backend) << " not available";
  // Every candidate of the backend must raise it, not only the heuristic one.
  Context lister(backend);
  std::vector<std::string> ids{""};
  try {
    for (const AlgoInfo& algo : cross_entropy_list(lister, c.desc, Direction::fwd))
      if (algo.supported) ids.push_back(algo.id);
  } catch (const Error&) {
  }
  for (const std::string& id : ids) {
    Context context(backend);
    context.set_choice_cache(std::make_shared<ChoiceCache>());
    if (!id.empty()) {
      context.tune().policy(OpKind::cross_entropy, Direction::fwd) = AlgoPolicy::fixed(id);
      context.tune().policy(OpKind::cross_entropy, Direction::bwd_data) = AlgoPolicy::fixed(id);
    }
    try {
      c.call(context);
      ADD_FAILURE() << c.name << " [" << id << "]: no error";
    } catch (const Error& error) {
      EXPECT_EQ(error.kind(), c.kind) << error.what();
      for (const std::string& pattern : c.patterns)
        EXPECT_TRUE(std::regex_search(error.message(), std::regex(pattern)))
            << c.name << " [" << id << "]: message lacks /" << pattern << "/: " << error.message();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, XentErrors,
    ::testing::Combine(::testing::ValuesIn(cases()),
                       ::testing::Values(BackendKind::reference, BackendKind::cpu)),
    [](const ::testing::TestParamInfo<std::tuple<ErrorCase, BackendKind>>& info) {
      std::string name =
          std::get<0>(info.param).name + "_" + std::string(to_string(std::get<1>(info.param)));
      for (char& ch : name)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return name;
    });

// Labels equal to ignore_index are never out of range, whatever their value.
TEST(XentErrors, IgnoreIndexOutsideTheClassesIsAccepted) {
  for (const BackendKind backend : {BackendKind::reference, BackendKind::cpu}) {
    if (!backend_available(backend)) continue;
    Context context(backend);
    Call call;
    call.desc.ignore_index = 255;
    call.label_tensor = labels(Dims{4}, {255, 1, 255, 4});
    EXPECT_NO_THROW(call(context)) << to_string(backend);
    EXPECT_NEAR(call.loss.to_f32()[0], std::log(5.0), 1e-6) << to_string(backend);
  }
}

}  // namespace
}  // namespace dnnx
