// The reference tensor add: one candidate, "reference:direct". Forward and backward walk dst's
// logical index in row-major order and map it to src's (index 0 along broadcast axes); every sum
// is in f64 and rounded once to the storage dtype (Note [rounding once] in conv.cpp).

#include "backends/reference/layer_common.hpp"
#include "backends/reference/layers.hpp"
#include "core/add_args.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

namespace dnnx::reference {
namespace {


AlgoInfo info_of(const AddDesc&, Direction) {
  return direct_info("direct loop (f64)", {"reference"});
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

class DirectPlan final : public DirectPlanBase<AddDesc, detail::AddArgs> {
 public:
  DirectPlan(const AddDesc& desc, Direction direction)
      : DirectPlanBase(info_of(desc, direction), desc, direction), map_(src_index_map(desc)) {}

  void execute(const detail::AddArgs& args, detail::Workspace) override {
    const double alpha = desc_.alpha;
    if (direction_ == Direction::fwd) {
      const std::vector<float> src =
          host_tensor(args.src, "src", desc_.src_dims, desc_.dtype, context_).to_f32();
      Tensor& dst = host_tensor(args.dst, "dst", desc_.dst_dims, desc_.dtype, context_);
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
      store(out, dst);
      return;
    }
    const std::vector<float> diff_dst =
        host_tensor(args.diff_dst, "diff_dst", desc_.dst_dims, desc_.dtype, context_).to_f32();
    Tensor& diff_src =
        host_tensor(args.diff_src, "diff_src", desc_.src_dims, desc_.dtype, context_);
    std::vector<double> sums(static_cast<std::size_t>(desc_.src_dims.product()), 0.0);
    for (std::size_t i = 0; i < map_.size(); ++i)
      sums[static_cast<std::size_t>(map_[i])] += diff_dst[i];
    for (double& sum : sums) sum *= alpha;
    store(sums, diff_src);
  }

 private:
  std::vector<std::int64_t> map_;  // dst element -> src element
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::add>> make_add_backend(const detail::OpBackends&) {
  return DirectBackend<AddDesc, detail::AddArgs>::of<DirectPlan>(info_of);
}

}  // namespace dnnx::reference
