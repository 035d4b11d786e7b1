// `dnnx algos accuracy ...` and `dnnx profile accuracy ...`: the candidates of a top-k accuracy
// count, and their times. Every AccuracyDesc::repro() line parses here.

#include <dnnx/ops/accuracy.hpp>

#include "layer_args.hpp"

#include <cstdint>
#include <limits>

namespace dnnx::cli {
namespace {

// The description of one accuracy count, exactly as typed.
struct AccuracyArgs {
  std::string input;
  std::string top_k = "1";
  std::string ignore_index = "-100";
  bool accumulate = false;
  std::string label_dtype = "i64";
  std::string count_dtype = "i64";
  std::string dtype = "f32";
  std::string layout = "nchw";
};

void add_accuracy_options(CLI::App& command, AccuracyArgs& args) {
  command
      .add_option("--input", args.input,
                  "logits dims N x C [x spatial...] (rank 2 to 5), e.g. 64x1000")
      ->type_name("NxC[xHxW]")
      ->required();
  command.add_option("--top-k", args.top_k, "a position is correct when its label ranks below k")
      ->type_name("K")
      ->capture_default_str();
  command
      .add_option("--ignore-index", args.ignore_index,
                  "label value of positions that count neither way (PyTorch's default -100)")
      ->type_name("INT")
      ->capture_default_str();
  command.add_flag("--accumulate", args.accumulate, "add into the count instead of overwriting");
  command.add_option("--label-dtype", args.label_dtype, "i32 | i64")
      ->type_name("DTYPE")
      ->capture_default_str();
  command.add_option("--count-dtype", args.count_dtype, "i64 | f32")
      ->type_name("DTYPE")
      ->capture_default_str();
  add_data_options(command, args.dtype, args.layout, "dtype of logits: f32 | f16 | bf16");
}

AccuracyDesc parse_accuracy(const AccuracyArgs& args) {
  AccuracyDesc desc;
  desc.dims = parse_dims_of_rank("--input", args.input, 2, 5,
                                 "rank 2 to 5 (N x C and 0 to 3 spatial dims)");
  desc.top_k = parse_int("--top-k", args.top_k, 1, std::numeric_limits<std::int64_t>::max());
  desc.ignore_index =
      parse_int("--ignore-index", args.ignore_index, std::numeric_limits<std::int64_t>::min(),
                std::numeric_limits<std::int64_t>::max());
  desc.accumulate = args.accumulate;
  desc.label_dtype = parse_dtype_arg("--label-dtype", args.label_dtype);
  desc.count_dtype = parse_dtype_arg("--count-dtype", args.count_dtype);
  desc.dtype = parse_dtype_arg("--dtype", args.dtype);
  desc.layout = parse_layout_arg("--layout", args.layout);
  desc.validate();
  return desc;
}

}  // namespace

void add_accuracy_commands(CLI::App& algos, CLI::App& profile, Action& action) {
  add_layer_commands<AccuracyArgs>(
      algos, profile, action,
      {.op = OpKind::accuracy,
       .algos_help = "candidates of a top-k accuracy count: id, support status or reason",
       .profile_help = "time every candidate of a top-k accuracy count, by median time",
       .add_options = add_accuracy_options,
       .parse = layer_parser<AccuracyArgs>(parse_accuracy, accuracy_list, accuracy_profile,
                                           accuracy_select)});
}

}  // namespace dnnx::cli
