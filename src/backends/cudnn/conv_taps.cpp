// Note [tap-region candidates]
// cuDNN computes every tap-pixel product of a convolution, padding included. Where most read
// padding (a 3x3 of dilation 36 on 65x65, DeepLabV3's ASPP, reads real input with 40% of them)
// the boxes of Note [tap regions] (src/core/tap_regions.hpp) do much less work: on an H200 the
// sum of PyTorch's own convolutions on those boxes (bench/tap_regions_study.py) took 0.49-0.57 of
// the whole fp32 convolution at dilation 36, 0.80-0.84 at 24, 0.88-0.96 at 12, in every
// direction, copies of the crops included, but in f16 beat the whole convolution only at
// dilation 36 (docs/benchmarks.md, "Tap regions"). So an fp32 convolution whose taps read real
// input with at most 80% of their products (valid_tap_fraction()) lists candidates of two
// splits, "cudnn:taps:boxes" and "cudnn:taps:rows" (the second where it differs: the first dim
// split, the others whole), which the search times like any other. Each region is a legacy
// cuDNN call (LegacyStridedConv), by default cuDNN's first ranked deterministic algorithm for
// it; the direction's nondeterministic algorithms, which that pick skips (bwd_data algo_0, the
// fastest on DeepLabV3's dilated bwd_data rows; bwd_weights algo_0 and algo_3), are variants,
// "cudnn:taps:<split>:<algorithm>", each region running it where cuDNN takes it. A variant that
// runs what an earlier one runs is not listed.
// A region runs on views of the caller's tensors where cuDNN takes them (the input crop and the
// output box described with the whole tensors' strides at an offset: the fp32 forward), else on
// packed copies of its crops in the workspace (cudnnTransformTensor), and its taps are copied
// packed unless it has them all:
//   fwd          each box of dst written by its region's convolution; dst zeroed first only
//                where some output is reached by no tap;
//   bwd_data     diff_src zeroed, then each region's input gradient added into its crop
//                (beta = 1: crops overlap);
//   bwd_weights  diff_weights zeroed, then each region's weight gradient added into its taps.
// The regions run one after the other on the backend's stream, in a fixed order: the candidate
// is deterministic when its algorithms are. The sums are those of the whole convolution less
// the products with padding, in another order; f16 and bf16 results are rounded once more per
// region that adds into an element. DNNX_CUDNN_CONV_TAPS picks where they are listed: "f32"
// (the default, as above), "sparse" (every dtype), "on" (every convolution whose output splits
// into more than one region, for measurements), "off"; where the setting alone keeps them out
// of a listing that would have them, one unsupported "cudnn:taps" entry says so. A split of
// more than 32 regions is not listed. The rows split is listed only where every output of the
// dims it keeps whole is reached by some tap: an output reading only padding is zero, which a
// Winograd or FFT algorithm computes only approximately.

#include "backends/cudnn/conv_taps.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/conv_gemm.hpp"
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
// Listed under `f32` and `sparse` where at most this share of the tap-pixel products reads real
// input.
constexpr double sparse_fraction = 0.8;
constexpr std::size_t max_regions = 32;

// One region's convolution: its legacy call on views at these element offsets of the whole
// tensors or, where cuDNN takes no view of one of them for any algorithm, on a packed copy of
// that tensor's crop in the workspace (`pack_x`: src / diff_src, `pack_y`: dst / diff_dst);
// and, where it has not every tap, the descriptors copying its taps between the whole weights
// and a packed buffer.
struct Region {
  std::unique_ptr<LegacyStridedConv> conv;
  std::int64_t x_offset = 0, y_offset = 0, weights_offset = 0;
  bool all_taps = false, pack_x = false, pack_y = false;
  ViewCopy weights_copy, x_copy, y_copy;  // where the taps, x or y are copied
};

// The workspace after the regions' own: the packed taps, the packed x crop, the packed y crop.
struct Buffers {
  std::size_t weights = 0, x = 0, y = 0;
};

class TapsPlan final : public detail::ConvPlan {
 public:
  TapsPlan(std::shared_ptr<Runtime> runtime, const ConvDesc& desc, Direction direction,
           const TapsConfig& config)
      : runtime_(std::move(runtime)),
        desc_(desc),
        direction_(direction),
        context_(conv_context(desc, direction, taps_id(config, direction))) {
    const detail::TapRegions regions = detail::tap_regions(desc, config.split);
    if (regions.regions.size() <= 1) {
      detail::raise(ErrorKind::Unsupported,
                    "the output splits into fewer than two regions of taps (Note [tap regions])",
                    context_);
    }
    if (regions.regions.size() > max_regions) {
      detail::raise(ErrorKind::Unsupported,
                    detail::cat(regions.regions.size(), " regions, more than ", max_regions),
                    context_);
    }
    uncovered_ = regions.uncovered_outputs;
    whole_ = conv_geometry(desc);
    // The regions' descriptors hold the whole tensors' strides (views, and the crops' copies).
    check_legacy_range(whole_, context_);
    const std::size_t element = size_of(desc.dtype);
    std::size_t inner = 0;
    Buffers bytes;
    std::map<std::string, int> algorithms;
    bool deterministic = true;
    for (const TapRegion& r : regions.regions) {
      const ConvDesc sub = detail::tap_region_desc(desc, r);
      const Geometry packed = conv_geometry(sub);
      Region region = make_region(sub, packed, config.algorithm);
      region.all_taps = true;
      for (int i = 0; i < desc.spatial_dims; ++i) {
        const auto s = static_cast<std::size_t>(i);
        const std::size_t at = geometry_dim(desc, i);
        region.x_offset += r.dims[s].in_begin * whole_.src_strides[at];
        region.y_offset += r.dims[s].out_begin * whole_.dst_strides[at];
        region.weights_offset += r.dims[s].tap_first * whole_.weights_strides[at];
        region.all_taps &= r.dims[s].tap_count == desc.kernel[s];
      }
      if (!region.all_taps) {
        region.weights_copy = view_copy(packed, packed.weights, whole_.weights_strides,
                                        packed.weights_strides, element, context_);
        bytes.weights = std::max(bytes.weights, region.weights_copy.bytes);
      }
      if (region.pack_x) {
        region.x_copy = view_copy(packed, packed.src, whole_.src_strides, packed.src_strides,
                                  element, context_);
        bytes.x = std::max(bytes.x, region.x_copy.bytes);
      }
      if (region.pack_y) {
        region.y_copy = view_copy(packed, packed.dst, whole_.dst_strides, packed.dst_strides,
                                  element, context_);
        bytes.y = std::max(bytes.y, region.y_copy.bytes);
      }
      inner = std::max(inner, region.conv->workspace_bytes());
      deterministic &= region.conv->deterministic();
      ++algorithms[detail::cat(region.conv->algorithm_name(),
                               region.pack_x || region.pack_y ? " on copies" : "")];
      signature_ += detail::cat(region.conv->algorithm_name(), region.pack_x, region.pack_y, ';');
      regions_.push_back(std::move(region));
    }
    inner_bytes_ = workspace_aligned(inner);
    weights_at_ = inner_bytes_;
    x_at_ = weights_at_ + workspace_aligned(bytes.weights);
    y_at_ = x_at_ + workspace_aligned(bytes.x);
    info_.id = taps_id(config, direction);
    std::vector<std::string> used;
    for (const auto& [name, count] : algorithms) used.push_back(detail::cat(name, " x", count));
    info_.name = detail::cat(
        "tap regions (", detail::to_string(config.split),
        config.algorithm ? detail::cat(", ",
                                       legacy_algorithm_names(
                                           direction)[static_cast<std::size_t>(*config.algorithm)],
                                       " where it runs")
                         : std::string(),
        "): ", regions_.size(),
        " legacy convolutions on the output boxes where one range of taps reads real input (",
        detail::join(used, ", "), ")");
    info_.supported = true;
    info_.workspace_bytes = y_at_ + workspace_aligned(bytes.y);
    info_.deterministic = deterministic;
    info_.notes = {"tap_regions", "legacy", "host_heavy"};
  }

  const AlgoInfo& algo() const override { return info_; }

  // The algorithm and copies of each region: two plans of one desc with the same signature run
  // the same calls.
  const std::string& signature() const { return signature_; }

  void execute(const detail::ConvArgs& args, detail::Workspace workspace) override {
    const BoundTensors t = bind_tensors(args, direction_, context_);
    check_workspace(workspace, info_.workspace_bytes, context_);
    runtime_->make_current();
    const cudnnHandle_t handle = runtime_->handle();
    const std::size_t element = size_of(desc_.dtype);
    auto* base = static_cast<std::byte*>(workspace.data);
    auto part = [&](std::size_t at) { return base == nullptr ? nullptr : base + at; };
    std::byte* taps_buffer = part(weights_at_);
    std::byte* x_buffer = part(x_at_);
    std::byte* y_buffer = part(y_at_);
    auto at = [&](const void* tensor, std::int64_t offset) {
      return const_cast<std::byte*>(static_cast<const std::byte*>(tensor)) +
             offset * static_cast<std::int64_t>(element);
    };
    auto zero = [&](void* tensor, const std::array<std::int64_t, 5>& dims) {
      DNNX_CUDNN_CHECK(
          cudaMemsetAsync(tensor, 0, static_cast<std::size_t>(elements_of(whole_, dims)) * element,
                          runtime_->stream()),
          context_, "zeroing the output");
    };
    // to = from + beta * to, between a crop of a whole tensor and its packed copy.
    auto transform = [&](const TensorDescriptor& from_desc, const void* from,
                         const TensorDescriptor& to_desc, void* to, float beta, const char* what) {
      transform_tensor(handle, from_desc, from, to_desc, to, beta, context_, what);
    };
    // A region's input crop: the view, or its packed copy.
    auto x_input = [&](const Region& r, const void* whole) -> const void* {
      if (!r.pack_x) return at(whole, r.x_offset);
      transform(r.x_copy.view, at(whole, r.x_offset), r.x_copy.packed, x_buffer, 0.0f,
                "copying a crop");
      return x_buffer;
    };
    auto y_input = [&](const Region& r, const void* whole) -> const void* {
      if (!r.pack_y) return at(whole, r.y_offset);
      transform(r.y_copy.view, at(whole, r.y_offset), r.y_copy.packed, y_buffer, 0.0f,
                "copying a crop");
      return y_buffer;
    };
    auto taps = [&](const Region& r, const void* weights) -> const void* {
      if (r.all_taps) return weights;
      transform(r.weights_copy.view, at(weights, r.weights_offset), r.weights_copy.packed,
                taps_buffer, 0.0f, "copying a region's taps");
      return taps_buffer;
    };
    switch (direction_) {
      case Direction::fwd:
        if (uncovered_) zero(t.output, whole_.dst);
        for (const Region& r : regions_) {
          void* out = r.pack_y ? y_buffer : at(t.output, r.y_offset);
          r.conv->run(handle, x_input(r, t.first), taps(r, t.second), out, 0.0f, base,
                      inner_bytes_);
          if (r.pack_y)
            transform(r.y_copy.packed, y_buffer, r.y_copy.view, at(t.output, r.y_offset), 0.0f,
                      "writing a region's output box");
        }
        break;
      case Direction::bwd_data:
        zero(t.output, whole_.src);
        for (const Region& r : regions_) {
          const void* diff_dst = y_input(r, t.first);
          const void* weights = taps(r, t.second);
          if (!r.pack_x) {
            r.conv->run(handle, diff_dst, weights, at(t.output, r.x_offset), 1.0f, base,
                        inner_bytes_);
            continue;
          }
          r.conv->run(handle, diff_dst, weights, x_buffer, 0.0f, base, inner_bytes_);
          transform(r.x_copy.packed, x_buffer, r.x_copy.view, at(t.output, r.x_offset), 1.0f,
                    "adding a region's input gradient into its crop");
        }
        break;
      case Direction::bwd_weights:
        zero(t.output, whole_.weights);
        for (const Region& r : regions_) {
          const void* src = x_input(r, t.first);
          const void* diff_dst = y_input(r, t.second);
          if (r.all_taps) {
            r.conv->run(handle, src, diff_dst, t.output, 1.0f, base, inner_bytes_);
            continue;
          }
          r.conv->run(handle, src, diff_dst, taps_buffer, 0.0f, base, inner_bytes_);
          transform(r.weights_copy.packed, taps_buffer, r.weights_copy.view,
                    at(t.output, r.weights_offset), 1.0f,
                    "adding a region's weight gradient into its taps");
        }
        break;
      case Direction::fwd_training: break;  // not a convolution direction
    }
  }

 private:
  // The region's legacy call: `algorithm` where cuDNN runs it, else cuDNN's ranked choice; on
  // views of both tensors where cuDNN takes them, else with one or both crops packed.
  Region make_region(const ConvDesc& sub, const Geometry& packed, std::optional<int> algorithm) {
    std::string refusal;
    for (const std::optional<int> choice :
         algorithm ? std::vector<std::optional<int>>{algorithm, std::nullopt}
                   : std::vector<std::optional<int>>{std::nullopt}) {
      ViewedLegacyConv viewed =
          legacy_conv_on_views(*runtime_, sub, packed, whole_.src_strides, whole_.dst_strides,
                               direction_, context_, choice);
      if (viewed.conv) {
        Region region;
        region.conv = std::move(viewed.conv);
        region.pack_x = viewed.pack_x;
        region.pack_y = viewed.pack_y;
        return region;
      }
      refusal = std::move(viewed.refusal);
    }
    detail::raise(ErrorKind::Unsupported,
                  detail::cat("a region (", sub, ") has no legacy algorithm: ", refusal), context_);
  }

  std::shared_ptr<Runtime> runtime_;
  ConvDesc desc_;
  Direction direction_;
  ErrorContext context_;
  Geometry whole_;
  bool uncovered_ = false;
  std::vector<Region> regions_;
  std::size_t inner_bytes_ = 0, weights_at_ = 0, x_at_ = 0, y_at_ = 0;
  std::string signature_;
  AlgoInfo info_;
};

}  // namespace

std::string taps_id(const TapsConfig& config, Direction direction) {
  std::string id = detail::cat(taps_prefix, detail::to_string(config.split));
  if (config.algorithm) {
    id += detail::cat(
        ':', legacy_algorithm_names(direction)[static_cast<std::size_t>(*config.algorithm)]);
  }
  return id;
}

bool is_taps_id(std::string_view id) {
  return id == taps_off_id || id.substr(0, taps_prefix.size()) == taps_prefix;
}

bool has_sparse_taps(const ConvDesc& desc) {
  return detail::tap_regions(desc, TapSplit::boxes).regions.size() > 1 &&
         detail::valid_tap_fraction(desc) <= sparse_fraction;
}

namespace {

// The splits desc lists candidates of under `setting`, or none with `why`.
std::vector<TapSplit> tap_splits(const ConvDesc& desc, TapCandidates setting, std::string& why) {
  if (setting == TapCandidates::off) {
    why = detail::cat("off (", taps_variable, "=off); ", taps_variable,
                      "=f32 (the default) lists them for fp32 convolutions where at most ",
                      sparse_fraction * 100,
                      "% of the tap-pixel products read real input (Note [tap-region "
                      "candidates])");
    return {};
  }
  const std::size_t boxes = detail::tap_regions(desc, TapSplit::boxes).regions.size();
  if (boxes <= 1) {
    why = "the output splits into fewer than two regions of taps";
    return {};
  }
  if (setting == TapCandidates::f32 && desc.dtype != DType::f32) {
    why = detail::cat("listed for fp32 convolutions only (", taps_variable, "=f32, the default); ",
                      taps_variable,
                      "=sparse lists them for every dtype (Note [tap-region "
                      "candidates])");
    return {};
  }
  const double fraction = detail::valid_tap_fraction(desc);
  if (setting != TapCandidates::on && fraction > sparse_fraction) {
    why = detail::cat(fraction * 100, "% of the tap-pixel products read real input, more than ",
                      sparse_fraction * 100, "% (", taps_variable, "=on lists them anyway)");
    return {};
  }
  std::vector<TapSplit> splits;
  if (boxes <= max_regions) splits.push_back(TapSplit::boxes);
  // Rows keep the other dims whole, padding included: only where each of them has a tap for
  // every output, so that an output reading only padding is never computed (Note [tap regions]:
  // it is zero, which a Winograd or FFT transform gives only approximately).
  const std::size_t rows = detail::tap_regions(desc, TapSplit::rows).regions.size();
  bool kept_dims_covered = true;
  for (int dim = 1; dim < desc.spatial_dims; ++dim) {
    std::int64_t covered = 0;
    for (const detail::TapSegment& s : detail::tap_segments(desc, dim))
      covered += s.out_end - s.out_begin;
    kept_dims_covered &= covered == desc.output_size(dim);
  }
  if (rows > 1 && rows != boxes && rows <= max_regions && kept_dims_covered)
    splits.push_back(TapSplit::rows);
  if (splits.empty()) why = detail::cat(boxes, " regions, more than ", max_regions);
  return splits;
}

}  // namespace

std::vector<TapsEntry> taps_entries(const std::shared_ptr<Runtime>& runtime, const ConvDesc& desc,
                                    Direction direction) {
  const TapCandidates setting = runtime->settings().conv_taps;
  std::string why;
  const std::vector<TapSplit> splits = tap_splits(desc, setting, why);
  if (splits.empty()) {
    // The entry saying why, where the setting alone keeps them out.
    const bool by_setting = setting == TapCandidates::off ||
                            (setting == TapCandidates::f32 && desc.dtype != DType::f32);
    if (!by_setting || !has_sparse_taps(desc)) return {};
    TapsEntry off;
    off.info = taps_off_info(std::move(why));
    return {off};
  }
  std::vector<TapsEntry> entries;
  std::vector<std::optional<int>> algorithms{std::nullopt};
  for (int a : legacy_nondeterministic_algorithms(direction)) algorithms.emplace_back(a);
  for (TapSplit split : splits) {
    std::vector<std::string> signatures;  // of the split's entries so far
    for (const std::optional<int> a : algorithms) {
      TapsEntry entry;
      entry.config = TapsConfig{split, a};
      try {
        auto plan = std::make_shared<TapsPlan>(runtime, desc, direction, *entry.config);
        // A variant that runs what an earlier entry runs (its algorithm nowhere accepted) adds
        // nothing to time.
        if (std::find(signatures.begin(), signatures.end(), plan->signature()) != signatures.end())
          continue;
        signatures.push_back(plan->signature());
        entry.info = plan->algo();
        entry.plan = std::move(plan);
      } catch (const Error& error) {
        if (a) continue;  // a variant whose algorithm cuDNN takes for no region
        entry.info = taps_off_info(error.message());
        entry.info.id = taps_id(*entry.config, direction);
      }
      entries.push_back(std::move(entry));
    }
  }
  return entries;
}

AlgoInfo taps_off_info(std::string reason) {
  return off_entry(taps_off_id,
                   "tap regions: smaller legacy convolutions where one range of taps reads real "
                   "input",
                   std::move(reason), "tap_regions");
}

std::shared_ptr<detail::ConvPlan> make_taps_plan(std::shared_ptr<Runtime> runtime,
                                                 const ConvDesc& desc, Direction direction,
                                                 const TapsConfig& config) {
  return std::make_shared<TapsPlan>(std::move(runtime), desc, direction, config);
}

}  // namespace dnnx::cudnn
