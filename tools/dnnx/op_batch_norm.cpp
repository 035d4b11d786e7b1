// `dnnx algos bnorm ...` and `dnnx profile bnorm ...`: the candidates of a batch normalization,
// and their times. Every BatchNormDesc::repro() line parses here.

#include <dnnx/ops/batch_norm.hpp>

#include "layer_args.hpp"

namespace dnnx::cli {
namespace {

// The description of one batch normalization, exactly as typed.
struct BatchNormArgs {
  std::string input;
  std::string mode = "spatial";
  bool training = false;
  bool inference = false;
  bool no_affine = false;
  std::string eps = "1e-05";
  std::string momentum = "0.1";
  std::string dtype = "f32";
  std::string layout = "nchw";
};

void add_batch_norm_options(CLI::App& command, BatchNormArgs& args) {
  command.add_option("--input", args.input, "src dims N x C [x spatial...] (rank 2 to 5)")
      ->type_name("NxCxHxW")
      ->required();
  command
      .add_option("--mode", args.mode,
                  "spatial (per channel over N and positions) | per_activation (per element "
                  "over N)")
      ->type_name("MODE")
      ->capture_default_str();
  auto* training = command.add_flag("--training", args.training,
                                    "batch statistics, running statistics updated (the default)");
  auto* inference = command.add_flag("--inference", args.inference,
                                     "running statistics; backward with frozen statistics");
  training->excludes(inference);
  command.add_flag("--no-affine", args.no_affine, "no scale and shift (scale 1, shift 0)");
  command.add_option("--eps", args.eps, "added to the variance, > 0")
      ->type_name("EPS")
      ->capture_default_str();
  command.add_option("--momentum", args.momentum, "running statistics update factor, in [0, 1]")
      ->type_name("M")
      ->capture_default_str();
  add_data_options(command, args.dtype, args.layout,
                   "f32 | f16 | bf16 (of the data; statistics are f32)");
}

BatchNormDesc parse_batch_norm(const BatchNormArgs& args) {
  BatchNormDesc desc;
  desc.dims =
      parse_dims_of_rank("--input", args.input, 2, 5, "rank 2 to 5 (N x C x up to 3 spatial dims)");
  desc.mode = parse_with("--mode", args.mode,
                         [](std::string_view value) { return parse_batch_norm_mode(value); });
  desc.training = !args.inference;
  desc.affine = !args.no_affine;
  desc.eps = parse_number<double>("--eps", args.eps, Finite::only);
  desc.momentum = parse_number<double>("--momentum", args.momentum, Finite::only);
  desc.dtype = parse_dtype_arg("--dtype", args.dtype);
  desc.layout = parse_layout_arg("--layout", args.layout);
  desc.validate();
  return desc;
}

}  // namespace

void add_batch_norm_commands(CLI::App& algos, CLI::App& profile, Action& action) {
  add_layer_commands<BatchNormArgs>(
      algos, profile, action,
      {.op = OpKind::batch_norm,
       .algos_help = "candidates of a batch normalization: id, support status or reason, "
                     "workspace, determinism",
       .profile_help =
           "time every candidate of a batch normalization, per direction, by median time",
       .add_options = add_batch_norm_options,
       .parse = layer_parser<BatchNormArgs>(parse_batch_norm, batch_norm_list, batch_norm_profile,
                                            batch_norm_select)});
}

}  // namespace dnnx::cli
