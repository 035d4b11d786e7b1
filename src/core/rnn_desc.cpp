// RnnDesc: shapes, the flat weight layout, validation, printing. Every message names the field and
// its value.
//
// Note [rnn weight layout]
// The flat weights hold, for layer l = 0 .. layers-1 and, within it, direction d = 0 (forward) and
// 1 (reverse), in that order: w_ih {G*H, in_l}, w_hh {G*H, H}, then, when bias, b_ih {G*H} and
// b_hh {G*H}, each dense and row-major, one after the other (in_0 = input_size, in_l = D*H above;
// G = gates()). That is the order of torch.nn.RNN/LSTM/GRU's _flat_weights
// (weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0, weight_ih_l0_reverse, ...), and the rows of
// each matrix are PyTorch's gate blocks (lstm i, f, g, o; gru r, z, n), so copying the parameters
// of a torch module in that order gives dnnx's weights. Backends that keep weights otherwise
// (cuDNN's weight space) convert from this layout (docs/ops/rnn.md).
//
// Note [rnn dropout]
// A training forward with dropout > 0 multiplies the input of layer l >= 1 (the output of layer
// l-1, {T, N, D*H}) by a mask: element (t, n, c) of the boundary b = l-1 has the logical index
// i = ((b * T + t) * N + n) * D*H + c and is kept when the uniform value word i % 4 of Philox block
// offset + i / 4 gives is >= dropout (dropout's rule, Note [dropout mask] in dropout_desc.cpp),
// kept values scaled by 1 / (1 - dropout) computed in f32. Positions past a sequence's end are
// drawn too (the index does not depend on the lengths). The backward multiplies by the same mask,
// kept in the SavedState.

#include <dnnx/ops/rnn.hpp>

#include "core/check.hpp"
#include "core/hash.hpp"
#include "core/strings.hpp"

#include <array>
#include <cmath>
#include <ostream>
#include <sstream>

namespace dnnx {
namespace {

using detail::cat;
using detail::shortest;

constexpr std::array<detail::EnumName<RnnCell>, 4> cell_names{{
    {RnnCell::rnn_relu, "rnn_relu", {"relu"}},
    {RnnCell::rnn_tanh, "rnn_tanh", {"tanh", "rnn"}},
    {RnnCell::lstm, "lstm", {}},
    {RnnCell::gru, "gru", {}},
}};

constexpr std::array<std::string_view, 4> weight_names{"w_ih", "w_hh", "b_ih", "b_hh"};

// Largest layer count: far beyond any network, small enough that layers * D * N * H stays a
// product of three bounded sizes (Note [size limits]).
constexpr std::int64_t max_layers = 1 << 16;

bool in_range(std::int64_t value) { return value >= 1 && value <= detail::max_dim_size; }

std::int64_t checked_product(std::initializer_list<std::int64_t> values, std::string_view what) {
  std::int64_t product = 1;
  for (const std::int64_t v : values) {
    const auto next = detail::checked_mul(product, v);
    DNNX_CHECK_ARG(next && *next <= detail::max_elements, what,
                   " has more elements than can be addressed (at most 2^60)");
    product = *next;
  }
  return product;
}

// Elements of one (layer, direction) block of the flat weights.
std::int64_t block_count(const RnnDesc& desc, std::int64_t layer) {
  const std::int64_t rows = desc.gates() * desc.hidden_size;
  return rows * (desc.layer_input_size(layer) + desc.hidden_size + (desc.bias ? 2 : 0));
}

}  // namespace

std::string_view to_string(RnnCell cell) { return detail::enum_name(cell_names, cell); }

RnnCell parse_rnn_cell(std::string_view text) {
  return detail::parse_enum(cell_names, text, "rnn cell", "rnn_relu, rnn_tanh, lstm, gru");
}

void RnnDesc::validate() const {
  DNNX_CHECK_ARG(cell == RnnCell::rnn_relu || cell == RnnCell::rnn_tanh || cell == RnnCell::lstm ||
                     cell == RnnCell::gru,
                 "cell has the invalid value ", static_cast<int>(cell));
  auto size = [](const char* field, std::int64_t value) {
    DNNX_CHECK_ARG(in_range(value), field, " must be in [1, 2^31], got ", value);
  };
  size("seq_length", seq_length);
  size("batch", batch);
  size("input_size", input_size);
  size("hidden_size", hidden_size);
  DNNX_CHECK_ARG(layers >= 1 && layers <= max_layers, "layers must be in [1, 65536], got ", layers);
  DNNX_CHECK_ARG(std::isfinite(dropout) && dropout >= 0.0f && dropout < 1.0f,
                 "dropout must be in [0, 1), got ", shortest(dropout));
  DNNX_CHECK_ARG(is_floating(dtype), "dtype must be f32, f16 or bf16, got ", to_string(dtype));
  // Note [size limits]: every tensor's count, and the weights', must fit.
  const std::int64_t d = directions();
  checked_product({seq_length, batch, input_size}, "src");
  checked_product({seq_length, batch, d, hidden_size}, "dst");
  checked_product({layers, d, batch, hidden_size}, "each state (hx, hy, cx, cy)");
  checked_product({gates(), hidden_size, d, hidden_size + input_size + 2}, "the weights");
  checked_product({layers, gates(), hidden_size, d, d * hidden_size + hidden_size + 2},
                  "the weights");
  checked_product({layers, seq_length, batch, d, hidden_size}, "the dropout masks");
}

std::int64_t RnnDesc::gates() const {
  switch (cell) {
    case RnnCell::lstm: return 4;
    case RnnCell::gru: return 3;
    case RnnCell::rnn_relu:
    case RnnCell::rnn_tanh: return 1;
  }
  return 1;
}

std::int64_t RnnDesc::layer_input_size(std::int64_t layer) const {
  return layer == 0 ? input_size : directions() * hidden_size;
}

Dims RnnDesc::src_dims() const {
  detail::validate_unless(in_range(seq_length) && in_range(batch) && in_range(input_size), *this,
                          "RnnDesc::src_dims");
  return batch_first ? Dims{batch, seq_length, input_size} : Dims{seq_length, batch, input_size};
}

Dims RnnDesc::dst_dims() const {
  detail::validate_unless(in_range(seq_length) && in_range(batch) && in_range(hidden_size), *this,
                          "RnnDesc::dst_dims");
  const std::int64_t features = directions() * hidden_size;
  return batch_first ? Dims{batch, seq_length, features} : Dims{seq_length, batch, features};
}

Dims RnnDesc::state_dims() const {
  detail::validate_unless(
      layers >= 1 && layers <= max_layers && in_range(batch) && in_range(hidden_size), *this,
      "RnnDesc::state_dims");
  return Dims{layers * directions(), batch, hidden_size};
}

std::int64_t RnnDesc::weights_count() const {
  validate();
  std::int64_t count = 0;
  for (std::int64_t layer = 0; layer < layers; ++layer)
    count += directions() * block_count(*this, layer);
  return count;
}

std::int64_t RnnDesc::weight_offset(std::int64_t layer, std::int64_t direction,
                                    RnnWeight which) const {
  validate();
  DNNX_CHECK_ARG(layer >= 0 && layer < layers, "layer must be in [0, ", layers, "), got ", layer);
  DNNX_CHECK_ARG(direction >= 0 && direction < directions(), "direction must be in [0, ",
                 directions(), "), got ", direction);
  const auto index = static_cast<std::size_t>(which);
  DNNX_CHECK_ARG(index < weight_names.size(), "weight has the invalid value ", index);
  DNNX_CHECK_ARG(bias || which == RnnWeight::w_ih || which == RnnWeight::w_hh, "weight ",
                 weight_names[index], " does not exist: the desc has bias = false");
  std::int64_t offset = 0;
  for (std::int64_t l = 0; l < layer; ++l) offset += directions() * block_count(*this, l);
  offset += direction * block_count(*this, layer);
  const std::int64_t rows = gates() * hidden_size;
  const std::int64_t w_ih = rows * layer_input_size(layer);
  const std::int64_t w_hh = rows * hidden_size;
  switch (which) {
    case RnnWeight::w_ih: return offset;
    case RnnWeight::w_hh: return offset + w_ih;
    case RnnWeight::b_ih: return offset + w_ih + w_hh;
    case RnnWeight::b_hh: return offset + w_ih + w_hh + rows;
  }
  return offset;
}

Dims RnnDesc::weight_dims(std::int64_t layer, std::int64_t direction, RnnWeight which) const {
  weight_offset(layer, direction, which);  // the checks
  const std::int64_t rows = gates() * hidden_size;
  switch (which) {
    case RnnWeight::w_ih: return Dims{rows, layer_input_size(layer)};
    case RnnWeight::w_hh: return Dims{rows, hidden_size};
    case RnnWeight::b_ih:
    case RnnWeight::b_hh: return Dims{rows};
  }
  return Dims{rows};
}

std::int64_t RnnDesc::dropout_draws() const {
  validate();
  if (dropout == 0.0f || layers == 1) return 0;
  return (layers - 1) * seq_length * batch * directions() * hidden_size;
}

std::string RnnDesc::repro(Direction direction) const {
  // An invalid desc must still print: it is the context of the error that rejects it.
  std::ostringstream out;
  out << "dnnx profile rnn --cell " << to_string(cell) << " --seq " << seq_length << " --batch "
      << batch << " --input " << input_size << " --hidden " << hidden_size << " --layers "
      << layers;
  if (bidirectional) out << " --bidirectional";
  if (!bias) out << " --no-bias";
  if (batch_first) out << " --batch-first";
  if (variable_lengths) out << " --variable-lengths";
  if (dropout != 0.0f) out << " --dropout " << shortest(dropout);
  out << " --dtype " << to_string(dtype) << " --direction "
      << op_info(OpKind::rnn).direction_name(direction);
  return out.str();
}

std::string RnnDesc::key() const {
  std::ostringstream out;
  out << "rnn " << to_string(cell) << " T=" << seq_length << " N=" << batch << " in=" << input_size
      << " H=" << hidden_size << " layers=" << layers
      << (bidirectional ? " bidirectional" : " unidirectional") << (bias ? " bias" : " no_bias")
      << (batch_first ? " batch_first" : " seq_major")
      << (variable_lengths ? " variable_lengths" : " full_lengths")
      << " dropout=" << shortest(dropout) << ' ' << to_string(dtype);
  return out.str();
}

std::size_t RnnDesc::hash() const {
  std::size_t h = 0;
  detail::hash_mix(h, static_cast<std::uint64_t>(cell));
  detail::hash_mix(h, static_cast<std::uint64_t>(seq_length));
  detail::hash_mix(h, static_cast<std::uint64_t>(batch));
  detail::hash_mix(h, static_cast<std::uint64_t>(input_size));
  detail::hash_mix(h, static_cast<std::uint64_t>(hidden_size));
  detail::hash_mix(h, static_cast<std::uint64_t>(layers));
  detail::hash_mix(h, (bidirectional ? 1u : 0u) | (bias ? 2u : 0u) | (batch_first ? 4u : 0u) |
                          (variable_lengths ? 8u : 0u));
  detail::hash_mix(h, detail::hash_bits(dropout));
  detail::hash_mix(h, static_cast<std::uint64_t>(dtype));
  return h;
}

std::ostream& operator<<(std::ostream& out, const RnnDesc& desc) { return out << desc.key(); }

Tensor rnn_weight_view(const RnnDesc& desc, const Tensor& weights, std::int64_t layer,
                       std::int64_t direction, RnnWeight which) {
  const std::int64_t count = desc.weights_count();
  DNNX_CHECK_ARG(weights.dtype() == desc.dtype && weights.dims() == Dims{count} &&
                     weights.is_dense(Layout::channels_first) && weights.data() != nullptr,
                 "weights is ", describe(weights), "; expected a dense ", to_string(desc.dtype),
                 " tensor of dims ", Dims{count});
  const std::int64_t offset = desc.weight_offset(layer, direction, which);
  auto* base = static_cast<std::byte*>(weights.data()) +
               static_cast<std::size_t>(offset) * size_of(desc.dtype);
  return Tensor::view(base, desc.weight_dims(layer, direction, which), desc.dtype,
                      Layout::channels_first, weights.device());
}

}  // namespace dnnx
