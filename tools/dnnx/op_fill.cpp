// `dnnx algos fill ...` and `dnnx profile fill ...`: the candidates of a seeded fill (the
// distribution's parameters and the generator are call-time values, not part of the desc), and
// their times. Every FillDesc::repro() line parses here.

#include <dnnx/ops/fill.hpp>

#include "layer_args.hpp"

namespace dnnx::cli {
namespace {

// The description of one fill, exactly as typed.
struct FillArgs {
  std::string dims;
  std::string distribution = "uniform";
  std::string dtype = "f32";
  std::string layout = "nchw";
};

void add_fill_options(CLI::App& command, FillArgs& args) {
  command.add_option("--dims", args.dims, "dims of the tensor filled, rank 1 to 5 (e.g. 64x3x7x7)")
      ->type_name("DIMS")
      ->required();
  command
      .add_option("--distribution", args.distribution, "constant | uniform | normal | trunc_normal")
      ->type_name("DIST")
      ->capture_default_str();
  add_data_options(command, args.dtype, args.layout);
}

FillDesc parse_fill(const FillArgs& args) {
  FillDesc desc;
  desc.dims = parse_dims_of_rank("--dims", args.dims, 1, 5, "rank 1 to 5");
  desc.distribution = parse_distribution(args.distribution);
  desc.dtype = parse_dtype_arg("--dtype", args.dtype);
  desc.layout = parse_layout_arg("--layout", args.layout);
  desc.validate();
  return desc;
}

}  // namespace

void add_fill_commands(CLI::App& algos, CLI::App& profile, Action& action) {
  add_layer_commands<FillArgs>(
      algos, profile, action,
      {.op = OpKind::fill,
       .algos_help = "candidates of a seeded fill (constant, uniform, normal, trunc_normal): id, "
                     "support status or reason",
       .profile_help = "time every candidate of a seeded fill, by median time",
       .add_options = add_fill_options,
       .parse = layer_parser<FillArgs>(parse_fill, fill_list, fill_profile, fill_select)});
}

}  // namespace dnnx::cli
