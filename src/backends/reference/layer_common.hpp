#pragma once
// What the reference backend's layer ops (pool.cpp, activation.cpp, add.cpp, batch_norm.cpp,
// conv_fused.cpp) share: the one candidate "reference:direct" and its backend class, the error
// context of a layer op, the checks of what reaches a plan, and storing f64 results rounded once.

#include <dnnx/algo.hpp>
#include <dnnx/error.hpp>
#include <dnnx/tensor.hpp>

#include "core/layer_backend.hpp"
#include "core/op_backend.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dnnx::reference {

/// The id of every reference layer op's one candidate.
inline constexpr const char* direct_id = "reference:direct";

/// The record of a reference:direct candidate: supported, deterministic, no workspace, naive
/// (detail::mark_naive), with `name` and `notes`.
AlgoInfo direct_info(std::string name, std::vector<std::string> notes);

/// `tensor`, checked for what the loops read: present, of `dims` and `dtype`, in host memory (any
/// strides: the loops read through Tensor::to_f32 and copy_from_f32). Callers below the op layer
/// (tests, tools) are kept from reading out of bounds; the op layer checks more. Throws
/// InvalidArgument "<role> is missing (null); expected a <dtype> tensor of dims <dims>" or "<role>
/// is <tensor>; expected <dtype>[<dims>] in host memory".
const Tensor& host_tensor(const Tensor* tensor, const char* role, const Dims& dims, DType dtype,
                          const ErrorContext& context);
/// host_tensor for an output.
Tensor& host_tensor(Tensor* tensor, const char* role, const Dims& dims, DType dtype,
                    const ErrorContext& context);

/// The check of the ops whose messages name the device, worded differently from host_tensor:
/// throws InvalidArgument "<role> is missing (null); expected a <dtype> tensor of dims <dims>" or
/// "<role> is <tensor> on <device>; expected <dtype>[<dims>] on cpu" unless `tensor` is present,
/// of `dims` and `dtype`, on the cpu.
void check_cpu_tensor(const Tensor* tensor, const char* role, const Dims& dims, DType dtype,
                      const ErrorContext& context);

/// Writes f64 values, in logical (row-major) order, into `tensor`, each rounded once to its dtype
/// (through detail::round_to_odd for f16/bf16).
void store(const std::vector<double>& values, Tensor& tensor);

/// For every element of a tensor of `dims` in logical row-major order, the row-major index of the
/// element of a tensor of `collapsed` (dims' rank, each entry dims' or 1) that it broadcasts from
/// or reduces into: add's src (collapsed) on its dst, a reduction's dst (collapsed) of its src.
std::vector<std::int64_t> collapsed_index_map(const Dims& dims, const Dims& collapsed);

/// The elements of an i32 or i64 tensor of any strides in logical (row-major) order, read exactly.
std::vector<std::int64_t> read_indices(const Tensor& tensor);
/// Writes `values` (logical order) into an i32 or i64 tensor of any strides; each value must fit.
void write_indices(const std::vector<std::int64_t>& values, Tensor& tensor);

/// What every reference plan keeps: its record and error context (detail::LayerPlanBase, the
/// context naming the op, direction and reference:direct), its desc and its direction.
template <typename Desc, typename Args>
class DirectPlanBase : public detail::LayerPlanBase<Args> {
 protected:
  DirectPlanBase(AlgoInfo info, const Desc& desc, Direction direction)
      : detail::LayerPlanBase<Args>(
            std::move(info),
            detail::op_context(BackendKind::reference, desc, direction, direct_id)),
        desc_(desc),
        direction_(direction) {}

  Desc desc_;
  Direction direction_;
};

/// The only candidate of a reference layer op.
struct DirectCandidate {
  AlgoInfo info;
};

/// A reference op's backend: the one candidate reference:direct, whose record for (desc,
/// direction) is `info` (unsupported where the loops cannot run it) and whose plans `make_plan`
/// builds; listing, id checks and the plan cache are ListedOpBackend's. `Interface` is the op's
/// backend interface when it is more than OpBackend<Desc, Args> (convolution's ConvBackend, whose
/// bias calls a subclass gives).
template <typename Desc, typename Args, typename Interface = detail::OpBackend<Desc, Args>>
class DirectBackend : public detail::ListedOpBackend<Desc, Args, DirectCandidate, Interface> {
 public:
  using Info = std::function<AlgoInfo(const Desc&, Direction)>;
  using MakePlan = std::function<std::shared_ptr<detail::OpPlan<Args>>(const Desc&, Direction)>;

  DirectBackend(Info info, MakePlan make_plan)
      : detail::ListedOpBackend<Desc, Args, DirectCandidate, Interface>(BackendKind::reference),
        info_(std::move(info)),
        make_plan_(std::move(make_plan)) {}

  /// The backend whose plans are Plan(desc, direction).
  template <typename Plan>
  static std::unique_ptr<DirectBackend> of(Info info) {
    return std::make_unique<DirectBackend>(std::move(info), [](const Desc& desc, Direction direction) {
      return std::make_shared<Plan>(desc, direction);
    });
  }

 protected:
  std::vector<DirectCandidate> enumerate(const Desc& desc, Direction direction) override {
    DirectCandidate candidate{info_(desc, direction)};
    candidate.info.priority = 0;
    return {std::move(candidate)};
  }
  std::shared_ptr<detail::OpPlan<Args>> build(const Desc& desc, Direction direction,
                                              const DirectCandidate&) override {
    return make_plan_(desc, direction);
  }

 private:
  Info info_;
  MakePlan make_plan_;
};

}  // namespace dnnx::reference
