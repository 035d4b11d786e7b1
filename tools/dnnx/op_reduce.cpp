// `dnnx algos reduce ...` and `dnnx profile reduce ...`: the candidates of a reduction, and their
// times. Every ReduceDesc::repro() line parses here.

#include <dnnx/ops/reduce.hpp>

#include "layer_args.hpp"

#include <vector>

namespace dnnx::cli {
namespace {

// The description of one reduction, exactly as typed.
struct ReduceArgs {
  std::string kind = "sum";
  std::string src;
  std::string dst;
  std::string axes;
  std::string dtype = "f32";
  std::string layout = "nchw";
};

void add_reduce_options(CLI::App& command, ReduceArgs& args) {
  command.add_option("--kind", args.kind, "sum | mean | max | min | norm1 | norm2")
      ->type_name("KIND")
      ->capture_default_str();
  command.add_option("--src", args.src, "src dims, rank 1 to 5 (e.g. 64x1000)")
      ->type_name("DIMS")
      ->required();
  command
      .add_option("--dst", args.dst,
                  "dst dims: src's with 1 on each reduced axis (e.g. 1x1); or give --axes")
      ->type_name("DIMS");
  command.add_option("--axes", args.axes, "the reduced axes, comma-separated (e.g. 0,2,3)")
      ->type_name("LIST");
  add_data_options(command, args.dtype, args.layout);
}

ReduceDesc parse_reduce(const ReduceArgs& args) {
  const ReduceKind kind = parse_with(
      "--kind", args.kind, [](std::string_view value) { return parse_reduce_kind(value); });
  const Dims src = parse_dims("--src", args.src);
  const DType dtype = parse_dtype_arg("--dtype", args.dtype);
  const Layout layout = parse_layout_arg("--layout", args.layout);
  if (args.dst.empty() == args.axes.empty())
    throw UsageError("give exactly one of --dst (the reduced dims) and --axes (the reduced axes)");
  if (!args.axes.empty()) {
    std::vector<int> axes;
    for (const std::int64_t axis : parse_int_list("--axes", args.axes, 0, src.rank() - 1))
      axes.push_back(static_cast<int>(axis));
    return ReduceDesc::over(kind, src, axes, dtype, layout);
  }
  ReduceDesc desc;
  desc.kind = kind;
  desc.src_dims = src;
  desc.dst_dims = parse_dims("--dst", args.dst);
  desc.dtype = dtype;
  desc.layout = layout;
  desc.validate();
  return desc;
}

}  // namespace

void add_reduce_commands(CLI::App& algos, CLI::App& profile, Action& action) {
  add_layer_commands<ReduceArgs>(
      algos, profile, action,
      {.op = OpKind::reduce,
       .algos_help = "candidates of a reduction (sum, mean, max, min, norm1, norm2 over axes): "
                     "id, support status or reason, workspace",
       .profile_help = "time every candidate of a reduction, per direction, by median time",
       .add_options = add_reduce_options,
       .parse =
           layer_parser<ReduceArgs>(parse_reduce, reduce_list, reduce_profile, reduce_select)});
}

}  // namespace dnnx::cli
