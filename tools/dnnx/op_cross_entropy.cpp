// `dnnx algos xent ...` and `dnnx profile xent ...`: the candidates of a cross-entropy loss, and
// their times. Every CrossEntropyDesc::repro() line parses here.

#include <dnnx/ops/cross_entropy.hpp>

#include "layer_args.hpp"
#include "layer_command.hpp"

#include <cstdint>
#include <limits>

namespace dnnx::cli {
namespace {

// The description of one cross-entropy, exactly as typed.
struct XentArgs {
  std::string input;
  std::string reduction = "mean";
  std::string ignore_index = "-100";
  bool weighted = false;
  std::string label_dtype = "i64";
  std::string dtype = "f32";
  std::string layout = "nchw";
};

void add_xent_options(CLI::App& command, XentArgs& args) {
  command
      .add_option("--input", args.input,
                  "logits dims N x C [x spatial...] (rank 2 to 5), e.g. 64x1000 or 8x21x64x64")
      ->type_name("NxC[xHxW]")
      ->required();
  command.add_option("--reduction", args.reduction, "none | mean | sum")
      ->type_name("MODE")
      ->capture_default_str();
  command
      .add_option("--ignore-index", args.ignore_index,
                  "label value of positions that contribute nothing (PyTorch's default -100)")
      ->type_name("INT")
      ->capture_default_str();
  command.add_flag("--weighted", args.weighted, "per-class f32 weights are given");
  command.add_option("--label-dtype", args.label_dtype, "i32 | i64")
      ->type_name("DTYPE")
      ->capture_default_str();
  command.add_option("--dtype", args.dtype, "dtype of logits and loss: f32 | f16 | bf16")
      ->type_name("DTYPE")
      ->capture_default_str();
  command.add_option("--layout", args.layout, "nchw | nhwc (names used for every rank)")
      ->type_name("LAYOUT")
      ->capture_default_str();
}

CrossEntropyDesc parse_xent(const XentArgs& args) {
  CrossEntropyDesc desc;
  desc.dims = parse_dims_of_rank("--input", args.input, 2, 5,
                                 "rank 2 to 5 (N x C and 0 to 3 spatial dims)");
  desc.reduction = parse_with("--reduction", args.reduction,
                              [](std::string_view value) { return parse_reduction(value); });
  desc.ignore_index =
      parse_int("--ignore-index", args.ignore_index, std::numeric_limits<std::int64_t>::min(),
                std::numeric_limits<std::int64_t>::max());
  desc.weighted = args.weighted;
  desc.label_dtype = parse_dtype_arg("--label-dtype", args.label_dtype);
  if (desc.label_dtype != DType::i32 && desc.label_dtype != DType::i64) {
    throw UsageError("--label-dtype '" + args.label_dtype +
                     "': labels are class indices; accepted: i32, i64");
  }
  desc.dtype = parse_dtype_arg("--dtype", args.dtype);
  if (!is_floating(desc.dtype)) {
    throw UsageError("--dtype '" + args.dtype + "': logits take f32, f16 or bf16");
  }
  desc.layout = parse_layout_arg("--layout", args.layout);
  desc.validate();
  return desc;
}

}  // namespace

void add_cross_entropy_commands(CLI::App& algos, CLI::App& profile, Action& action) {
  LayerCommand<XentArgs> command;
  command.op = OpKind::cross_entropy;
  command.algos_help =
      "candidates of a cross-entropy loss (log-softmax + NLL over the channels): id, support "
      "status or reason, workspace, determinism";
  command.profile_help = "time every candidate of a cross-entropy loss, per direction";
  command.add_options = add_xent_options;
  command.parse = [](const XentArgs& args) {
    const CrossEntropyDesc desc = parse_xent(args);
    return parsed_layer(desc, desc.dtype, cross_entropy_list, cross_entropy_profile,
                        cross_entropy_select);
  };
  add_layer_commands(algos, profile, action, std::move(command));
}

}  // namespace dnnx::cli
