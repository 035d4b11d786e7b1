// `dnnx algos rnn ...` and `dnnx profile rnn ...`: the candidates of a recurrent layer per
// direction (fwd, fwd_training, bwd_data, bwd_weights), and their times. Every RnnDesc::repro()
// line parses here.

#include <dnnx/ops/rnn.hpp>

#include "layer_args.hpp"

#include <cstdint>
#include <limits>
#include <string>

namespace dnnx::cli {
namespace {

// The description of one recurrent layer, exactly as typed.
struct RnnArgs {
  std::string cell = "lstm";
  std::string seq;
  std::string batch;
  std::string input;
  std::string hidden;
  std::string layers = "1";
  bool bidirectional = false;
  bool no_bias = false;
  bool batch_first = false;
  bool variable_lengths = false;
  std::string dropout = "0";
  std::string dtype = "f32";
};

void add_rnn_options(CLI::App& command, RnnArgs& args) {
  command.add_option("--cell", args.cell, "rnn_relu | rnn_tanh | lstm | gru")
      ->type_name("CELL")
      ->capture_default_str();
  command.add_option("--seq", args.seq, "sequence length T (the padded length)")
      ->type_name("T")
      ->required();
  command.add_option("--batch", args.batch, "sequences N")->type_name("N")->required();
  command.add_option("--input", args.input, "features of the input")->type_name("C")->required();
  command.add_option("--hidden", args.hidden, "hidden size H")->type_name("H")->required();
  command.add_option("--layers", args.layers, "stacked layers")
      ->type_name("L")
      ->capture_default_str();
  command.add_flag("--bidirectional", args.bidirectional, "a reverse direction per layer");
  command.add_flag("--no-bias", args.no_bias, "no b_ih / b_hh");
  command.add_flag("--batch-first", args.batch_first, "src and dst are N x T x C");
  command.add_flag("--variable-lengths", args.variable_lengths,
                   "per-sequence lengths (timing uses lengths from T down to about T / 2)");
  command.add_option("--dropout", args.dropout, "dropout between layers (training), in [0, 1)")
      ->type_name("P")
      ->capture_default_str();
  command.add_option("--dtype", args.dtype, "f32 | f16 | bf16")
      ->type_name("DTYPE")
      ->capture_default_str();
}

RnnDesc parse_rnn(const RnnArgs& args) {
  constexpr std::int64_t max = std::numeric_limits<std::int64_t>::max();
  RnnDesc desc;
  desc.cell = parse_rnn_cell(args.cell);
  desc.seq_length = parse_int("--seq", args.seq, 1, max);
  desc.batch = parse_int("--batch", args.batch, 1, max);
  desc.input_size = parse_int("--input", args.input, 1, max);
  desc.hidden_size = parse_int("--hidden", args.hidden, 1, max);
  desc.layers = parse_int("--layers", args.layers, 1, max);
  desc.bidirectional = args.bidirectional;
  desc.bias = !args.no_bias;
  desc.batch_first = args.batch_first;
  desc.variable_lengths = args.variable_lengths;
  // The desc's validation judges a dropout out of [0, 1) (and NaN) with its own message.
  desc.dropout = parse_number<float>("--dropout", args.dropout, Finite::any);
  desc.dtype = parse_dtype_arg("--dtype", args.dtype);
  desc.validate();
  return desc;
}

}  // namespace

void add_rnn_commands(CLI::App& algos, CLI::App& profile, Action& action) {
  add_layer_commands<RnnArgs>(
      algos, profile, action,
      {.op = OpKind::rnn,
       .algos_help = "candidates of a recurrent layer (RNN, LSTM, GRU) per direction (fwd, "
                     "fwd_training, bwd_data, bwd_weights): id, support status or reason, "
                     "workspace, saved-state format",
       .profile_help = "time every candidate of a recurrent layer, per direction, by median time",
       .add_options = add_rnn_options,
       .parse = layer_parser<RnnArgs>(parse_rnn, rnn_list, rnn_profile, rnn_select)});
}

}  // namespace dnnx::cli
