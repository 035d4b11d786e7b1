// `dnnx algos softmax ...` and `dnnx profile softmax ...`: the candidates of a softmax or
// log-softmax, and their times. Every SoftmaxDesc::repro() line parses here.

#include <dnnx/ops/softmax.hpp>

#include "layer_args.hpp"
#include "layer_command.hpp"

namespace dnnx::cli {
namespace {

// The description of one softmax, exactly as typed.
struct SoftmaxArgs {
  std::string input;
  std::string mode = "channel";
  bool log = false;
  std::string dtype = "f32";
  std::string layout = "nchw";
};

void add_softmax_options(CLI::App& command, SoftmaxArgs& args) {
  command
      .add_option("--input", args.input,
                  "src dims N x C [x spatial...] (rank 2 to 5), e.g. 64x1000 or 8x21x64x64")
      ->type_name("NxC[xHxW]")
      ->required();
  command
      .add_option("--mode", args.mode,
                  "channel: over C at every position (SpatialSoftMax) | instance: over C*H*W of "
                  "each sample (the same for N x C)")
      ->type_name("MODE")
      ->capture_default_str();
  command.add_flag("--log", args.log, "log-softmax instead of softmax");
  command.add_option("--dtype", args.dtype, "f32 | f16 | bf16")
      ->type_name("DTYPE")
      ->capture_default_str();
  command.add_option("--layout", args.layout, "nchw | nhwc (names used for every rank)")
      ->type_name("LAYOUT")
      ->capture_default_str();
}

SoftmaxDesc parse_softmax(const SoftmaxArgs& args) {
  SoftmaxDesc desc;
  desc.dims = parse_dims_of_rank("--input", args.input, 2, 5,
                                 "rank 2 to 5 (N x C and 0 to 3 spatial dims)");
  desc.mode = parse_with("--mode", args.mode,
                         [](std::string_view value) { return parse_softmax_mode(value); });
  desc.log = args.log;
  desc.dtype = parse_dtype_arg("--dtype", args.dtype);
  if (!is_floating(desc.dtype)) {
    throw UsageError("--dtype '" + args.dtype + "': softmax takes f32, f16 or bf16");
  }
  desc.layout = parse_layout_arg("--layout", args.layout);
  desc.validate();
  return desc;
}

}  // namespace

void add_softmax_commands(CLI::App& algos, CLI::App& profile, Action& action) {
  LayerCommand<SoftmaxArgs> command;
  command.op = OpKind::softmax;
  command.algos_help =
      "candidates of a softmax / log-softmax: id, support status or reason, workspace, "
      "determinism";
  command.profile_help = "time every candidate of a softmax / log-softmax, per direction";
  command.add_options = add_softmax_options;
  command.parse = [](const SoftmaxArgs& args) {
    const SoftmaxDesc desc = parse_softmax(args);
    return parsed_layer(desc, desc.dtype, softmax_list, softmax_profile, softmax_select);
  };
  add_layer_commands(algos, profile, action, std::move(command));
}

}  // namespace dnnx::cli
