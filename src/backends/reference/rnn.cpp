// The reference recurrent layer: one candidate, "reference:direct", plain loops in f64 over the
// layers, directions, sequences and steps, with the gate formulas of include/dnnx/ops/rnn.hpp. The
// forward keeps every step's gates; the backward w.r.t. the data runs the forward again (from the
// same inputs and the dropout masks of the state) and back-propagates through time; the backward
// w.r.t. the weights does the same from the gradients the backward w.r.t. the data left in the
// state (Note [rnn reference state] in core/rnn_args.hpp).

#include "backends/reference/layer_common.hpp"
#include "backends/reference/layers.hpp"
#include "core/philox.hpp"
#include "core/rnn_args.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace dnnx::reference {
namespace {

using detail::RnnArgs;
using detail::RnnReferenceLayout;

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

AlgoInfo info_of(const RnnDesc& desc, Direction direction) {
  AlgoInfo info = direct_info("direct loops, f64 (back-propagation through time)", {"reference"});
  info.saved_state_format = detail::rnn_reference_format;
  if (direction == Direction::fwd_training)
    info.saved_state_bytes = RnnReferenceLayout(desc).bytes;
  else if (direction == Direction::fwd)
    info.saved_state_format.clear();
  return info;
}

// The values of a tensor in logical order as f64 (an absent optional tensor: zeros).
std::vector<double> values_of(const Tensor* tensor, std::int64_t count) {
  std::vector<double> out(static_cast<std::size_t>(count), 0.0);
  if (tensor == nullptr) return out;
  const std::vector<float> values = tensor->to_f32();
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = values[i];
  return out;
}

// One layer and direction's weights, as f64 views into the flat copy.
struct Block {
  const double* w_ih = nullptr;  // {G*H, in}
  const double* w_hh = nullptr;  // {G*H, H}
  const double* b_ih = nullptr;  // {G*H} or null
  const double* b_hh = nullptr;
  std::int64_t in = 0;
};

// Everything a forward computed that its backward needs.
struct Trace {
  // Per layer: its input {T, N, in_l} (after dropout) and output {T, N, D*H} (seq-major).
  std::vector<std::vector<double>> inputs, outputs;
  // Per (layer, direction), {T, N, ...} seq-major: the gates after their activations (G*H), the
  // hidden state before the step (H), the cell state before and after (lstm), and the GRU's
  // W_hn h + b_hn (H).
  std::vector<std::vector<double>> gates, h_prev, c_prev, c_next, rec_n;
  std::vector<double> hy, cy;  // {layers * D, N, H}
};

class Rnn {
 public:
  Rnn(const RnnDesc& desc, const RnnArgs& args)
      : d_(desc),
        T_(desc.seq_length),
        N_(desc.batch),
        H_(desc.hidden_size),
        D_(desc.directions()),
        G_(desc.gates()),
        lengths_(detail::sequence_lengths(desc, args)),
        weights_(values_of(args.weights, desc.weights_count())) {}

  // Index of (t, n, c) of a {T, N, C} or {N, T, C} tensor of C features (src, dst).
  std::size_t io_index(std::int64_t t, std::int64_t n, std::int64_t c, std::int64_t C) const {
    const std::int64_t row = d_.batch_first ? n * T_ + t : t * N_ + n;
    return static_cast<std::size_t>(row * C + c);
  }
  std::size_t seq_index(std::int64_t t, std::int64_t n, std::int64_t c, std::int64_t C) const {
    return static_cast<std::size_t>((t * N_ + n) * C + c);
  }
  std::size_t state_index(std::int64_t ld, std::int64_t n, std::int64_t j) const {
    return static_cast<std::size_t>((ld * N_ + n) * H_ + j);
  }
  std::int64_t length(std::int64_t n) const { return lengths_[static_cast<std::size_t>(n)]; }

  Block block(std::int64_t layer, std::int64_t direction) const {
    Block b;
    b.in = d_.layer_input_size(layer);
    auto at = [&](RnnWeight which) {
      return weights_.data() + d_.weight_offset(layer, direction, which);
    };
    b.w_ih = at(RnnWeight::w_ih);
    b.w_hh = at(RnnWeight::w_hh);
    if (d_.bias) b.b_ih = at(RnnWeight::b_ih), b.b_hh = at(RnnWeight::b_hh);
    return b;
  }

  // Whether element (boundary, t, n, c) of the dropout masks is kept (Note [rnn dropout]).
  static bool kept(const std::uint32_t* masks, std::int64_t i) {
    return ((masks[i / 32] >> (i % 32)) & 1u) != 0;
  }

  // The forward over every layer. `masks` (null without dropout or in inference) are the bits of
  // Note [rnn dropout].
  Trace forward(const RnnArgs& args, const std::uint32_t* masks) const {
    Trace tr;
    const std::int64_t DH = D_ * H_;
    const std::vector<double> src = values_of(args.src, d_.src_dims().product());
    const std::vector<double> hx = values_of(args.hx, d_.state_dims().product());
    const std::vector<double> cx = values_of(args.cx, d_.state_dims().product());
    tr.hy.assign(hx.size(), 0.0);
    tr.cy.assign(hx.size(), 0.0);
    const float scale = 1.0f / (1.0f - d_.dropout);
    for (std::int64_t layer = 0; layer < d_.layers; ++layer) {
      const std::int64_t in = d_.layer_input_size(layer);
      std::vector<double> x(static_cast<std::size_t>(T_ * N_ * in), 0.0);
      if (layer == 0) {
        for (std::int64_t t = 0; t < T_; ++t)
          for (std::int64_t n = 0; n < N_; ++n)
            for (std::int64_t c = 0; c < in; ++c)
              x[seq_index(t, n, c, in)] = src[io_index(t, n, c, in)];
      } else {
        x = tr.outputs.back();
        if (masks != nullptr) {
          const std::int64_t base = (layer - 1) * T_ * N_ * DH;
          for (std::int64_t i = 0; i < T_ * N_ * DH; ++i) {
            x[static_cast<std::size_t>(i)] *= kept(masks, base + i) ? double{scale} : 0.0;
          }
        }
      }
      std::vector<double> y(static_cast<std::size_t>(T_ * N_ * DH), 0.0);
      for (std::int64_t dir = 0; dir < D_; ++dir) {
        const Block b = block(layer, dir);
        const std::int64_t ld = layer * D_ + dir;
        std::vector<double> gates(static_cast<std::size_t>(T_ * N_ * G_ * H_), 0.0);
        std::vector<double> h_prev(static_cast<std::size_t>(T_ * N_ * H_), 0.0);
        std::vector<double> c_prev(h_prev.size(), 0.0), c_next(h_prev.size(), 0.0);
        std::vector<double> rec_n(h_prev.size(), 0.0);
        std::vector<double> pre(static_cast<std::size_t>(G_ * H_)), rec(pre.size());
        for (std::int64_t n = 0; n < N_; ++n) {
          std::vector<double> h(static_cast<std::size_t>(H_)), c(h.size());
          for (std::int64_t j = 0; j < H_; ++j) {
            h[static_cast<std::size_t>(j)] = hx[state_index(ld, n, j)];
            c[static_cast<std::size_t>(j)] = cx[state_index(ld, n, j)];
          }
          const std::int64_t len = length(n);
          for (std::int64_t step = 0; step < len; ++step) {
            const std::int64_t t = dir == 0 ? step : len - 1 - step;
            for (std::int64_t g = 0; g < G_ * H_; ++g) {
              double a = b.b_ih != nullptr ? b.b_ih[g] : 0.0;
              double r = b.b_hh != nullptr ? b.b_hh[g] : 0.0;
              for (std::int64_t k = 0; k < in; ++k)
                a += b.w_ih[g * in + k] * x[seq_index(t, n, k, in)];
              for (std::int64_t k = 0; k < H_; ++k)
                r += b.w_hh[g * H_ + k] * h[static_cast<std::size_t>(k)];
              pre[static_cast<std::size_t>(g)] = a;
              rec[static_cast<std::size_t>(g)] = r;
            }
            for (std::int64_t j = 0; j < H_; ++j) {
              const auto J = static_cast<std::size_t>(j);
              h_prev[seq_index(t, n, j, H_)] = h[J];
              c_prev[seq_index(t, n, j, H_)] = c[J];
              auto gate = [&](std::int64_t g) -> double& {
                return gates[seq_index(t, n, g * H_ + j, G_ * H_)];
              };
              auto sum = [&](std::int64_t g) {
                const auto k = static_cast<std::size_t>(g * H_ + j);
                return pre[k] + rec[k];
              };
              switch (d_.cell) {
                case RnnCell::rnn_relu: h[J] = gate(0) = std::max(0.0, sum(0)); break;
                case RnnCell::rnn_tanh: h[J] = gate(0) = std::tanh(sum(0)); break;
                case RnnCell::lstm: {
                  const double i = gate(0) = sigmoid(sum(0));
                  const double f = gate(1) = sigmoid(sum(1));
                  const double g = gate(2) = std::tanh(sum(2));
                  const double o = gate(3) = sigmoid(sum(3));
                  c[J] = f * c[J] + i * g;
                  c_next[seq_index(t, n, j, H_)] = c[J];
                  h[J] = o * std::tanh(c[J]);
                  break;
                }
                case RnnCell::gru: {
                  const double r = gate(0) = sigmoid(sum(0));
                  const double z = gate(1) = sigmoid(sum(1));
                  const double hn = rec[static_cast<std::size_t>(2 * H_ + j)];
                  rec_n[seq_index(t, n, j, H_)] = hn;
                  const double nn = gate(2) =
                      std::tanh(pre[static_cast<std::size_t>(2 * H_ + j)] + r * hn);
                  h[J] = (1.0 - z) * nn + z * h[J];
                  break;
                }
              }
            }
            for (std::int64_t j = 0; j < H_; ++j)
              y[seq_index(t, n, dir * H_ + j, DH)] = h[static_cast<std::size_t>(j)];
          }
          for (std::int64_t j = 0; j < H_; ++j) {
            tr.hy[state_index(ld, n, j)] = h[static_cast<std::size_t>(j)];
            tr.cy[state_index(ld, n, j)] = c[static_cast<std::size_t>(j)];
          }
        }
        tr.gates.push_back(std::move(gates));
        tr.h_prev.push_back(std::move(h_prev));
        tr.c_prev.push_back(std::move(c_prev));
        tr.c_next.push_back(std::move(c_next));
        tr.rec_n.push_back(std::move(rec_n));
      }
      tr.inputs.push_back(std::move(x));
      tr.outputs.push_back(std::move(y));
    }
    return tr;
  }

  struct Gradients {
    std::vector<double> diff_src, diff_hx, diff_cx, diff_weights;
  };

  // Back-propagation through time from the gradients of dst ({T, N, D*H} in the io layout), hy
  // and cy.
  Gradients backward(const Trace& tr, const std::uint32_t* masks,
                     const std::vector<double>& diff_dst, const std::vector<double>& diff_hy,
                     const std::vector<double>& diff_cy) const {
    Gradients out;
    const std::int64_t DH = D_ * H_;
    out.diff_hx.assign(diff_hy.size(), 0.0);
    out.diff_cx.assign(diff_hy.size(), 0.0);
    out.diff_weights.assign(weights_.size(), 0.0);
    const float scale = 1.0f / (1.0f - d_.dropout);
    // The gradient w.r.t. the current layer's output, seq-major; past a sequence's end ignored.
    std::vector<double> dy(static_cast<std::size_t>(T_ * N_ * DH), 0.0);
    for (std::int64_t t = 0; t < T_; ++t)
      for (std::int64_t n = 0; n < N_; ++n)
        for (std::int64_t c = 0; c < DH; ++c)
          if (t < length(n)) dy[seq_index(t, n, c, DH)] = diff_dst[io_index(t, n, c, DH)];
    std::vector<double> dx;
    for (std::int64_t layer = d_.layers - 1; layer >= 0; --layer) {
      const std::int64_t in = d_.layer_input_size(layer);
      const std::vector<double>& x = tr.inputs[static_cast<std::size_t>(layer)];
      dx.assign(static_cast<std::size_t>(T_ * N_ * in), 0.0);
      for (std::int64_t dir = 0; dir < D_; ++dir) {
        const Block b = block(layer, dir);
        const std::int64_t ld = layer * D_ + dir;
        const auto trace = static_cast<std::size_t>(ld);
        const std::vector<double>& gates = tr.gates[trace];
        double* dw_ih = out.diff_weights.data() + d_.weight_offset(layer, dir, RnnWeight::w_ih);
        double* dw_hh = out.diff_weights.data() + d_.weight_offset(layer, dir, RnnWeight::w_hh);
        double* db_ih =
            d_.bias ? out.diff_weights.data() + d_.weight_offset(layer, dir, RnnWeight::b_ih)
                    : nullptr;
        double* db_hh =
            d_.bias ? out.diff_weights.data() + d_.weight_offset(layer, dir, RnnWeight::b_hh)
                    : nullptr;
        std::vector<double> dpre(static_cast<std::size_t>(G_ * H_)), drec(dpre.size());
        for (std::int64_t n = 0; n < N_; ++n) {
          std::vector<double> dh(static_cast<std::size_t>(H_)), dc(dh.size());
          for (std::int64_t j = 0; j < H_; ++j) {
            dh[static_cast<std::size_t>(j)] = diff_hy[state_index(ld, n, j)];
            dc[static_cast<std::size_t>(j)] =
                d_.cell == RnnCell::lstm ? diff_cy[state_index(ld, n, j)] : 0.0;
          }
          const std::int64_t len = length(n);
          for (std::int64_t step = len - 1; step >= 0; --step) {
            const std::int64_t t = dir == 0 ? step : len - 1 - step;
            std::vector<double> dh_next(static_cast<std::size_t>(H_), 0.0);
            for (std::int64_t j = 0; j < H_; ++j) {
              const auto J = static_cast<std::size_t>(j);
              const double dht = dh[J] + dy[seq_index(t, n, dir * H_ + j, DH)];
              auto gate = [&](std::int64_t g) {
                return gates[seq_index(t, n, g * H_ + j, G_ * H_)];
              };
              auto put = [&](std::int64_t g, double p, double r) {
                dpre[static_cast<std::size_t>(g * H_ + j)] = p;
                drec[static_cast<std::size_t>(g * H_ + j)] = r;
              };
              switch (d_.cell) {
                case RnnCell::rnn_relu: {
                  const double da = gate(0) > 0.0 ? dht : 0.0;
                  put(0, da, da);
                  break;
                }
                case RnnCell::rnn_tanh: {
                  const double h = gate(0);
                  const double da = dht * (1.0 - h * h);
                  put(0, da, da);
                  break;
                }
                case RnnCell::lstm: {
                  const double i = gate(0), f = gate(1), g = gate(2), o = gate(3);
                  const double c_new = tr.c_next[trace][seq_index(t, n, j, H_)];
                  const double tc = std::tanh(c_new);
                  const double dct = dc[J] + dht * o * (1.0 - tc * tc);
                  const double di = dct * g * i * (1.0 - i);
                  const double df = dct * tr.c_prev[trace][seq_index(t, n, j, H_)] * f * (1.0 - f);
                  const double dg = dct * i * (1.0 - g * g);
                  const double dout = dht * tc * o * (1.0 - o);
                  put(0, di, di), put(1, df, df), put(2, dg, dg), put(3, dout, dout);
                  dc[J] = dct * f;
                  break;
                }
                case RnnCell::gru: {
                  const double r = gate(0), z = gate(1), nn = gate(2);
                  const double h = tr.h_prev[trace][seq_index(t, n, j, H_)];
                  const double dn = dht * (1.0 - z) * (1.0 - nn * nn);
                  const double dz = dht * (h - nn) * z * (1.0 - z);
                  const double dr = dn * tr.rec_n[trace][seq_index(t, n, j, H_)] * r * (1.0 - r);
                  put(0, dr, dr), put(1, dz, dz), put(2, dn, dn * r);
                  dh_next[J] += dht * z;
                  break;
                }
              }
            }
            for (std::int64_t g = 0; g < G_ * H_; ++g) {
              const double p = dpre[static_cast<std::size_t>(g)];
              const double r = drec[static_cast<std::size_t>(g)];
              for (std::int64_t k = 0; k < in; ++k) {
                dw_ih[g * in + k] += p * x[seq_index(t, n, k, in)];
                dx[seq_index(t, n, k, in)] += b.w_ih[g * in + k] * p;
              }
              for (std::int64_t k = 0; k < H_; ++k) {
                dw_hh[g * H_ + k] += r * tr.h_prev[trace][seq_index(t, n, k, H_)];
                dh_next[static_cast<std::size_t>(k)] += b.w_hh[g * H_ + k] * r;
              }
              if (db_ih != nullptr) db_ih[g] += p, db_hh[g] += r;
            }
            dh = dh_next;
          }
          for (std::int64_t j = 0; j < H_; ++j) {
            out.diff_hx[state_index(ld, n, j)] = dh[static_cast<std::size_t>(j)];
            out.diff_cx[state_index(ld, n, j)] = dc[static_cast<std::size_t>(j)];
          }
        }
      }
      if (layer > 0) {
        dy = dx;
        if (masks != nullptr) {
          const std::int64_t base = (layer - 1) * T_ * N_ * DH;
          for (std::int64_t i = 0; i < T_ * N_ * DH; ++i)
            dy[static_cast<std::size_t>(i)] *= kept(masks, base + i) ? double{scale} : 0.0;
        }
      }
    }
    const std::int64_t in = d_.input_size;
    out.diff_src.assign(dx.size(), 0.0);
    for (std::int64_t t = 0; t < T_; ++t)
      for (std::int64_t n = 0; n < N_; ++n)
        for (std::int64_t c = 0; c < in; ++c)
          out.diff_src[io_index(t, n, c, in)] = dx[seq_index(t, n, c, in)];
    return out;
  }

  // dst in the io layout from the last layer's seq-major output.
  std::vector<double> dst_of(const Trace& tr) const {
    const std::int64_t DH = D_ * H_;
    std::vector<double> out(tr.outputs.back().size(), 0.0);
    for (std::int64_t t = 0; t < T_; ++t)
      for (std::int64_t n = 0; n < N_; ++n)
        for (std::int64_t c = 0; c < DH; ++c)
          out[io_index(t, n, c, DH)] = tr.outputs.back()[seq_index(t, n, c, DH)];
    return out;
  }

 private:
  const RnnDesc& d_;
  std::int64_t T_, N_, H_, D_, G_;
  std::vector<std::int32_t> lengths_;
  std::vector<double> weights_;
};

class DirectPlan final : public DirectPlanBase<RnnDesc, RnnArgs> {
 public:
  DirectPlan(const RnnDesc& desc, Direction direction)
      : DirectPlanBase(info_of(desc, direction), desc, direction) {}

  void execute(const RnnArgs& args, detail::Workspace) override {
    check_inputs(args);
    const Rnn rnn(desc_, args);
    const RnnReferenceLayout layout(desc_);
    auto* state = direction_ == Direction::fwd ? nullptr : state_bytes(args);
    auto* masks = state != nullptr && desc_.dropout_draws() > 0
                      ? reinterpret_cast<std::uint32_t*>(state + layout.masks)
                      : nullptr;
    switch (direction_) {
      case Direction::fwd:
      case Direction::fwd_training: {
        if (direction_ == Direction::fwd_training) {
          std::memset(state, 0, layout.bytes);
          draw_masks(args, masks);
        }
        const Trace tr = rnn.forward(args, masks);
        write(rnn.dst_of(tr), args.dst, "dst", desc_.dst_dims());
        write(tr.hy, args.hy, "hy", desc_.state_dims());
        write(tr.cy, args.cy, "cy", desc_.state_dims());
        return;
      }
      case Direction::bwd_data: {
        const Trace tr = rnn.forward(args, masks);
        const std::vector<double> diff_dst = values_of(args.diff_dst, desc_.dst_dims().product());
        const std::vector<double> diff_hy = values_of(args.diff_hy, desc_.state_dims().product());
        const std::vector<double> diff_cy = values_of(args.diff_cy, desc_.state_dims().product());
        const Rnn::Gradients g = rnn.backward(tr, masks, diff_dst, diff_hy, diff_cy);
        write(g.diff_src, args.diff_src, "diff_src", desc_.src_dims());
        write(g.diff_hx, args.diff_hx, "diff_hx", desc_.state_dims());
        write(g.diff_cx, args.diff_cx, "diff_cx", desc_.state_dims());
        // Note [rnn reference state]: what the backward w.r.t. the weights reads.
        std::memcpy(state + layout.diff_dst, diff_dst.data(), diff_dst.size() * 8);
        std::memcpy(state + layout.diff_hy, diff_hy.data(), diff_hy.size() * 8);
        if (desc_.cell == RnnCell::lstm)
          std::memcpy(state + layout.diff_cy, diff_cy.data(), diff_cy.size() * 8);
        const std::uint64_t flag = 1;
        std::memcpy(state, &flag, 8);
        return;
      }
      case Direction::bwd_weights: {
        std::uint64_t flag = 0;
        std::memcpy(&flag, state, 8);
        if (flag != 1) {
          detail::raise(ErrorKind::InvalidArgument,
                        "the SavedState holds no gradients of a backward w.r.t. the data: call "
                        "rnn_bwd_data on it before rnn_bwd_weights",
                        context_);
        }
        const auto read = [&](std::size_t offset, std::int64_t count) {
          std::vector<double> v(static_cast<std::size_t>(count));
          std::memcpy(v.data(), state + offset, v.size() * 8);
          return v;
        };
        const std::int64_t states = desc_.state_dims().product();
        const Trace tr = rnn.forward(args, masks);
        const Rnn::Gradients g = rnn.backward(
            tr, masks, read(layout.diff_dst, desc_.dst_dims().product()),
            read(layout.diff_hy, states),
            desc_.cell == RnnCell::lstm ? read(layout.diff_cy, states)
                                        : std::vector<double>(static_cast<std::size_t>(states)));
        std::vector<double> dw = g.diff_weights;
        if (args.accumulate) {
          const std::vector<double> old = values_of(args.diff_weights, desc_.weights_count());
          for (std::size_t i = 0; i < dw.size(); ++i) dw[i] += old[i];
        }
        write(dw, args.diff_weights, "diff_weights", Dims{desc_.weights_count()});
        return;
      }
    }
  }

 private:
  // What the loops read, checked for callers below the op layer.
  void check_inputs(const RnnArgs& args) const {
    host_tensor(args.src, "src", desc_.src_dims(), desc_.dtype, context_);
    host_tensor(args.weights, "weights", Dims{desc_.weights_count()}, desc_.dtype, context_);
    if (args.hx != nullptr) host_tensor(args.hx, "hx", desc_.state_dims(), desc_.dtype, context_);
    if (args.cx != nullptr) host_tensor(args.cx, "cx", desc_.state_dims(), desc_.dtype, context_);
    if (desc_.variable_lengths) {
      check_cpu_tensor(args.lengths, "lengths", Dims{desc_.batch}, DType::i32, context_);
      for (const std::int32_t length : detail::sequence_lengths(desc_, args)) {
        if (length < 1 || length > desc_.seq_length)
          detail::raise(ErrorKind::InvalidArgument,
                        detail::cat("lengths holds ", length, "; each must be in [1, ",
                                    desc_.seq_length, "]"),
                        context_);
      }
    }
    if (direction_ == Direction::bwd_data) {
      host_tensor(args.diff_dst, "diff_dst", desc_.dst_dims(), desc_.dtype, context_);
      if (args.diff_hy != nullptr)
        host_tensor(args.diff_hy, "diff_hy", desc_.state_dims(), desc_.dtype, context_);
      if (args.diff_cy != nullptr)
        host_tensor(args.diff_cy, "diff_cy", desc_.state_dims(), desc_.dtype, context_);
    }
  }

  unsigned char* state_bytes(const RnnArgs& args) const {
    const std::size_t bytes = RnnReferenceLayout(desc_).bytes;
    const SavedState* state = args.state;
    std::string problem;
    if (state == nullptr) {
      problem = "the call has no SavedState";
    } else if (state->format() != detail::rnn_reference_format) {
      problem = detail::cat("the SavedState holds format '", state->format(), "' (from '",
                            state->producer(), "'), not '", detail::rnn_reference_format, "'");
    } else if (state->bytes() < bytes || state->data() == nullptr ||
               state->device() != Device::cpu()) {
      problem =
          detail::cat("the SavedState holds ", state->bytes(), " bytes on ",
                      to_string(state->device()), "; this candidate needs ", bytes, " on cpu");
    }
    if (!problem.empty()) detail::raise(ErrorKind::InvalidArgument, problem, context_);
    return static_cast<unsigned char*>(state->data());
  }

  // Note [rnn dropout]: the masks of every layer boundary.
  void draw_masks(const RnnArgs& args, std::uint32_t* masks) const {
    const std::int64_t count = desc_.dropout_draws();
    detail::random::Words words{};
    for (std::int64_t i = 0; i < count; ++i) {
      if (i % 4 == 0)
        words =
            detail::random::block_words(args.seed, args.offset + static_cast<std::uint64_t>(i / 4));
      if (detail::random::keep(words.v[i % 4], desc_.dropout))
        masks[i / 32] |= std::uint32_t{1} << (i % 32);
    }
  }

  void write(const std::vector<double>& values, Tensor* tensor, const char* role,
             const Dims& dims) const {
    if (tensor == nullptr) return;
    store(values, host_tensor(tensor, role, dims, desc_.dtype, context_));
  }
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::rnn>> make_rnn_backend(const detail::OpBackends&) {
  return DirectBackend<RnnDesc, RnnArgs>::of<DirectPlan>(info_of);
}

}  // namespace dnnx::reference
