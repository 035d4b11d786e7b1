// The op layer's host cost per call (Note [op dispatch] in src/ops/dispatch.hpp), on any machine.
//
// A convolution of one element on the reference backend computes next to nothing, so a call's time
// is the op layer's work (checks, the fast-path lookup, the workspace) plus the plan's execute().
// Timing the same plan's execute() alone gives the difference: what dnnx adds to a backend call.
// The op layer is the same code for every backend, so this is also what it adds in front of a
// cuDNN launch (bench/cudnn_conv_bench.cpp --overhead-only measures that whole call on a GPU).
//
//   build/bench/dispatch_bench [--benchmark_repetitions=5]

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/ops/conv.hpp>
#include <dnnx/tensor.hpp>

#include "core/backend.hpp"
#include "ops/context_state.hpp"

#include <benchmark/benchmark.h>

#include <memory>

namespace {

using namespace dnnx;

struct Tiny {
  Context context{BackendKind::reference};
  ConvDesc desc = ConvDesc::from_shapes(Dims{1, 1, 1, 1}, Dims{1, 1, 1, 1}, {1}, {0}, {1}, 1,
                                        DType::f32, Layout::channels_first);
  Tensor src = Tensor::zeros(desc.src_dims(), DType::f32);
  Tensor weights = Tensor::zeros(desc.weights_dims(), DType::f32);
  Tensor dst = Tensor::zeros(desc.dst_dims(), DType::f32);

  Tiny() { context.set_choice_cache(std::make_shared<ChoiceCache>()); }

  std::shared_ptr<const Choice> call(Direction direction) {
    switch (direction) {
      case Direction::fwd: return conv_fwd(context, desc, src, weights, dst);
      case Direction::bwd_data: return conv_bwd_data(context, desc, dst, weights, src);
      case Direction::bwd_weights: return conv_bwd_weights(context, desc, src, dst, weights);
      case Direction::fwd_training: break;  // not a convolution direction
    }
    return nullptr;
  }

  detail::ConvArgs args(Direction direction) {
    return detail::ConvArgs::by_shape(direction, src, weights, dst);
  }
};

void BM_op_layer(benchmark::State& state) {
  Tiny tiny;
  const auto direction = static_cast<Direction>(state.range(0));
  tiny.call(direction);  // selection and plan, once
  for (auto _ : state) benchmark::DoNotOptimize(tiny.call(direction));
}

void BM_plan_execute(benchmark::State& state) {
  Tiny tiny;
  const auto direction = static_cast<Direction>(state.range(0));
  const auto choice = tiny.call(direction);
  detail::Backend& backend = detail::state_of(tiny.context).backend();
  const auto plan = backend.conv().plan(tiny.desc, direction, choice->algo.id);
  const detail::Workspace workspace = detail::state_of(tiny.context).workspace(plan->algo().workspace_bytes);
  const detail::ConvArgs args = tiny.args(direction);
  for (auto _ : state) plan->execute(args, workspace);
}

// 0, 1, 2: fwd, bwd_data, bwd_weights.
BENCHMARK(BM_op_layer)->DenseRange(0, 2)->ArgName("direction");
BENCHMARK(BM_plan_execute)->DenseRange(0, 2)->ArgName("direction");

}  // namespace

BENCHMARK_MAIN();
