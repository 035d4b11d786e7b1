// Note [tap-region candidates]
// cuDNN computes every tap-pixel product of a convolution, padding included. Where most read
// padding (a 3x3 of dilation 36 on 65x65, DeepLabV3's ASPP, reads real input with 40% of them)
// the boxes of Note [tap regions] (src/core/tap_regions.hpp) do much less work: on an H200 the
// sum of PyTorch's own convolutions on those boxes (bench/tap_regions_study.py) took 0.49-0.57 of
// the whole fp32 convolution at dilation 36, 0.80-0.84 at 24, 0.88-0.96 at 12, in every
// direction, copies of the crops included (docs/benchmarks.md, "Tap regions"). So a convolution
// whose taps read real input with at most 80% of their products (valid_tap_fraction()) lists
// two candidates, "cudnn:taps:boxes" and "cudnn:taps:rows" (the second where it differs: the
// first dim split, the others whole), which the search times like any other. Each region is a
// legacy cuDNN call (LegacyStridedConv: cuDNN's first ranked deterministic algorithm for it)
// on views of the caller's tensors: the input crop and the output box are described with the
// whole tensors' strides at an offset, so nothing but the kernel's taps is copied:
//   fwd          each box of dst written by its region's convolution, its taps copied packed
//                into the workspace (cudnnTransformTensor) unless it has them all; dst zeroed
//                first only where some output is reached by no tap;
//   bwd_data     diff_src zeroed, then each region's input gradient added into its crop
//                (beta = 1: crops overlap);
//   bwd_weights  diff_weights zeroed, then each region's weight gradient computed into the
//                workspace and added into its taps (into diff_weights itself, beta = 1, where it
//                has them all).
// The regions run one after the other on the backend's stream, in a fixed order, with
// deterministic algorithms: the candidate is deterministic. The sums are those of the whole
// convolution less the products with padding, in another order; f16 and bf16 results are
// rounded once per region that adds into an element (at most 2^dims regions per weight tap,
// and per input element as many as its crops overlap). DNNX_CUDNN_CONV_TAPS=off lists one
// unsupported "cudnn:taps" entry instead, =on lists them for every convolution whose output
// splits into more than one region (for measurements). A listing with more than 32 regions
// lists no such split.

#include "backends/cudnn/conv_taps.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/conv_legacy.hpp"
#include "core/check.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <cstddef>
#include <map>
#include <utility>

namespace dnnx::cudnn {
namespace {

using detail::TapRegion;
using detail::TapSplit;

constexpr std::string_view taps_prefix = "cudnn:taps:";
// Listed under `sparse` where at most this share of the tap-pixel products reads real input.
constexpr double sparse_fraction = 0.8;
constexpr std::size_t max_regions = 32;
constexpr std::size_t buffer_alignment = 256;

std::size_t aligned(std::size_t bytes) {
  return (bytes + buffer_alignment - 1) / buffer_alignment * buffer_alignment;
}

// The geometry's index of desc's spatial dim i (a 1-D convolution is lifted to 2-D with its
// dim second: Note [cuDNN geometry]).
std::size_t geometry_dim(const ConvDesc& desc, int i) {
  return static_cast<std::size_t>(2 + (desc.spatial_dims == 1 ? 1 : i));
}

std::int64_t elements(const Geometry& g, const std::array<std::int64_t, 5>& dims) {
  std::int64_t product = 1;
  for (int i = 0; i < g.nb_dims; ++i) product *= dims[static_cast<std::size_t>(i)];
  return product;
}

// One region's convolution: its legacy call on views at these element offsets of the whole
// tensors, and, where it has not every tap, the descriptors copying its taps between the
// whole weights and a packed buffer.
struct Region {
  std::unique_ptr<LegacyStridedConv> conv;
  std::int64_t src_offset = 0, dst_offset = 0, weights_offset = 0;
  bool all_taps = false;
  TensorDescriptor weights_crop, weights_packed;
  std::size_t weights_bytes = 0;
};

class TapsPlan final : public detail::ConvPlan {
 public:
  TapsPlan(std::shared_ptr<Runtime> runtime, const ConvDesc& desc, Direction direction,
           TapSplit split)
      : runtime_(std::move(runtime)),
        desc_(desc),
        direction_(direction),
        context_(conv_context(desc, direction, taps_id(split))) {
    const detail::TapRegions regions = detail::tap_regions(desc, split);
    if (regions.regions.size() <= 1) {
      detail::raise(ErrorKind::Unsupported,
                    detail::cat("the output is one region of taps (Note [tap regions])"), context_);
    }
    if (regions.regions.size() > max_regions) {
      detail::raise(ErrorKind::Unsupported,
                    detail::cat(regions.regions.size(), " regions, more than ", max_regions),
                    context_);
    }
    uncovered_ = regions.uncovered_outputs;
    whole_ = conv_geometry(desc);
    const std::size_t element = size_of(desc.dtype);
    std::size_t inner = 0, buffer = 0;
    std::map<std::string, int> algorithms;
    for (const TapRegion& r : regions.regions) {
      const ConvDesc sub = detail::tap_region_desc(desc, r);
      Geometry g = conv_geometry(sub);
      g.src_strides = whole_.src_strides;  // views of the whole tensors
      g.dst_strides = whole_.dst_strides;
      Region region;
      region.conv = std::make_unique<LegacyStridedConv>(*runtime_, sub, g, direction, context_);
      region.all_taps = true;
      for (int i = 0; i < desc.spatial_dims; ++i) {
        const auto s = static_cast<std::size_t>(i);
        const std::size_t at = geometry_dim(desc, i);
        region.src_offset += r.dims[s].in_begin * whole_.src_strides[at];
        region.dst_offset += r.dims[s].out_begin * whole_.dst_strides[at];
        region.weights_offset += r.dims[s].tap_first * whole_.weights_strides[at];
        region.all_taps &= r.dims[s].tap_count == desc.kernel[s];
      }
      if (!region.all_taps) {
        region.weights_crop = make_tensor_descriptor(context_);
        region.weights_packed = make_tensor_descriptor(context_);
        set_tensor_descriptor(region.weights_crop, g, g.weights, whole_.weights_strides, context_,
                              "describing a region's taps in the weights");
        set_tensor_descriptor(region.weights_packed, g, g.weights, g.weights_strides, context_,
                              "describing a region's packed taps");
        region.weights_bytes = static_cast<std::size_t>(elements(g, g.weights)) * element;
        buffer = std::max(buffer, region.weights_bytes);
      }
      inner = std::max(inner, region.conv->workspace_bytes());
      ++algorithms[region.conv->algorithm_name()];
      regions_.push_back(std::move(region));
    }
    inner_bytes_ = aligned(inner);
    info_.id = taps_id(split);
    std::vector<std::string> used;
    for (const auto& [name, count] : algorithms) used.push_back(detail::cat(name, " x", count));
    info_.name = detail::cat("tap regions (", detail::to_string(split), "): ", regions_.size(),
                             " legacy convolutions on the output boxes where one range of taps "
                             "reads real input (",
                             detail::join(used, ", "), ")");
    info_.supported = true;
    info_.workspace_bytes = inner_bytes_ + aligned(buffer);
    info_.deterministic = true;
    info_.notes = {"tap_regions", "legacy", "host_heavy"};
  }

  const AlgoInfo& algo() const override { return info_; }

  void execute(const detail::ConvArgs& args, detail::Workspace workspace) override {
    const BoundTensors t = bind_tensors(args, direction_, context_);
    check_workspace(workspace, info_.workspace_bytes, context_);
    runtime_->make_current();
    const cudnnHandle_t handle = runtime_->handle();
    const std::size_t element = size_of(desc_.dtype);
    auto* base = static_cast<std::byte*>(workspace.data);
    std::byte* buffer = base == nullptr ? nullptr : base + inner_bytes_;
    auto at = [&](const void* tensor, std::int64_t offset) {
      return static_cast<const std::byte*>(tensor) + offset * static_cast<std::int64_t>(element);
    };
    auto zero = [&](void* tensor, const std::array<std::int64_t, 5>& dims) {
      DNNX_CUDNN_CHECK(
          cudaMemsetAsync(tensor, 0, static_cast<std::size_t>(elements(whole_, dims)) * element,
                          runtime_->stream()),
          context_, "zeroing the output");
    };
    const float one = 1.0f, zero_beta = 0.0f;
    switch (direction_) {
      case Direction::fwd:
        if (uncovered_) zero(t.output, whole_.dst);
        for (const Region& r : regions_) {
          const void* taps = at(t.second, r.weights_offset);
          if (!r.all_taps) {
            DNNX_CUDNN_CHECK(cudnnTransformTensor(handle, &one, r.weights_crop.get(), taps,
                                                  &zero_beta, r.weights_packed.get(), buffer),
                             context_, "copying a region's taps");
            taps = buffer;
          }
          r.conv->run(handle, at(t.first, r.src_offset), taps,
                      const_cast<std::byte*>(at(t.output, r.dst_offset)), 0.0f, base, inner_bytes_);
        }
        break;
      case Direction::bwd_data:
        zero(t.output, whole_.src);
        for (const Region& r : regions_) {
          const void* taps = at(t.second, r.weights_offset);
          if (!r.all_taps) {
            DNNX_CUDNN_CHECK(cudnnTransformTensor(handle, &one, r.weights_crop.get(), taps,
                                                  &zero_beta, r.weights_packed.get(), buffer),
                             context_, "copying a region's taps");
            taps = buffer;
          }
          r.conv->run(handle, at(t.first, r.dst_offset), taps,
                      const_cast<std::byte*>(at(t.output, r.src_offset)), 1.0f, base, inner_bytes_);
        }
        break;
      case Direction::bwd_weights:
        zero(t.output, whole_.weights);
        for (const Region& r : regions_) {
          const void* src = at(t.first, r.src_offset);
          const void* diff_dst = at(t.second, r.dst_offset);
          if (r.all_taps) {
            r.conv->run(handle, src, diff_dst, t.output, 1.0f, base, inner_bytes_);
            continue;
          }
          r.conv->run(handle, src, diff_dst, buffer, 0.0f, base, inner_bytes_);
          DNNX_CUDNN_CHECK(
              cudnnTransformTensor(handle, &one, r.weights_packed.get(), buffer, &one,
                                   r.weights_crop.get(),
                                   const_cast<std::byte*>(at(t.output, r.weights_offset))),
              context_, "adding a region's weight gradient into its taps");
        }
        break;
      case Direction::fwd_training: break;  // not a convolution direction
    }
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  ConvDesc desc_;
  Direction direction_;
  ErrorContext context_;
  Geometry whole_;
  bool uncovered_ = false;
  std::vector<Region> regions_;
  std::size_t inner_bytes_ = 0;
  AlgoInfo info_;
};

}  // namespace

std::string taps_id(TapSplit split) { return detail::cat(taps_prefix, detail::to_string(split)); }

std::optional<TapSplit> taps_split_of(std::string_view id) {
  for (TapSplit split : {TapSplit::boxes, TapSplit::rows}) {
    if (id == taps_id(split)) return split;
  }
  return std::nullopt;
}

bool has_sparse_taps(const ConvDesc& desc) {
  return detail::tap_regions(desc, TapSplit::boxes).regions.size() > 1 &&
         detail::valid_tap_fraction(desc) <= sparse_fraction;
}

std::vector<TapSplit> tap_splits(const ConvDesc& desc, TapCandidates setting, std::string& why) {
  if (setting == TapCandidates::off) {
    why = detail::cat("off (", taps_variable, "=off); ", taps_variable,
                      "=sparse lists them where at most ", sparse_fraction * 100,
                      "% of the tap-pixel products read real input (Note [tap-region "
                      "candidates])");
    return {};
  }
  const std::size_t boxes = detail::tap_regions(desc, TapSplit::boxes).regions.size();
  if (boxes <= 1) {
    why = "the output is one region of taps";
    return {};
  }
  const double fraction = detail::valid_tap_fraction(desc);
  if (setting == TapCandidates::sparse && fraction > sparse_fraction) {
    why = detail::cat(fraction * 100, "% of the tap-pixel products read real input, more than ",
                      sparse_fraction * 100, "% (", taps_variable, "=on lists them anyway)");
    return {};
  }
  std::vector<TapSplit> splits;
  if (boxes <= max_regions) splits.push_back(TapSplit::boxes);
  const std::size_t rows = detail::tap_regions(desc, TapSplit::rows).regions.size();
  if (rows > 1 && rows != boxes && rows <= max_regions) splits.push_back(TapSplit::rows);
  if (splits.empty()) why = detail::cat(boxes, " regions, more than ", max_regions);
  return splits;
}

AlgoInfo taps_off_info(std::string reason) {
  AlgoInfo info;
  info.id = std::string(taps_off_id);
  info.name = "tap regions: smaller legacy convolutions where one range of taps reads real input";
  info.reason = std::move(reason);
  info.notes = {"tap_regions"};
  return info;
}

std::shared_ptr<detail::ConvPlan> make_taps_plan(std::shared_ptr<Runtime> runtime,
                                                 const ConvDesc& desc, Direction direction,
                                                 TapSplit split) {
  return std::make_shared<TapsPlan>(std::move(runtime), desc, direction, split);
}

}  // namespace dnnx::cudnn
