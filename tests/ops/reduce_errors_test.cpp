// Bad inputs to reduce, argmax and accuracy: every case must raise dnnx::Error of the right kind
// whose message (without the context decorations) names the argument and the value received.

#include <dnnx/dnnx.hpp>

#include "ops/reduce_cases.hpp"
#include "support/errors.hpp"
#include "support/random.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace dnnx::test {
namespace {

// A sum over the spatial axes of 2x3x5x7.
ReduceDesc reduce_desc(ReduceKind kind = ReduceKind::sum) {
  return ReduceDesc::over(kind, Dims{2, 3, 5, 7}, {2, 3});
}
ArgmaxDesc argmax_desc() {
  ArgmaxDesc desc;
  desc.src_dims = Dims{4, 10};
  desc.axis = 1;
  return desc;
}
AccuracyDesc accuracy_desc() {
  AccuracyDesc desc;
  desc.dims = Dims{4, 10};
  return desc;
}

std::function<void()> reduce_list_with(std::function<void(ReduceDesc&)> edit) {
  return list_after(reduce_desc(), std::move(edit), dnnx::reduce_list);
}
std::function<void()> argmax_list_with(std::function<void(ArgmaxDesc&)> edit) {
  return list_after(argmax_desc(), std::move(edit), dnnx::argmax_list);
}
std::function<void()> accuracy_list_with(std::function<void(AccuracyDesc&)> edit) {
  return list_after(accuracy_desc(), std::move(edit), dnnx::accuracy_list);
}

// A reduce call of `kind` whose tensors `edit` may change: fwd (src, dst) or bwd (src, dst,
// diff_dst, diff_src).
std::function<void()> reduce_call(ReduceKind kind, Direction direction,
                                  std::function<void(Tensor&, Tensor&, Tensor&, Tensor&)> edit) {
  return [kind, direction, edit] {
    const ReduceDesc desc = reduce_desc(kind);
    Tensor src = random_tensor(desc.src_dims, desc.dtype, desc.layout, 1);
    Tensor dst = random_tensor(desc.dst_dims, desc.dtype, desc.layout, 2);
    Tensor diff_dst = random_tensor(desc.dst_dims, desc.dtype, desc.layout, 3);
    Tensor diff_src = random_tensor(desc.src_dims, desc.dtype, desc.layout, 4);
    edit(src, dst, diff_dst, diff_src);
    Context context = reference_context();
    if (direction == Direction::fwd) {
      dnnx::reduce_fwd(context, desc, src, dst);
    } else {
      dnnx::reduce_bwd(context, desc, src, dst, diff_dst, diff_src);
    }
  };
}

std::function<void()> accuracy_call(BackendKind backend, std::int64_t bad_label,
                                    std::function<void(Tensor&, Tensor&, Tensor&)> edit) {
  return [backend, bad_label, edit] {
    const AccuracyDesc desc = accuracy_desc();
    Tensor logits = random_tensor(desc.dims, desc.dtype, desc.layout, 1);
    Tensor labels = random_label_tensor(desc.labels_dims(), desc.label_dtype, desc.classes(),
                                        desc.ignore_index, 2);
    if (bad_label != 0) std::memcpy(static_cast<std::int64_t*>(labels.data()) + 2, &bad_label, 8);
    Tensor count = count_tensor(desc.count_dtype, 0);
    edit(logits, labels, count);
    Context context(backend);
    context.set_choice_cache(std::make_shared<ChoiceCache>());
    dnnx::accuracy_fwd(context, desc, logits, labels, count);
  };
}

std::vector<BadCase> bad_cases() {
  using K = ErrorKind;
  std::vector<BadCase> cases;
  const BadCaseAdder add(cases);
  const auto none = [](Tensor&, Tensor&, Tensor&) {};

  // --- reduce: the desc ---
  add("reduce_dst_not_a_reduction", reduce_list_with([](ReduceDesc& d) {
        d.dst_dims = Dims{2, 4, 1, 1};
      }),
      K::InvalidArgument, {"2x4x1x1", "not a reduction of src_dims 2x3x5x7", "axis 1"});
  add("reduce_ranks_differ", reduce_list_with([](ReduceDesc& d) { d.dst_dims = Dims{1}; }),
      K::InvalidArgument, {"dst_dims '1'", "rank 1", "rank 4"});
  add("reduce_rank0", reduce_list_with([](ReduceDesc& d) { d.src_dims = Dims(); }),
      K::InvalidArgument, {"rank 0", "rank 1 to 5"});
  add("reduce_empty_tensor", reduce_list_with([](ReduceDesc& d) {
        d.src_dims = Dims{2, 0, 5, 7};
        d.dst_dims = Dims{2, 0, 1, 1};
      }),
      K::InvalidArgument, {"entry 1 must be >= 1, got 0", "empty tensors"});
  add("reduce_integer_dtype", reduce_list_with([](ReduceDesc& d) { d.dtype = DType::i32; }),
      K::InvalidArgument, {"dtype must be f32, f16 or bf16, got i32"});
  add("reduce_bad_kind",
      reduce_list_with([](ReduceDesc& d) { d.kind = static_cast<ReduceKind>(42); }),
      K::InvalidArgument, {"kind has the invalid value 42"});
  add("reduce_axis_out_of_range",
      [] {
        ReduceDesc::over(ReduceKind::sum, Dims{2, 3}, {2});
      },
      K::InvalidArgument, {"axis 2 is out of range", "[0, 2)"});
  add("reduce_axis_twice",
      [] {
        ReduceDesc::over(ReduceKind::sum, Dims{2, 3}, {1, 1});
      },
      K::InvalidArgument, {"axis 1 is listed twice"});
  add("reduce_bad_kind_name", [] { parse_reduce_kind("avg"); }, K::InvalidArgument,
      {"avg", "sum, mean, max, min, norm1, norm2"});
  // --- reduce: the tensors ---
  add("reduce_dst_dims",
      reduce_call(ReduceKind::sum, Direction::fwd,
                  [](Tensor&, Tensor& dst, Tensor&, Tensor&) {
                    dst = random_tensor(Dims{2, 3, 1, 2}, DType::f32, Layout::channels_first, 5);
                  }),
      K::InvalidArgument, {"dst dims 2x3x1x2", "dst_dims 2x3x1x1"});
  add("reduce_src_dtype",
      reduce_call(ReduceKind::sum, Direction::fwd,
                  [](Tensor& src, Tensor&, Tensor&, Tensor&) {
                    src = random_tensor(Dims{2, 3, 5, 7}, DType::f16, Layout::channels_first, 5);
                  }),
      K::InvalidArgument, {"dtype mix", "src is f16"});
  add("reduce_in_place",
      reduce_call(ReduceKind::max, Direction::bwd_data,
                  [](Tensor& src, Tensor&, Tensor&, Tensor& diff_src) { diff_src = src; }),
      K::InvalidArgument, {"diff_src overlaps src"});
  add("reduce_max_bwd_without_values",
      [] {
        const ReduceDesc desc = reduce_desc(ReduceKind::max);
        Tensor diff_dst = random_tensor(desc.dst_dims, desc.dtype, desc.layout, 3);
        Tensor diff_src = random_tensor(desc.src_dims, desc.dtype, desc.layout, 4);
        Context context = reference_context();
        dnnx::reduce_bwd(context, desc, diff_dst, diff_src);
      },
      K::InvalidArgument, {"backward pass of max reads the forward's src and dst"});
  add("reduce_bwd_dst_dims",
      reduce_call(ReduceKind::min, Direction::bwd_data,
                  [](Tensor&, Tensor& dst, Tensor&, Tensor&) {
                    dst = random_tensor(Dims{2, 3, 1, 2}, DType::f32, Layout::channels_first, 5);
                  }),
      K::InvalidArgument, {"dst dims 2x3x1x2", "dst_dims 2x3x1x1"});

  // --- argmax ---
  add("argmax_axis_out_of_range", argmax_list_with([](ArgmaxDesc& d) { d.axis = 2; }),
      K::InvalidArgument, {"axis 2 is out of range for src_dims 4x10", "0 to 1"});
  add("argmax_index_dtype", argmax_list_with([](ArgmaxDesc& d) { d.index_dtype = DType::f32; }),
      K::InvalidArgument, {"index_dtype must be i32 or i64, got f32"});
  add("argmax_integer_src", argmax_list_with([](ArgmaxDesc& d) { d.dtype = DType::i64; }),
      K::InvalidArgument, {"dtype (of src) must be f32, f16 or bf16, got i64"});
  add("argmax_empty", argmax_list_with([](ArgmaxDesc& d) {
        d.src_dims = Dims{4, 0};
      }),
      K::InvalidArgument, {"entry 1 must be >= 1, got 0"});
  add("argmax_dst_dtype",
      [] {
        const ArgmaxDesc desc = argmax_desc();
        Tensor src = random_tensor(desc.src_dims, desc.dtype, desc.layout, 1);
        Tensor dst = Tensor::empty(Dims{4, 1}, DType::i32);
        Context context = reference_context();
        dnnx::argmax_fwd(context, desc, src, dst);
      },
      K::InvalidArgument, {"dtype mix", "dst is i32"});

  // --- accuracy ---
  add("accuracy_top_k_zero", accuracy_list_with([](AccuracyDesc& d) { d.top_k = 0; }),
      K::InvalidArgument, {"top_k must be in [1, C] = [1, 10], got 0"});
  add("accuracy_top_k_above_c", accuracy_list_with([](AccuracyDesc& d) { d.top_k = 11; }),
      K::InvalidArgument, {"got 11"});
  add("accuracy_count_dtype",
      accuracy_list_with([](AccuracyDesc& d) { d.count_dtype = DType::i32; }), K::InvalidArgument,
      {"count_dtype must be i64 or f32, got i32"});
  add("accuracy_label_dtype",
      accuracy_list_with([](AccuracyDesc& d) { d.label_dtype = DType::f32; }), K::InvalidArgument,
      {"label_dtype must be i32 or i64", "got f32"});
  add("accuracy_rank1", accuracy_list_with([](AccuracyDesc& d) { d.dims = Dims{10}; }),
      K::InvalidArgument, {"logits dims 10", "rank 2 to 5"});
  add("accuracy_bad_label_reference", accuracy_call(BackendKind::reference, 10, none),
      K::InvalidArgument, {"labels[n=2] (position 2) is 10", "[0, 10)", "ignore_index (-100)"});
  add("accuracy_negative_label_reference", accuracy_call(BackendKind::reference, -1, none),
      K::InvalidArgument, {"labels[n=2] (position 2) is -1"});
  add("accuracy_count_dims",
      accuracy_call(
          BackendKind::reference, 0,
          [](Tensor&, Tensor&, Tensor& count) { count = Tensor::empty(Dims{2}, DType::i64); }),
      K::InvalidArgument, {"count dims 2", "expects 1"});
  add("accuracy_count_overlaps_labels",
      accuracy_call(BackendKind::reference, 0,
                    [](Tensor&, Tensor& labels, Tensor& count) {
                      count = Tensor::view(labels.data(), Dims{1}, DType::i64);
                    }),
      K::InvalidArgument, {"count overlaps labels"});
  {
    BadCase bad{"accuracy_bad_label_cpu",
                accuracy_call(BackendKind::cpu, 10, none),
                K::InvalidArgument,
                {"labels[n=2] (position 2) is 10", "[0, 10)"},
                BackendKind::cpu};
    cases.push_back(std::move(bad));
  }
  return cases;
}

class ReduceErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(ReduceErrors, RaisesWithKindAndMessage) {
  const std::string& name = GetParam().name;
  expect_raises(GetParam(), name.starts_with("argmax")     ? "argmax"
                            : name.starts_with("accuracy") ? "accuracy"
                                                           : "reduce");
}

INSTANTIATE_TEST_SUITE_P(Table, ReduceErrors, ::testing::ValuesIn(bad_cases()), bad_case_name);

TEST(ReduceErrors, TableHasAtLeastTwentyFiveCases) { EXPECT_GE(bad_cases().size(), 25u); }

}  // namespace
}  // namespace dnnx::test
