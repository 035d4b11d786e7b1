// `dnnx algos pool ...` and `dnnx profile pool ...`: the candidates of a pooling, and their times.
// Every PoolDesc::repro() line parses here.

#include <dnnx/ops/pool.hpp>

#include "layer_args.hpp"

#include <array>
#include <cstdint>
#include <vector>

namespace dnnx::cli {
namespace {

// The description of one pooling, exactly as typed.
struct PoolArgs {
  std::string input;
  std::string kernel;
  std::string stride;  // empty: the kernel size (PyTorch's default)
  std::string pad;
  std::string pad_before;
  std::string pad_after;
  std::string dilation;  // empty: 1 (dense windows)
  bool ceil = false;
  std::string mode = "max";
  bool indices = false;
  std::string dtype = "f32";
  std::string layout = "nchw";
};

void add_pool_options(CLI::App& command, PoolArgs& args) {
  command
      .add_option("--input", args.input, "src dims N x C x spatial (rank 3, 4 or 5: 1-, 2-, 3-D)")
      ->type_name("NxCxHxW")
      ->required();
  command.add_option("--kernel", args.kernel, "window size: one value, or one per spatial dim")
      ->type_name("K[,K...]")
      ->required();
  command
      .add_option("--stride", args.stride,
                  "window step: one value, or one per spatial dim (default: the kernel size)")
      ->type_name("S[,S...]");
  auto* pad = command.add_option("--pad", args.pad, "symmetric implicit padding (default 0)")
                  ->type_name("P[,P...]");
  auto* before = command
                     .add_option("--pad-before", args.pad_before,
                                 "padding before each spatial dim (asymmetric; default 0)")
                     ->type_name("P[,P...]");
  auto* after = command
                    .add_option("--pad-after", args.pad_after,
                                "padding after each spatial dim (asymmetric; default 0)")
                    ->type_name("P[,P...]");
  pad->excludes(before);
  pad->excludes(after);
  command
      .add_option("--dilation", args.dilation,
                  "distance between a window's positions: one value, or one per spatial dim "
                  "(default 1; PyTorch's max_pool dilation)")
      ->type_name("D[,D...]");
  command.add_flag("--ceil", args.ceil, "round output sizes up (PyTorch's ceil_mode=True)");
  command.add_option("--mode", args.mode, "max | avg_include_pad (avg) | avg_exclude_pad")
      ->type_name("MODE")
      ->capture_default_str();
  command.add_flag("--indices", args.indices,
                   "max pooling that saves argmax indices (fwd) and reads them (bwd), as "
                   "PyTorch's max_pool*d_with_indices; scratch indices are i64");
  add_data_options(command, args.dtype, args.layout);
}

PoolDesc parse_pool(const PoolArgs& args) {
  const Dims src = parse_dims_of_rank("--input", args.input, 3, 5,
                                      "rank 3, 4 or 5 (N x C x 1 to 3 spatial dims)");
  const int spatial_dims = src.rank() - 2;
  const auto kernel = parse_spatial_list("--kernel", args.kernel, 1, spatial_dims);
  const auto stride = args.stride.empty()
                          ? std::vector<std::int64_t>{}
                          : parse_spatial_list("--stride", args.stride, 1, spatial_dims);
  const auto pad = parse_spatial_list("--pad", args.pad.empty() ? "0" : args.pad, 0, spatial_dims);
  const auto pad_before = parse_spatial_list(
      "--pad-before", args.pad_before.empty() ? "0" : args.pad_before, 0, spatial_dims);
  const auto pad_after = parse_spatial_list(
      "--pad-after", args.pad_after.empty() ? "0" : args.pad_after, 0, spatial_dims);
  const auto dilation =
      per_spatial_dim(parse_spatial_list("--dilation", args.dilation.empty() ? "1" : args.dilation,
                                         1, spatial_dims),
                      spatial_dims);
  const PoolMode mode = parse_with("--mode", args.mode,
                                   [](std::string_view value) { return parse_pool_mode(value); });
  const DType dtype = parse_dtype_arg("--dtype", args.dtype);
  const Layout layout = parse_layout_arg("--layout", args.layout);

  PoolDesc desc;
  desc.spatial_dims = spatial_dims;
  desc.batch = src[0];
  desc.channels = src[1];
  for (int i = 0; i < spatial_dims; ++i) desc.input[static_cast<std::size_t>(i)] = src[2 + i];
  desc.kernel = per_spatial_dim(kernel, spatial_dims);
  desc.stride = stride.empty() ? desc.kernel : per_spatial_dim(stride, spatial_dims);
  if (!args.pad_before.empty() || !args.pad_after.empty()) {
    desc.pad_before = per_spatial_dim(pad_before, spatial_dims);
    desc.pad_after = per_spatial_dim(pad_after, spatial_dims);
  } else {
    desc.pad_before = desc.pad_after = per_spatial_dim(pad, spatial_dims);
  }
  for (int i = 0; i < spatial_dims; ++i)  // unused entries keep PoolDesc's default, 1
    desc.dilation[static_cast<std::size_t>(i)] = dilation[static_cast<std::size_t>(i)];
  desc.ceil_mode = args.ceil;
  desc.mode = mode;
  desc.indices = args.indices;
  desc.dtype = dtype;
  desc.layout = layout;
  desc.validate();
  return desc;
}

}  // namespace

void add_pool_commands(CLI::App& algos, CLI::App& profile, Action& action) {
  add_layer_commands<PoolArgs>(
      algos, profile, action,
      {.op = OpKind::pool,
       .algos_help =
           "candidates of a pooling: id, support status or reason, workspace, determinism",
       .profile_help = "time every candidate of a pooling, per direction, sorted by median time",
       .add_options = add_pool_options,
       .parse = layer_parser<PoolArgs>(parse_pool, pool_list, pool_profile, pool_select)});
}

}  // namespace dnnx::cli
