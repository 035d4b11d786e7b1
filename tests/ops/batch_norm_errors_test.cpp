// Bad inputs to batch normalization: every case must raise dnnx::Error of the right kind whose
// message (without the context decorations) names the argument and the value received.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/batch_norm.hpp>

#include "support/errors.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace dnnx::test {
namespace {

// N=2, C=3, 5x7: each number a case corrupts is distinct from the sizes around it.
BatchNormDesc base_desc() {
  BatchNormDesc desc;
  desc.dims = {2, 3, 5, 7};
  desc.mode = BatchNormMode::spatial;
  desc.training = true;
  desc.affine = true;
  return desc;
}

// Dense owning tensors for every role of `desc`.
struct Tensors {
  explicit Tensors(const BatchNormDesc& desc)
      : src(Tensor::zeros(desc.dims, desc.dtype, desc.layout)),
        dst(Tensor::zeros(desc.dims, desc.dtype, desc.layout)),
        diff_dst(Tensor::zeros(desc.dims, desc.dtype, desc.layout)),
        diff_src(Tensor::zeros(desc.dims, desc.dtype, desc.layout)),
        scale(param(desc, 1)),
        shift(param(desc, 0)),
        running_mean(param(desc, 0)),
        running_var(param(desc, 1)),
        saved_mean(param(desc, 0)),
        saved_inv_std(param(desc, 1)),
        diff_scale(param(desc, 0)),
        diff_shift(param(desc, 0)) {}

  static Tensor param(const BatchNormDesc& desc, float value) {
    const Dims dims = desc.param_dims();
    Tensor t =
        Tensor::empty(dims, DType::f32, dims.rank() == 1 ? Layout::channels_first : desc.layout);
    t.fill(value);
    return t;
  }

  // Every tensor the desc may use.
  BatchNormTensors all() {
    BatchNormTensors t;
    t.scale = &scale;
    t.shift = &shift;
    t.running_mean = &running_mean;
    t.running_var = &running_var;
    t.saved_mean = &saved_mean;
    t.saved_inv_std = &saved_inv_std;
    return t;
  }

  Tensor src, dst, diff_dst, diff_src;
  Tensor scale, shift, running_mean, running_var, saved_mean, saved_inv_std, diff_scale, diff_shift;
};

// Runs a forward of `desc` after `edit` changed the call's tensors.
std::function<void()> fwd_with(BatchNormDesc desc,
                               std::function<void(Tensors&, BatchNormTensors&)> edit) {
  return [desc, edit = std::move(edit)] {
    Tensors t(desc);
    BatchNormTensors p = t.all();
    edit(t, p);
    Context context = reference_context();
    dnnx::batch_norm_fwd(context, desc, t.src, t.dst, p);
  };
}

std::function<void()> bwd_with(
    BatchNormDesc desc, std::function<void(Tensors&, BatchNormTensors&, Tensor*&, Tensor*&)> edit) {
  return [desc, edit = std::move(edit)] {
    Tensors t(desc);
    BatchNormTensors p = t.all();
    Tensor* diff_scale = &t.diff_scale;
    Tensor* diff_shift = &t.diff_shift;
    edit(t, p, diff_scale, diff_shift);
    Context context = reference_context();
    dnnx::batch_norm_bwd(context, desc, t.src, t.diff_dst, p, t.diff_src, diff_scale, diff_shift);
  };
}

// A desc `edit` corrupted, through the op layer (batch_norm_list validates before any backend).
std::function<void()> list_with(std::function<void(BatchNormDesc&)> edit) {
  return list_after(base_desc(), std::move(edit), dnnx::batch_norm_list);
}

std::vector<BadCase> bad_cases() {
  using K = ErrorKind;
  using T = Tensors;
  using P = BatchNormTensors;
  std::vector<BadCase> cases;
  const BadCaseAdder add(cases);
  BatchNormDesc inference = base_desc();
  inference.training = false;
  BatchNormDesc plain = base_desc();
  plain.affine = false;

  // --- the desc ---
  add("momentum_above_one", list_with([](BatchNormDesc& d) { d.momentum = 1.5; }),
      K::InvalidArgument, {"momentum", "[0, 1]", "1.5"});
  add("momentum_negative", list_with([](BatchNormDesc& d) { d.momentum = -0.25; }),
      K::InvalidArgument, {"momentum", "-0.25"});
  add("momentum_nan", list_with([](BatchNormDesc& d) { d.momentum = std::nan(""); }),
      K::InvalidArgument, {"momentum", "nan"});
  add("eps_zero", list_with([](BatchNormDesc& d) { d.eps = 0; }), K::InvalidArgument,
      {"eps", "> 0", "got 0"});
  add("eps_negative", list_with([](BatchNormDesc& d) { d.eps = -1e-05; }), K::InvalidArgument,
      {"eps", "-1e-05"});
  add("rank_one", list_with([](BatchNormDesc& d) { d.dims = {7}; }), K::InvalidArgument,
      {"dims 7", "rank 1", "rank 2 to 5"});
  add("batch_zero", list_with([](BatchNormDesc& d) {
        d.dims = {0, 3, 5, 7};
      }),
      K::InvalidArgument, {"batch (N)", "got 0"});
  add("channels_negative", list_with([](BatchNormDesc& d) {
        d.dims = {2, -3, 5, 7};
      }),
      K::InvalidArgument, {"channels (C)", "-3"});
  add("element_count_overflow", list_with([](BatchNormDesc& d) {
        const std::int64_t big = std::int64_t{1} << 31;
        d.dims = {big, 1, big, big};
      }),
      K::InvalidArgument, {"dims 2147483648x1x2147483648x2147483648", "more elements"});
  // Note [shapes of an unvalidated desc]: accessors check the dims before computing with them.
  add("statistics_of_unvalidated_desc",
      [] {
        BatchNormDesc desc = base_desc();
        desc.dims = {2, 0, 5};
        desc.statistics();
      },
      K::InvalidArgument, {"channels (C)", "got 0"});
  add("reduction_size_of_unvalidated_desc",
      [] {
        const std::int64_t big = std::int64_t{1} << 31;
        BatchNormDesc desc = base_desc();
        desc.dims = {big, 3, big, big};  // N x H x W = 2^93 without the check
        desc.reduction_size();
      },
      K::InvalidArgument, {"dims 2147483648x3x2147483648x2147483648", "more elements"});
  add("param_dims_of_unvalidated_rank_one",
      [] {
        BatchNormDesc desc = base_desc();
        desc.dims = {7};
        desc.param_dims();
      },
      K::InvalidArgument, {"dims 7", "rank 1"});
  add("training_one_value_per_statistic", list_with([](BatchNormDesc& d) {
        d.dims = {1, 3, 1, 1};
      }),
      K::InvalidArgument, {"training", "more than one value", "got 1", "1x3x1x1"});
  add("training_batch_one_per_activation", list_with([](BatchNormDesc& d) {
        d.dims = {1, 6};
        d.mode = BatchNormMode::per_activation;
      }),
      K::InvalidArgument, {"more than one value", "got 1", "per_activation"});
  add("dtype_integer", list_with([](BatchNormDesc& d) { d.dtype = DType::i32; }),
      K::InvalidArgument, {"dtype", "i32"});
  add("mode_unknown_name", [] { dnnx::parse_batch_norm_mode("channel"); }, K::InvalidArgument,
      {"batch-norm mode", "'channel'", "per_activation, spatial"});

  // --- the tensors of a forward ---
  add("running_mean_channel_mismatch",
      fwd_with(inference, [](T& t, P& p) { t.running_mean = Tensor::zeros({4}, DType::f32); }),
      K::InvalidArgument, {"running_mean dims 4", "expects 3", "one value per channel"});
  add("running_var_wrong_rank_per_activation",
      [] {
        BatchNormDesc desc = base_desc();
        desc.mode = BatchNormMode::per_activation;
        fwd_with(desc, [](T& t, P&) { t.running_var = Tensor::zeros({3}, DType::f32); })();
      },
      K::InvalidArgument, {"running_var dims 3", "1x3x5x7", "N = 1"});
  add("inference_without_running_mean",
      fwd_with(inference, [](T&, P& p) { p.running_mean = nullptr; }), K::InvalidArgument,
      {"running_mean is missing", "inference", "running statistics"});
  add("training_running_mean_without_running_var",
      fwd_with(base_desc(), [](T&, P& p) { p.running_var = nullptr; }), K::InvalidArgument,
      {"running_mean is given without running_var"});
  add("scale_dtype_f16",
      fwd_with(base_desc(), [](T& t, P&) { t.scale = Tensor::zeros({3}, DType::f16); }),
      K::InvalidArgument, {"scale dtype must be f32", "got f16"});
  add("running_var_dtype_bf16",
      fwd_with(inference, [](T& t, P&) { t.running_var = Tensor::zeros({3}, DType::bf16); }),
      K::InvalidArgument, {"running_var dtype must be f32", "got bf16"});
  add("dtype_mix_src_f16",
      fwd_with(base_desc(),
               [](T& t, P&) {
                 t.src = Tensor::zeros({2, 3, 5, 7}, DType::f16);
               }),
      K::InvalidArgument, {"dtype mix", "src is f16", "f32"});
  add("layout_mismatch_dst_nhwc",
      fwd_with(base_desc(),
               [](T& t, P&) {
                 t.dst = Tensor::zeros({2, 3, 5, 7}, DType::f32, Layout::channels_last);
               }),
      K::InvalidArgument, {"layout mismatch", "dst", "nchw"});
  add("src_dims_mismatch",
      fwd_with(base_desc(),
               [](T& t, P&) {
                 t.src = Tensor::zeros({2, 3, 5, 8}, DType::f32);
               }),
      K::InvalidArgument, {"src dims 2x3x5x8", "2x3x5x7"});
  add("src_null_data",
      fwd_with(base_desc(),
               [](T& t, P&) {
                 t.src = Tensor::view(nullptr, {2, 3, 5, 7}, DType::f32);
               }),
      K::InvalidArgument, {"src has null data"});
  add("dst_is_src",
      [] {
        const BatchNormDesc desc = base_desc();
        Tensors t(desc);
        Context context = reference_context();
        dnnx::batch_norm_fwd(context, desc, t.src, t.src, t.all());
      },
      K::InvalidArgument, {"dst overlaps src", "in place"});
  add("saved_mean_is_running_mean",
      fwd_with(base_desc(), [](T& t, P& p) { p.saved_mean = &t.running_mean; }), K::InvalidArgument,
      {"running_mean overlaps saved_mean"});
  add("training_saved_inv_std_without_saved_mean",
      fwd_with(base_desc(), [](T&, P& p) { p.saved_mean = nullptr; }), K::InvalidArgument,
      {"saved_inv_std is given without saved_mean", "both statistics or neither"});
  add("affine_without_scale", fwd_with(base_desc(), [](T&, P& p) { p.scale = nullptr; }),
      K::InvalidArgument, {"scale is missing", "affine"});
  add("scale_without_affine", fwd_with(plain, [](T&, P&) {}), K::InvalidArgument,
      {"scale is given", "affine is false"});

  // --- the tensors of a backward ---
  add("training_bwd_without_saved_mean",
      bwd_with(base_desc(), [](T&, P& p, Tensor*&, Tensor*&) { p.saved_mean = nullptr; }),
      K::InvalidArgument, {"saved_mean is missing", "forward saved"});
  add("inference_bwd_without_running_var",
      bwd_with(inference, [](T&, P& p, Tensor*&, Tensor*&) { p.running_var = nullptr; }),
      K::InvalidArgument, {"running_var is missing"});
  add("affine_bwd_without_diff_scale",
      bwd_with(base_desc(), [](T&, P&, Tensor*& diff_scale, Tensor*&) { diff_scale = nullptr; }),
      K::InvalidArgument, {"diff_scale is missing"});
  add("diff_shift_without_affine",
      bwd_with(plain,
               [](T&, P& p, Tensor*& diff_scale, Tensor*&) {
                 p.scale = nullptr;
                 p.shift = nullptr;
                 diff_scale = nullptr;
               }),
      K::InvalidArgument, {"diff_shift is given", "affine is false"});
  add("diff_src_overlaps_diff_dst",
      [] {
        const BatchNormDesc desc = base_desc();
        Tensors t(desc);
        Context context = reference_context();
        dnnx::batch_norm_bwd(context, desc, t.src, t.diff_dst, t.all(), t.diff_dst, &t.diff_scale,
                             &t.diff_shift);
      },
      K::InvalidArgument, {"diff_src overlaps diff_dst"});

  // --- directions and candidates ---
  add("direction_bwd_weights",
      [] {
        Context context = reference_context();
        dnnx::batch_norm_list(context, base_desc(), Direction::bwd_weights);
      },
      K::InvalidArgument, {"bwd_weights", "fwd, bwd_data"});
  add("fixed_unknown_id",
      [] {
        Context context = reference_context();
        context.set_choice_cache(std::make_shared<dnnx::ChoiceCache>());
        context.tune().policy(dnnx::OpKind::batch_norm, Direction::fwd) =
            dnnx::AlgoPolicy::fixed("cudnn:legacy:spatial");
        const BatchNormDesc desc = base_desc();
        Tensors t(desc);
        dnnx::batch_norm_fwd(context, desc, t.src, t.dst, t.all());
      },
      K::InvalidArgument, {"'cudnn:legacy:spatial'", "reference:direct"});
  return cases;
}

class BatchNormErrors : public ::testing::TestWithParam<BadCase> {};

// The op layer adds the case to its errors: op, direction and the repro line.
TEST_P(BatchNormErrors, RaisesTheRightKindNamingTheArgument) { expect_raises(GetParam(), "bnorm"); }

INSTANTIATE_TEST_SUITE_P(Cases, BatchNormErrors, ::testing::ValuesIn(bad_cases()), bad_case_name);

TEST(BatchNormErrors, TableHasAtLeastFifteenCases) { EXPECT_GE(bad_cases().size(), 15u); }

}  // namespace
}  // namespace dnnx::test
