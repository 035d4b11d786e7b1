// The reference tensor add: one candidate, "reference:direct". Forward and backward walk dst's
// logical index in row-major order and map it to src's (index 0 along broadcast axes); every sum
// is in f64 and rounded once to the storage dtype (Note [rounding once] in conv.cpp).

#include "backends/reference/layers.hpp"
#include "core/add_args.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

namespace dnnx::reference {
namespace {

constexpr const char* direct_id = "reference:direct";

ErrorContext context_of(const AddDesc& desc, Direction direction, std::string id = {}) {
  ErrorContext context;
  context.op = detail::cat("add ", to_string(direction));
  context.repro = desc.repro(direction);
  context.backend = "reference";
  context.implementation = std::move(id);
  return context;
}

AlgoInfo direct_info() {
  AlgoInfo info;
  info.id = direct_id;
  info.name = "direct loop (f64)";
  info.supported = true;
  info.deterministic = true;
  info.notes = {"reference"};
  info.families = {"none"};
  return info;
}

// f64 -> f32 rounded to odd (Note [rounding once] in conv.cpp).
float round_to_odd(double value) {
  const auto nearest = static_cast<float>(value);
  if (static_cast<double>(nearest) == value || std::isnan(value)) return nearest;
  float truncated = nearest;
  if (std::abs(static_cast<double>(nearest)) > std::abs(value))
    truncated = std::nextafter(nearest, 0.0f);
  return std::bit_cast<float>(std::bit_cast<std::uint32_t>(truncated) | 1u);
}

void store(Tensor& tensor, const std::vector<double>& values) {
  std::vector<float> narrowed(values.size());
  const bool f32 = tensor.dtype() == DType::f32;
  for (std::size_t i = 0; i < values.size(); ++i)
    narrowed[i] = f32 ? static_cast<float>(values[i]) : round_to_odd(values[i]);
  tensor.copy_from_f32(narrowed);
}

// For every dst element in logical row-major order, the row-major index of the src element
// broadcast onto it.
std::vector<std::int64_t> src_index_map(const AddDesc& desc) {
  const int rank = desc.dst_dims.rank();
  std::array<std::int64_t, Dims::max_rank> src_strides{};  // row-major, 0 along broadcast axes
  std::int64_t stride = 1;
  for (int i = rank - 1; i >= 0; --i) {
    src_strides[static_cast<std::size_t>(i)] = desc.src_dims[i] == 1 ? 0 : stride;
    stride *= desc.src_dims[i];
  }
  std::vector<std::int64_t> map(static_cast<std::size_t>(desc.dst_dims.product()));
  std::array<std::int64_t, Dims::max_rank> index{};
  std::int64_t offset = 0;
  for (std::int64_t& entry : map) {
    entry = offset;
    for (int d = rank - 1; d >= 0; --d) {  // odometer step
      const auto k = static_cast<std::size_t>(d);
      offset += src_strides[k];
      if (++index[k] < desc.dst_dims[d]) break;
      offset -= src_strides[k] * desc.dst_dims[d];
      index[k] = 0;
    }
  }
  return map;
}

template <typename T>
T& need(T* tensor, const char* role, const ErrorContext& context) {
  if (tensor == nullptr || tensor->is_null())
    detail::raise(ErrorKind::InvalidArgument, detail::cat(role, " is null"), context);
  return *tensor;
}

class DirectPlan final : public detail::OpPlan<detail::AddArgs> {
 public:
  DirectPlan(const AddDesc& desc, Direction direction)
      : desc_(desc),
        direction_(direction),
        info_(direct_info()),
        context_(context_of(desc, direction, direct_id)),
        map_(src_index_map(desc)) {}

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::AddArgs& args, detail::Workspace) override {
    const double alpha = desc_.alpha;
    if (direction_ == Direction::fwd) {
      const std::vector<float> src = need(args.src, "src", context_).to_f32();
      Tensor& dst = need(args.dst, "dst", context_);
      std::vector<double> out(map_.size());
      if (desc_.beta == 0) {
        // dst is not read: whatever it holds (NaN included) does not matter.
        for (std::size_t i = 0; i < out.size(); ++i)
          out[i] = alpha * src[static_cast<std::size_t>(map_[i])];
      } else {
        const std::vector<float> old = dst.to_f32();
        const double beta = desc_.beta;
        for (std::size_t i = 0; i < out.size(); ++i)
          out[i] = alpha * src[static_cast<std::size_t>(map_[i])] + beta * old[i];
      }
      store(dst, out);
      return;
    }
    const std::vector<float> diff_dst = need(args.diff_dst, "diff_dst", context_).to_f32();
    Tensor& diff_src = need(args.diff_src, "diff_src", context_);
    std::vector<double> sums(static_cast<std::size_t>(desc_.src_dims.product()), 0.0);
    for (std::size_t i = 0; i < map_.size(); ++i)
      sums[static_cast<std::size_t>(map_[i])] += diff_dst[i];
    for (double& sum : sums) sum *= alpha;
    store(diff_src, sums);
  }

 private:
  AddDesc desc_;
  Direction direction_;
  AlgoInfo info_;
  ErrorContext context_;
  std::vector<std::int64_t> map_;  // dst element -> src element
};

class ReferenceAdd final : public detail::AddBackend {
 public:
  std::vector<AlgoInfo> list(const AddDesc& desc, Direction) override {
    desc.validate();
    return {direct_info()};
  }

  std::shared_ptr<detail::OpPlan<detail::AddArgs>> plan(const AddDesc& desc, Direction direction,
                                                        const std::string& id) override {
    desc.validate();
    if (id != direct_id) {
      detail::raise(ErrorKind::InvalidArgument,
                    detail::cat("algorithm id '", id,
                                "' is not a reference candidate; valid ids: ", direct_id),
                    context_of(desc, direction, id));
    }
    return plans_.get_or_build(desc, direction, id,
                               [&] { return std::make_shared<DirectPlan>(desc, direction); });
  }

 private:
  detail::PlanCache<AddDesc, detail::AddArgs> plans_;
};

}  // namespace

std::unique_ptr<detail::AddBackend> make_add_backend() { return std::make_unique<ReferenceAdd>(); }

}  // namespace dnnx::reference
