// `dnnx algos conv_fused ...` and `dnnx profile conv_fused ...`: the candidates of a forward
// convolution with a fused epilogue, and their times. Every ConvFusedDesc::repro() line parses
// here.

#include <dnnx/ops/conv_fused.hpp>

#include "layer_args.hpp"
#include "layer_command.hpp"

namespace dnnx::cli {
namespace {

// The epilogue, exactly as typed.
struct EpilogueArgs {
  bool bias = false;
  bool residual = false;
  std::string residual_scale;  // empty: 1
  std::string activation = "relu";
};

// The description of one fused convolution, exactly as typed.
struct ConvFusedArgs {
  ConvArgs conv;
  EpilogueArgs epilogue;
};

void add_epilogue_options(CLI::App& command, EpilogueArgs& args) {
  command.add_flag("--bias", args.bias, "add a bias, one value per output channel");
  command.add_flag("--residual", args.residual, "add a residual tensor of dst's dims");
  command
      .add_option("--residual-scale", args.residual_scale,
                  "scale of the residual (finite; default 1; needs --residual)")
      ->type_name("S");
  command.add_option("--activation", args.activation, "identity | relu, applied last")
      ->type_name("ACT")
      ->capture_default_str();
}

ConvFusedDesc parse_conv_fused(const ConvFusedArgs& args) {
  ConvFusedDesc desc;
  desc.conv = parse_conv(args.conv);
  desc.bias = args.epilogue.bias;
  desc.residual = args.epilogue.residual;
  if (!args.epilogue.residual_scale.empty())
    desc.residual_scale =
        parse_number<float>("--residual-scale", args.epilogue.residual_scale, Finite::only);
  desc.activation =
      parse_with("--activation", args.epilogue.activation,
                 [](std::string_view value) { return parse_fused_activation(value); });
  desc.validate();
  return desc;
}

}  // namespace

void add_conv_fused_commands(CLI::App& algos, CLI::App& profile, Action& action) {
  add_layer_commands<ConvFusedArgs>(
      algos, profile, action,
      {.op = OpKind::conv_fused,
       .algos_help = "candidates of a forward convolution with a fused bias / residual / "
                     "activation epilogue: id, support status or reason, workspace, determinism",
       .profile_help = "time every candidate of a forward convolution with a fused epilogue, "
                       "sorted by median time",
       .add_options =
           [](CLI::App& sub, ConvFusedArgs& args) {
             add_conv_options(sub, args.conv);
             add_epilogue_options(sub, args.epilogue);
           },
       .parse =
           [](const ConvFusedArgs& args) {
             const ConvFusedDesc desc = parse_conv_fused(args);
             return parsed_layer(desc, desc.conv.dtype, conv_fused_list, conv_fused_profile,
                                 conv_fused_select);
           }});
}

}  // namespace dnnx::cli
