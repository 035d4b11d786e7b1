// The reference tensor add: one candidate, "reference:direct". Forward and backward walk dst's
// logical index in row-major order and map it to src's (index 0 along broadcast axes); every sum
// is in f64 and rounded once to the storage dtype (Note [rounding once] in conv.cpp).

#include "backends/reference/layer_common.hpp"
#include "backends/reference/layers.hpp"
#include "core/add_args.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <cstdint>
#include <memory>
#include <vector>

namespace dnnx::reference {
namespace {


AlgoInfo info_of(const AddDesc&, Direction) {
  return direct_info("direct loop (f64)", {"reference"});
}

class DirectPlan final : public DirectPlanBase<AddDesc, detail::AddArgs> {
 public:
  DirectPlan(const AddDesc& desc, Direction direction)
      : DirectPlanBase(info_of(desc, direction), desc, direction),
        map_(collapsed_index_map(desc.dst_dims, desc.src_dims)) {}

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
