// Recurrent layers (LSTM, GRU, RNN) on any backend: per row, the inference forward and a training
// step (training forward, backward w.r.t. the data, backward w.r.t. the weights), every direction
// selected exhaustively (the backwards then run the algorithm of the state the training forward
// filled: Note [saved state]). bench/compare_rnn.py runs it next to torch.nn.LSTM / nn.GRU in the
// same run and prints the table.
//
// Rows: --rows "cell:seq:batch:hidden:layers:uni|bi,..." (input size = hidden), --dtypes
// "f16,f32". Timing as matmul_bench (bench/line_bench.hpp): the backend's timer around a loop of
// back-to-back calls, divided by the count, median of five loops after three untimed ones. Output:
// one JSON object per line.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/error.hpp>
#include <dnnx/ops/rnn.hpp>
#include <dnnx/random.hpp>
#include <dnnx/tensor.hpp>

#include "line_bench.hpp"
#include "ops/dispatch.hpp"

#include <cmath>
#include <cstdint>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace dnnx;
using bench::quoted;
using bench::split;

// A modest default over the dimensions of the GPU table (seq 25/100/500, batch 1/8/32/64/128,
// hidden 128..1024, 1-4 layers, uni- and bidirectional): 6 rows, each selected exhaustively in
// both directions (persist_dynamic compiles its kernels per candidate, the main cost of a search).
const char* default_rows =
    "lstm:25:32:256:1:uni,lstm:100:64:512:2:bi,lstm:500:8:1024:1:uni,lstm:100:1:128:4:uni,"
    "gru:25:128:512:2:bi,gru:100:32:1024:1:uni";

struct Options {
  BackendKind backend = BackendKind::automatic;
  std::string rows = default_rows;
  std::vector<std::string> dtypes{"f16", "f32"};
  int loop = 5;
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--backend") {
      options.backend = parse_backend(value());
    } else if (flag == "--rows") {
      options.rows = value();
    } else if (flag == "--dtypes") {
      options.dtypes = split(value(), ',');
    } else if (flag == "--loop") {
      options.loop = std::stoi(value());
    } else {
      throw std::invalid_argument("unknown flag " + flag +
                                  " (accepted: --backend, --rows, --dtypes, --loop)");
    }
  }
  return options;
}

RnnDesc desc_of(const std::string& row, DType dtype) {
  const std::vector<std::string> f = split(row, ':');
  if (f.size() != 6)
    throw std::invalid_argument("row '" + row + "': expected cell:seq:batch:hidden:layers:uni|bi");
  RnnDesc d;
  d.cell = parse_rnn_cell(f[0]);
  d.seq_length = std::stoll(f[1]);
  d.batch = std::stoll(f[2]);
  d.hidden_size = std::stoll(f[3]);
  d.input_size = d.hidden_size;
  d.layers = std::stoll(f[4]);
  d.bidirectional = f[5] == "bi";
  d.dtype = dtype;
  d.validate();
  return d;
}

Tensor random_on(Context& context, const Dims& dims, DType dtype, float range, unsigned seed) {
  return detail::random_tensor(context, dims, dtype, Layout::channels_first, -range, range, seed);
}

}  // namespace

int main(int argc, char** argv) try {
  const Options options = parse(argc, argv);
  Context context(options.backend);
  for (const Direction direction :
       {Direction::fwd, Direction::fwd_training, Direction::bwd_data, Direction::bwd_weights})
    context.tune().policy(OpKind::rnn, direction) = AlgoPolicy::exhaustive();
  for (const std::string& dtype_name : options.dtypes) {
    for (const std::string& row : split(options.rows, ',')) {
      const RnnDesc d = desc_of(row, parse_dtype(dtype_name));
      const bool lstm = d.cell == RnnCell::lstm;
      const float w = 1.0f / std::sqrt(static_cast<float>(d.hidden_size));
      const Tensor src = random_on(context, d.src_dims(), d.dtype, 1, 1);
      const Tensor weights = random_on(context, Dims{d.weights_count()}, d.dtype, w, 2);
      const Tensor hx = random_on(context, d.state_dims(), d.dtype, 1, 3);
      const Tensor cx = lstm ? random_on(context, d.state_dims(), d.dtype, 1, 4) : Tensor();
      const Tensor diff_dst = random_on(context, d.dst_dims(), d.dtype, 1, 5);
      Tensor dst = random_on(context, d.dst_dims(), d.dtype, 1, 6);
      Tensor hy = random_on(context, d.state_dims(), d.dtype, 1, 7);
      Tensor cy = lstm ? random_on(context, d.state_dims(), d.dtype, 1, 8) : Tensor();
      Tensor diff_src = random_on(context, d.src_dims(), d.dtype, 1, 9);
      Tensor diff_hx = random_on(context, d.state_dims(), d.dtype, 1, 10);
      Tensor diff_cx = lstm ? random_on(context, d.state_dims(), d.dtype, 1, 11) : Tensor();
      Tensor diff_weights = random_on(context, Dims{d.weights_count()}, d.dtype, 1, 12);
      RnnForward f{&src,    &weights, &hx, lstm ? &cx : nullptr,
                   nullptr, &dst,     &hy, lstm ? &cy : nullptr};
      RnnBackwardData b{&src,    &weights,  &hx,       lstm ? &cx : nullptr,
                        nullptr, &dst,      &diff_dst, nullptr,
                        nullptr, &diff_src, &diff_hx,  lstm ? &diff_cx : nullptr};
      RnnBackwardWeights g{&src,    &weights, &hx,           lstm ? &cx : nullptr,
                           nullptr, &dst,     &diff_weights, false};
      SavedState state;
      Generator generator;
      std::string fwd_id, training_id;
      const double inference_ms = bench::kernel_ms(
          context, options.loop, [&] { fwd_id = rnn_fwd(context, d, f)->algo.id; });
      const double training_ms = bench::kernel_ms(context, options.loop, [&] {
        training_id = rnn_fwd_training(context, d, generator, f, state)->algo.id;
        rnn_bwd_data(context, d, b, state);
        rnn_bwd_weights(context, d, g, state);
      });
      std::cout << "{\"row\": " << quoted(row) << ", \"dtype\": " << quoted(dtype_name)
                << ", \"cell\": " << quoted(std::string(to_string(d.cell)))
                << ", \"seq\": " << d.seq_length << ", \"batch\": " << d.batch
                << ", \"hidden\": " << d.hidden_size << ", \"layers\": " << d.layers
                << ", \"bidirectional\": " << (d.bidirectional ? "true" : "false")
                << ", \"inference_ms\": " << inference_ms << ", \"training_ms\": " << training_ms
                << ", \"fwd_algo\": " << quoted(fwd_id)
                << ", \"training_algo\": " << quoted(training_id) << "}" << std::endl;
    }
  }
  return 0;
} catch (const std::exception& error) {
  std::cerr << "rnn_bench: " << error.what() << "\n";
  return 1;
}
