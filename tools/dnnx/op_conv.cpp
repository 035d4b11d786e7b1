// `dnnx algos conv ...` and `dnnx profile conv ...`: the candidates of a convolution in each
// direction, before anything runs, and their times (the seed's "FwdAlgorithms profile results"
// table). Every ConvDesc::repro() line parses here.

#include <dnnx/ops/conv.hpp>

#include "layer_command.hpp"

namespace dnnx::cli {

void add_conv_commands(CLI::App& algos, CLI::App& profile, Action& action) {
  add_layer_commands<ConvArgs>(
      algos, profile, action,
      {.op = OpKind::conv,
       .algos_help =
           "candidates of a convolution: id, support status or reason, workspace, determinism",
       .profile_help =
           "time every candidate of a convolution, per direction, sorted by median time",
       .add_options = add_conv_options,
       .parse =
           [](const ConvArgs& args) {
             const ConvDesc desc = parse_conv(args);
             return parsed_layer(desc, desc.dtype, conv_list, conv_profile, conv_select);
           }});
}

}  // namespace dnnx::cli
