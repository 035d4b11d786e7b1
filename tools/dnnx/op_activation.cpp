// `dnnx algos act ...` and `dnnx profile act ...`: the candidates of an activation, and their
// times. Every ActivationDesc::repro() line parses here.

#include <dnnx/ops/activation.hpp>

#include "layer_args.hpp"

namespace dnnx::cli {
namespace {

// The description of one activation, exactly as typed.
struct ActivationArgs {
  std::string input;
  std::string kind = "relu";
  std::string alpha;
  std::string ceiling;
  std::string saved = "src_and_dst";
  std::string dtype = "f32";
  std::string layout = "nchw";
};

void add_activation_options(CLI::App& command, ActivationArgs& args) {
  command.add_option("--input", args.input, "src dims, rank 1 to 5 (N x C x spatial...)")
      ->type_name("NxCxHxW")
      ->required();
  command
      .add_option("--kind", args.kind,
                  "identity | relu | clipped_relu | tanh | sigmoid | elu | swish (silu)")
      ->type_name("KIND")
      ->capture_default_str();
  command.add_option("--alpha", args.alpha, "elu's alpha (default 1)")->type_name("A");
  command.add_option("--ceiling", args.ceiling, "clipped_relu's ceiling, > 0 (default 6)")
      ->type_name("C");
  command
      .add_option("--saved", args.saved,
                  "forward tensors the backward pass gets: src_and_dst | dst (after an in-place "
                  "forward) | src")
      ->type_name("SAVED")
      ->capture_default_str();
  add_data_options(command, args.dtype, args.layout);
}

ActivationDesc parse_activation(const ActivationArgs& args) {
  ActivationDesc desc;
  desc.dims = parse_dims_of_rank("--input", args.input, 1, 5, "rank 1 to 5");
  desc.kind = parse_with("--kind", args.kind,
                         [](std::string_view value) { return parse_activation_kind(value); });
  if (!args.alpha.empty()) {
    if (desc.kind != ActivationKind::elu) {
      throw UsageError("--alpha '" + args.alpha + "': only --kind elu takes alpha (got --kind " +
                       std::string(to_string(desc.kind)) + ")");
    }
    // Infinite values parse: the desc's validation names what it accepts.
    desc.alpha = parse_number<double>("--alpha", args.alpha, Finite::any);
  }
  if (!args.ceiling.empty()) {
    if (desc.kind != ActivationKind::clipped_relu) {
      throw UsageError("--ceiling '" + args.ceiling +
                       "': only --kind clipped_relu takes a ceiling (got --kind " +
                       std::string(to_string(desc.kind)) + ")");
    }
    desc.ceiling = parse_number<double>("--ceiling", args.ceiling, Finite::any);
  }
  desc.saved = parse_with("--saved", args.saved,
                          [](std::string_view value) { return parse_activation_saved(value); });
  desc.dtype = parse_dtype_arg("--dtype", args.dtype);
  desc.layout = parse_layout_arg("--layout", args.layout);
  desc.validate();
  return desc;
}

}  // namespace

void add_activation_commands(CLI::App& algos, CLI::App& profile, Action& action) {
  add_layer_commands<ActivationArgs>(
      algos, profile, action,
      {.op = OpKind::activation,
       .algos_help =
           "candidates of an activation: id, support status or reason, workspace, determinism",
       .profile_help =
           "time every candidate of an activation, per direction, sorted by median time",
       .add_options = add_activation_options,
       .parse = layer_parser<ActivationArgs>(parse_activation, activation_list, activation_profile,
                                             activation_select)});
}

}  // namespace dnnx::cli
