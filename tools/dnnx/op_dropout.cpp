// `dnnx algos dropout ...` and `dnnx profile dropout ...`: the candidates of a dropout per
// direction (fwd, fwd_training, bwd), and their times. Every DropoutDesc::repro() line parses
// here.

#include <dnnx/ops/dropout.hpp>

#include "layer_args.hpp"

namespace dnnx::cli {
namespace {

// The description of one dropout, exactly as typed.
struct DropoutArgs {
  std::string dims;
  std::string p = "0.5";
  std::string dtype = "f32";
  std::string layout = "nchw";
  bool not_reproducible = false;
};

void add_dropout_options(CLI::App& command, DropoutArgs& args) {
  command.add_option("--dims", args.dims, "dims of src, rank 1 to 5 (e.g. 64x4096)")
      ->type_name("DIMS")
      ->required();
  command.add_option("--p", args.p, "probability of dropping an element, in [0, 1]")
      ->type_name("P")
      ->capture_default_str();
  add_data_options(command, args.dtype, args.layout);
  command.add_flag("--not-reproducible", args.not_reproducible,
                   "allow masks from another RNG than dnnx's Philox stream (cuDNN's dropout)");
}

DropoutDesc parse_dropout(const DropoutArgs& args) {
  DropoutDesc desc;
  desc.dims = parse_dims_of_rank("--dims", args.dims, 1, 5, "rank 1 to 5");
  // The desc's validation judges p out of [0, 1] (and NaN) with its own message.
  desc.p = parse_number<float>("--p", args.p, Finite::any);
  desc.dtype = parse_dtype_arg("--dtype", args.dtype);
  desc.layout = parse_layout_arg("--layout", args.layout);
  desc.reproducible = !args.not_reproducible;
  desc.validate();
  return desc;
}

}  // namespace

void add_dropout_commands(CLI::App& algos, CLI::App& profile, Action& action) {
  add_layer_commands<DropoutArgs>(
      algos, profile, action,
      {.op = OpKind::dropout,
       .algos_help = "candidates of a dropout per direction (fwd, fwd_training, bwd): id, "
                     "support status or reason, saved-state format",
       .profile_help = "time every candidate of a dropout, per direction, by median time",
       .add_options = add_dropout_options,
       .parse = layer_parser<DropoutArgs>(parse_dropout, dropout_list, dropout_profile,
                                          dropout_select)});
}

}  // namespace dnnx::cli
