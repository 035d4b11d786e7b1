// `dnnx algos argmax ...` and `dnnx profile argmax ...`: the candidates of an argmax, and their
// times. Every ArgmaxDesc::repro() line parses here.

#include <dnnx/ops/argmax.hpp>

#include "layer_args.hpp"

namespace dnnx::cli {
namespace {

// The description of one argmax, exactly as typed.
struct ArgmaxArgs {
  std::string src;
  std::string axis = "1";
  std::string dtype = "f32";
  std::string index_dtype = "i64";
  std::string layout = "nchw";
};

void add_argmax_options(CLI::App& command, ArgmaxArgs& args) {
  command.add_option("--src", args.src, "src dims, rank 1 to 5 (e.g. 64x1000)")
      ->type_name("DIMS")
      ->required();
  command.add_option("--axis", args.axis, "the axis searched")
      ->type_name("AXIS")
      ->capture_default_str();
  command.add_option("--index-dtype", args.index_dtype, "dtype of the indices: i32 | i64")
      ->type_name("DTYPE")
      ->capture_default_str();
  add_data_options(command, args.dtype, args.layout);
}

ArgmaxDesc parse_argmax(const ArgmaxArgs& args) {
  ArgmaxDesc desc;
  desc.src_dims = parse_dims("--src", args.src);
  desc.axis = static_cast<int>(parse_int("--axis", args.axis, 0, Dims::max_rank - 1));
  desc.dtype = parse_dtype_arg("--dtype", args.dtype);
  desc.index_dtype = parse_dtype_arg("--index-dtype", args.index_dtype);
  desc.layout = parse_layout_arg("--layout", args.layout);
  desc.validate();
  return desc;
}

}  // namespace

void add_argmax_commands(CLI::App& algos, CLI::App& profile, Action& action) {
  add_layer_commands<ArgmaxArgs>(
      algos, profile, action,
      {.op = OpKind::argmax,
       .algos_help = "candidates of an argmax over one axis: id, support status or reason",
       .profile_help = "time every candidate of an argmax, by median time",
       .add_options = add_argmax_options,
       .parse =
           layer_parser<ArgmaxArgs>(parse_argmax, argmax_list, argmax_profile, argmax_select)});
}

}  // namespace dnnx::cli
