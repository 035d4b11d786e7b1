// The cpu backend's recurrent layer on oneDNN's RNN primitives: vanilla_rnn (relu, tanh), lstm and
// lbr_gru, one primitive per layer, chained.
//
// Note [cpu rnn candidates]
// A candidate is one oneDNN implementation (next_impl of the first layer's forward primitive
// descriptor; every other layer must offer one of the same name) in a compute type: the desc's
// dtype (native), and for f16 / bf16 also f32 (id suffix ":f32", note f32_compute: the caller's
// tensors are converted into f32 copies in the workspace and the results back, Note [f32
// compute] in layer_common.hpp). Ids are "onednn:<impl>:<cell>[:f32]" with <cell> vanilla_rnn,
// lstm or lbr_gru; the backward directions list the same ids, each running the first backward
// implementation oneDNN offers for that forward (its name is in the candidate's name); a training
// forward whose backward oneDNN does not implement is unsupported, since the state it fills
// would select a backward that cannot run. Whether
// oneDNN implements a compute type is asked when listing (bf16 and f16 primitives exist only on
// some ISAs); a failure is the reason. The order is native first, then f32 compute, then the
// unsupported ones.
//
// Each layer is a primitive of one layer (L = 1) with oneDNN's unidirectional_left2right or
// bidirectional_concat direction: layer l reads layer l-1's output {T, N, D*H}, so layers of
// different input sizes need no padding and the dropout between layers (Note [rnn dropout]) is
// applied between the primitives with dnnx's own masks. Data tensors are tnc, or ntc (the same
// bytes as {N, T, C}) for batch_first, the layer outputs between layers too: with layer 0
// reading ntc and writing tnc, oneDNN 3.2's backward gave wrong weight gradients (values near
// 1e33) in the parity test (a 2-layer batch_first gru).
// The states {layers * D, N, H} are ldnc, layer l's part a contiguous slice.
//
// Note [cpu rnn weights]
// oneDNN wants weights_layer {1, D, in, G, H} and weights_iter {1, D, H, G, H}, in the forward as
// ldigo (the transpose of PyTorch's {G*H, in} per direction), in the backward as ldgoi (PyTorch's
// own order per direction, gates reordered), and one f32 bias {1, D, G', H} (ldgo). Gate
// order: vanilla one gate; lstm i, f, c~, o in both (PyTorch's i, f, g, o); lbr_gru u, r, o where
// PyTorch has r, z, n: oneDNN gate 0 (update) is PyTorch's z (gate 1), gate 1 (reset) is r (gate
// 0), gate 2 is n. The bias is b_ih + b_hh per gate, except for lbr_gru, whose G' = 4 biases are
// b_iz + b_hz, b_ir + b_hr, b_in and b_hn (the last inside the reset product, as PyTorch's).
// Without bias the bias is zeros and its gradient is dropped. The flat weights are converted into
// the workspace on every call when the call gives no weights_version; with one, into a buffer the
// plan keeps, again only when the call's (address, version) differs from the one the buffer
// holds (Note [rnn weights version]). Gradients come back the same way: d b_ih and d b_hh are
// both the gate's bias gradient (lbr_gru: d b_in and d b_hn are biases 2 and 3).
//
// Note [cpu rnn backward]
// oneDNN's backward primitive computes the gradients w.r.t. the data and the weights in one call;
// the op has them as two directions, and the backward w.r.t. the weights gets no diff_dst. So:
// bwd_data runs the backward primitives of every layer (last to first), writes diff_src,
// diff_hx, diff_cx, and stores the weight gradients (f32, dnnx's flat layout) in the SavedState,
// setting its flag; bwd_weights copies them into diff_weights (or adds them, accumulating), and
// refuses a state whose flag is not set (no bwd_data since its training forward, which clears
// it) with InvalidArgument, as the reference and cudnn backends do. bwd_weights may run any
// number of times after one bwd_data, always giving the gradients of that bwd_data's diff_dst;
// a second bwd_data recomputes them.
//
// Note [cpu rnn state]
// The SavedState of a training forward (format = the candidate's id) holds, each part at a
// multiple of 64 bytes: the u64 flag of Note [cpu rnn backward]; the dropout masks (bits, as
// Note [rnn reference state]); per layer oneDNN's workspace; the final states hy (and cy) in the
// compute type; per layer but the last its output, and with dropout the next layer's input (the
// output with the mask applied); the weight gradients (weights_count() f32). A backward timed on
// the op layer's scratch state (Note [timing an rnn backward]) runs on a zeroed buffer of the
// plan's own instead.
//
// Note [cpu rnn variable lengths]
// oneDNN's RNN takes no sequence lengths. A desc with variable lengths lists the candidates of
// the same desc without them (same ids, "grouped_by_length" in the notes); a call splits its
// batch into groups, the sequences of one length (longest group first, each group's sequences in
// batch order), and runs each group as a batch of its own of that many steps: a plan of the same
// candidate for (group size, length), made on first use and kept by the call's plan (like the
// layers' primitives), with the caller's tensors of the group gathered into the workspace and its
// outputs scattered back, zeros past each sequence's end (dst, diff_src). A sequence that
// stops at step t thus has its final state at t and its reverse direction starts at t, as
// PyTorch's packed sequences. The call converts the weights once (Note [cpu rnn weights]) into a
// region of its own workspace and every group's plan binds them: the converted layout depends on
// the layers' sizes alone, not on a group's batch or length. The cost: one run of every layer's
// primitive per distinct length, the gathers and scatters; a call whose lengths are all
// seq_length is one group running on the caller's tensors, as a desc without variable lengths
// (its only extra work is its dropout masks copied into its group's state).
// The training forward's state (StateLayout::grouped) holds the flag, the dropout masks of the
// whole call (drawn as the reference draws them, Note [rnn dropout]), the summed weight
// gradients, the call's lengths (a backward with other lengths is refused), then each group's own
// state (Note [cpu rnn state] without gradients, its masks gathered from the call's). The
// backward w.r.t. the data runs the groups' backwards, each adding its weight gradients to the
// sum (the first writing it); the backward w.r.t. the weights copies or accumulates that sum as
// without lengths. Workspace and state are sized from the desc for any lengths (list_candidates).

#include "backends/onednn/check.hpp"
#include "backends/onednn/convert.hpp"
#include "backends/onednn/layer_common.hpp"
#include "backends/onednn/layers.hpp"
#include "backends/onednn/memory.hpp"
#include "core/philox.hpp"
#include "core/rnn_args.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace dnnx::onednn {
namespace {

using detail::RnnArgs;
using Tag = memory::format_tag;

ErrorContext context_of(const RnnDesc& desc, Direction direction, std::string id = {}) {
  return detail::op_context(BackendKind::cpu, desc, direction, std::move(id));
}

bool is_backward(Direction direction) {
  return direction == Direction::bwd_data || direction == Direction::bwd_weights;
}

const char* cell_name(RnnCell cell) {
  switch (cell) {
    case RnnCell::rnn_relu:
    case RnnCell::rnn_tanh: return "vanilla_rnn";
    case RnnCell::lstm: return "lstm";
    case RnnCell::gru: return "lbr_gru";
  }
  return "lstm";
}

// Bias gates oneDNN keeps: lbr_gru has one more (Note [cpu rnn weights]).
std::int64_t bias_gates(const RnnDesc& desc) {
  return desc.cell == RnnCell::gru ? 4 : desc.gates();
}

// PyTorch's gate of oneDNN's gate g (Note [cpu rnn weights]).
std::int64_t torch_gate(const RnnDesc& desc, std::int64_t g) {
  if (desc.cell == RnnCell::gru && g < 2) return 1 - g;
  return g;
}

// The memory descriptors of layer `layer` in compute type `ct`.
struct LayerMds {
  memory::desc src_layer, src_iter, src_iter_c, weights_layer, weights_iter, bias, dst_layer,
      dst_iter, dst_iter_c;
  // The diff weights and bias: f32 whatever the compute type.
  memory::desc diff_weights_layer, diff_weights_iter, diff_bias;
};

// `backward`: oneDNN's backward takes the weights as ldgoi (each direction's matrices
// transposed with respect to the forward's ldigo).
LayerMds layer_mds(const RnnDesc& desc, std::int64_t layer, DType ct, bool backward = false) {
  const memory::data_type t = data_type_of(ct);
  const memory::data_type f32 = memory::data_type::f32;
  const std::int64_t T = desc.seq_length, N = desc.batch, D = desc.directions();
  const std::int64_t H = desc.hidden_size, G = desc.gates(), in = desc.layer_input_size(layer);
  // Every layer's input and output in the caller's layout (Note [cpu rnn candidates]).
  const Tag data = desc.batch_first ? Tag::ntc : Tag::tnc;
  LayerMds m;
  m.src_layer = memory::desc({T, N, in}, t, data);
  m.dst_layer = memory::desc({T, N, D * H}, t, data);
  m.src_iter = memory::desc({1, D, N, H}, t, Tag::ldnc);
  m.dst_iter = m.src_iter;
  if (desc.cell == RnnCell::lstm) m.src_iter_c = m.dst_iter_c = m.src_iter;
  const Tag weights = backward ? Tag::ldgoi : Tag::ldigo;
  m.weights_layer = memory::desc({1, D, in, G, H}, t, weights);
  m.weights_iter = memory::desc({1, D, H, G, H}, t, weights);
  m.bias = memory::desc({1, D, bias_gates(desc), H}, f32, Tag::ldgo);
  m.diff_weights_layer = memory::desc({1, D, in, G, H}, f32, Tag::ldigo);
  m.diff_weights_iter = memory::desc({1, D, H, G, H}, f32, Tag::ldigo);
  m.diff_bias = m.bias;
  return m;
}

dnnl::rnn_direction rnn_direction_of(const RnnDesc& desc) {
  return desc.bidirectional ? dnnl::rnn_direction::bidirectional_concat
                            : dnnl::rnn_direction::unidirectional_left2right;
}

dnnl::primitive_desc forward_pd(const dnnl::engine& engine, const RnnDesc& desc, std::int64_t layer,
                                dnnl::prop_kind prop, DType ct) {
  const LayerMds m = layer_mds(desc, layer, ct);
  const dnnl::primitive_attr attr = user_scratchpad();
  const dnnl::rnn_direction dir = rnn_direction_of(desc);
  switch (desc.cell) {
    case RnnCell::rnn_relu:
    case RnnCell::rnn_tanh:
      return dnnl::vanilla_rnn_forward::primitive_desc(
          engine, prop,
          desc.cell == RnnCell::rnn_relu ? dnnl::algorithm::eltwise_relu
                                         : dnnl::algorithm::eltwise_tanh,
          dir, m.src_layer, m.src_iter, m.weights_layer, m.weights_iter, m.bias, m.dst_layer,
          m.dst_iter, attr);
    case RnnCell::lstm:
      return dnnl::lstm_forward::primitive_desc(
          engine, prop, dir, m.src_layer, m.src_iter, m.src_iter_c, m.weights_layer, m.weights_iter,
          m.bias, m.dst_layer, m.dst_iter, m.dst_iter_c, attr);
    case RnnCell::gru:
      return dnnl::lbr_gru_forward::primitive_desc(engine, prop, dir, m.src_layer, m.src_iter,
                                                   m.weights_layer, m.weights_iter, m.bias,
                                                   m.dst_layer, m.dst_iter, attr);
  }
  return {};
}

// A copy of `pd` as the forward primitive descriptor type `Pd` (a backward's hint). The typed
// constructor from a C handle clones the handle itself (reset_with_clone) and leaves the one it
// is given to its owner: `pd` keeps its own.
template <typename Pd>
Pd typed_clone(const dnnl::primitive_desc& pd, const ErrorContext& context) {
  try {
    return Pd(pd.get());
  } catch (const dnnl::error& error) {
    raise_dnnl(error.status, detail::cat("typing a primitive descriptor: ", error.what()), context);
  }
}

// The backward primitive descriptor of layer `layer` for the training forward `hint`.
dnnl::primitive_desc backward_pd(const dnnl::engine& engine, const RnnDesc& desc,
                                 std::int64_t layer, DType ct, const dnnl::primitive_desc& hint,
                                 const ErrorContext& context) {
  const LayerMds m = layer_mds(desc, layer, ct, true);
  const dnnl::primitive_attr attr = user_scratchpad();
  const dnnl::rnn_direction dir = rnn_direction_of(desc);
  const auto bwd = dnnl::prop_kind::backward;
  // The diff data: like the data; the diff weights: f32.
  switch (desc.cell) {
    case RnnCell::rnn_relu:
    case RnnCell::rnn_tanh: {
      const auto typed = typed_clone<dnnl::vanilla_rnn_forward::primitive_desc>(hint, context);
      return dnnl::vanilla_rnn_backward::primitive_desc(
          engine, bwd,
          desc.cell == RnnCell::rnn_relu ? dnnl::algorithm::eltwise_relu
                                         : dnnl::algorithm::eltwise_tanh,
          dir, m.src_layer, m.src_iter, m.weights_layer, m.weights_iter, m.bias, m.dst_layer,
          m.dst_iter, m.src_layer, m.src_iter, m.diff_weights_layer, m.diff_weights_iter,
          m.diff_bias, m.dst_layer, m.dst_iter, typed, attr);
    }
    case RnnCell::lstm: {
      const auto typed = typed_clone<dnnl::lstm_forward::primitive_desc>(hint, context);
      return dnnl::lstm_backward::primitive_desc(
          engine, bwd, dir, m.src_layer, m.src_iter, m.src_iter_c, m.weights_layer, m.weights_iter,
          m.bias, m.dst_layer, m.dst_iter, m.dst_iter_c, m.src_layer, m.src_iter, m.src_iter_c,
          m.diff_weights_layer, m.diff_weights_iter, m.diff_bias, m.dst_layer, m.dst_iter,
          m.dst_iter_c, typed, attr);
    }
    case RnnCell::gru: {
      const auto typed = typed_clone<dnnl::lbr_gru_forward::primitive_desc>(hint, context);
      return dnnl::lbr_gru_backward::primitive_desc(
          engine, bwd, dir, m.src_layer, m.src_iter, m.weights_layer, m.weights_iter, m.bias,
          m.dst_layer, m.dst_iter, m.src_layer, m.src_iter, m.diff_weights_layer,
          m.diff_weights_iter, m.diff_bias, m.dst_layer, m.dst_iter, typed, attr);
    }
  }
  return {};
}

// ---- memory layouts -----------------------------------------------------------------------------

// Carves consecutive regions, each at a multiple of buffer_alignment.
struct Carver {
  std::size_t bytes = 0;
  std::size_t take(std::size_t size) {
    const std::size_t at = bytes;
    bytes += round_up(size);
    return at;
  }
};

std::size_t elements_bytes(std::int64_t count, DType dtype) {
  return static_cast<std::size_t>(count) * size_of(dtype);
}

// Note [cpu rnn state]; a group's state (Note [cpu rnn variable lengths]) has no gradients
// (`with_grads` false): the groups' gradients are summed into the whole call's.
struct StateLayout {
  std::size_t masks = 0, hy = 0, cy = 0, grads = 0, bytes = 0;
  std::vector<std::size_t> workspace;  // per layer
  std::vector<std::size_t> output;     // per layer but the last
  std::vector<std::size_t> input;      // per layer (0 unused): the layer's input
  // Variable lengths (Note [cpu rnn variable lengths]): the call's lengths (N i32) and the start
  // of the groups' states, `group_bytes` reserved for them.
  std::size_t lengths = 0, groups = 0, group_bytes = 0;

  StateLayout() = default;
  // The state of a call with variable lengths: flag, masks, gradients, lengths, groups.
  static StateLayout grouped(const RnnDesc& desc, std::size_t group_bytes) {
    StateLayout s;
    Carver c;
    c.take(sizeof(std::uint64_t));
    s.masks = c.take(static_cast<std::size_t>((desc.dropout_draws() + 31) / 32) * 4);
    s.grads = c.take(elements_bytes(desc.weights_count(), DType::f32));
    s.lengths = c.take(elements_bytes(desc.batch, DType::i32));
    s.groups = c.take(group_bytes);
    s.group_bytes = group_bytes;
    s.bytes = c.bytes;
    return s;
  }
  StateLayout(const RnnDesc& desc, DType ct, const std::vector<std::size_t>& workspace_bytes,
              bool with_grads = true) {
    Carver c;
    c.take(sizeof(std::uint64_t));
    const bool dropout = desc.dropout_draws() > 0;
    masks = c.take(static_cast<std::size_t>((desc.dropout_draws() + 31) / 32) * 4);
    for (const std::size_t w : workspace_bytes) workspace.push_back(c.take(w));
    const std::int64_t state = desc.state_dims().product();
    hy = c.take(elements_bytes(state, ct));
    if (desc.cell == RnnCell::lstm) cy = c.take(elements_bytes(state, ct));
    const std::int64_t layer_out =
        desc.seq_length * desc.batch * desc.directions() * desc.hidden_size;
    input.assign(static_cast<std::size_t>(desc.layers), 0);
    for (std::int64_t l = 0; l + 1 < desc.layers; ++l) {
      output.push_back(c.take(elements_bytes(layer_out, ct)));
      input[static_cast<std::size_t>(l + 1)] =
          dropout ? c.take(elements_bytes(layer_out, ct)) : output.back();
    }
    if (with_grads) grads = c.take(elements_bytes(desc.weights_count(), DType::f32));
    bytes = c.bytes;
  }
};

// The regions of the workspace of one call (offsets from its start).
struct WorkLayout {
  // Every primitive's scratchpad starts at 0: they run one after the other.
  std::size_t scratchpad = 0;
  std::vector<std::size_t> weights_layer, weights_iter, bias;  // per layer, converted
  std::size_t flat_f32 = 0;   // the flat weights in f32 (dtype not f32)
  std::size_t layer_f32 = 0;  // one layer's converted weights in f32 (compute type not f32)
  std::size_t diff_layer = 0, diff_iter = 0, diff_bias = 0;  // bwd: one layer's f32 gradients
  // The states' regions: zeros for a missing input, a sink for a missing output, the f32 copy
  // of a caller's f16 / bf16 state otherwise.
  std::size_t hx = 0, cx = 0, hy = 0, cy = 0, diff_hy = 0, diff_cy = 0, diff_hx = 0, diff_cx = 0;
  // f32 compute: copies of src, dst, diff_dst, diff_src.
  std::size_t src = 0, dst = 0, diff_dst = 0, diff_src = 0;
  std::array<std::size_t, 2> between{};  // fwd: layer outputs; bwd: gradients of layer inputs
  std::size_t weights_acc = 0;           // bwd_weights: diff_weights in f32 (not f32 dtype)
  std::size_t bytes = 0;

  WorkLayout() = default;
  WorkLayout(const RnnDesc& desc, Direction direction, DType ct, std::size_t scratch,
             const std::vector<LayerMds>& mds) {
    Carver c;
    scratchpad = c.take(scratch);
    const std::size_t L = mds.size();
    const DType dt = desc.dtype;
    if (direction == Direction::bwd_weights) {
      if (dt != DType::f32) weights_acc = c.take(elements_bytes(desc.weights_count(), DType::f32));
      bytes = c.bytes;
      return;
    }
    std::size_t largest_f32 = 0;
    for (std::size_t l = 0; l < L; ++l) {
      weights_layer.push_back(c.take(mds[l].weights_layer.get_size()));
      weights_iter.push_back(c.take(mds[l].weights_iter.get_size()));
      bias.push_back(c.take(mds[l].bias.get_size()));
      largest_f32 = std::max(
          largest_f32, mds[l].diff_weights_layer.get_size() + mds[l].diff_weights_iter.get_size());
    }
    if (dt != DType::f32) flat_f32 = c.take(elements_bytes(desc.weights_count(), DType::f32));
    if (ct != DType::f32) layer_f32 = c.take(largest_f32);
    const std::int64_t state = desc.state_dims().product();
    const std::size_t state_bytes = elements_bytes(state, DType::f32);
    const bool lstm = desc.cell == RnnCell::lstm;
    const bool f32_compute = ct != dt;
    const std::int64_t layer_out =
        desc.seq_length * desc.batch * desc.directions() * desc.hidden_size;
    hx = c.take(state_bytes);
    if (lstm) cx = c.take(state_bytes);
    if (f32_compute) src = c.take(elements_bytes(desc.src_dims().product(), ct));
    if (f32_compute) dst = c.take(elements_bytes(desc.dst_dims().product(), ct));
    if (direction == Direction::bwd_data) {
      std::size_t dl = 0, di = 0, db = 0;
      for (const LayerMds& m : mds) {
        dl = std::max(dl, m.diff_weights_layer.get_size());
        di = std::max(di, m.diff_weights_iter.get_size());
        db = std::max(db, m.diff_bias.get_size());
      }
      diff_layer = c.take(dl), diff_iter = c.take(di), diff_bias = c.take(db);
      diff_hy = c.take(state_bytes), diff_hx = c.take(state_bytes);
      if (lstm) diff_cy = c.take(state_bytes), diff_cx = c.take(state_bytes);
      if (f32_compute) diff_dst = c.take(elements_bytes(desc.dst_dims().product(), ct));
      if (f32_compute) diff_src = c.take(elements_bytes(desc.src_dims().product(), ct));
      if (L > 1)
        between = {c.take(elements_bytes(layer_out, ct)), c.take(elements_bytes(layer_out, ct))};
    } else {
      hy = c.take(state_bytes);
      if (lstm) cy = c.take(state_bytes);
      if (direction == Direction::fwd && L > 1)
        between = {c.take(elements_bytes(layer_out, ct)), c.take(elements_bytes(layer_out, ct))};
    }
    bytes = c.bytes;
  }
};

// The workspace of a call with variable lengths (Note [cpu rnn variable lengths]), but the
// backward w.r.t. the weights (which runs no primitive): one group's tensors gathered in the
// caller's dtype, each sized for the whole batch, then `sub_bytes` for the group's own plan.
struct GroupWork {
  std::size_t src = 0, hx = 0, cx = 0, dst = 0, hy = 0, cy = 0;
  std::size_t diff_dst = 0, diff_hy = 0, diff_cy = 0, diff_src = 0, diff_hx = 0, diff_cx = 0;
  // The call's weights converted once for every group (Note [cpu rnn variable lengths]), per
  // layer: weights_layer, weights_iter, bias.
  std::vector<std::array<std::size_t, 3>> weights;
  std::size_t sub = 0, sub_bytes = 0, bytes = 0;

  GroupWork() = default;
  // `weight_bytes`: per layer, the sizes of the converted weights_layer, weights_iter and bias.
  GroupWork(const RnnDesc& desc, Direction direction, std::size_t sub_work,
            const std::vector<std::array<std::size_t, 3>>& weight_bytes) {
    Carver c;
    for (const auto& [layer, iter, bias] : weight_bytes)
      weights.push_back({c.take(layer), c.take(iter), c.take(bias)});
    const DType dt = desc.dtype;
    const bool lstm = desc.cell == RnnCell::lstm;
    const std::size_t src_bytes = elements_bytes(desc.src_dims().product(), dt);
    const std::size_t dst_bytes = elements_bytes(desc.dst_dims().product(), dt);
    const std::size_t state_bytes = elements_bytes(desc.state_dims().product(), dt);
    src = c.take(src_bytes);
    hx = c.take(state_bytes);
    if (lstm) cx = c.take(state_bytes);
    dst = c.take(dst_bytes);
    if (direction == Direction::bwd_data) {
      diff_dst = c.take(dst_bytes);
      diff_hy = c.take(state_bytes);
      if (lstm) diff_cy = c.take(state_bytes);
      diff_src = c.take(src_bytes);
      diff_hx = c.take(state_bytes);
      if (lstm) diff_cx = c.take(state_bytes);
    } else {
      hy = c.take(state_bytes);
      if (lstm) cy = c.take(state_bytes);
    }
    sub = c.take(sub_work);
    sub_bytes = sub_work;
    bytes = c.bytes;
  }
};

// ---- candidates ---------------------------------------------------------------------------------

struct Candidate {
  AlgoInfo info;
  DType ct = DType::f32;
  std::vector<dnnl::primitive_desc> forward;   // per layer (training for every direction but fwd)
  std::vector<dnnl::primitive_desc> backward;  // per layer, backward directions
  WorkLayout work;
  StateLayout state;
  std::vector<std::size_t> workspaces;  // per layer, oneDNN's workspace (but fwd)
  // Variable lengths (Note [cpu rnn variable lengths]): the plan runs groups; `work` and `state`
  // above are then those of the whole batch at seq_length and of the call respectively.
  bool grouped = false;
  GroupWork group_work;
};

// Why the cpu backend cannot run the desc in compute type `ct` without asking oneDNN; "" if it may.
std::string desc_reason(const RnnDesc& desc, Direction direction, DType ct) {
  if (ct != DType::f32 && direction != Direction::fwd && desc.dropout_draws() > 0) {
    return detail::cat(
        "the dropout between layers is applied in f32 only: the f32-compute "
        "candidate runs ",
        to_string(desc.dtype), " with dropout");
  }
  return {};
}

// The candidates of a desc without variable lengths.
std::vector<Candidate> list_fixed(const dnnl::engine& engine, const RnnDesc& desc,
                                  Direction direction, const std::string& isa) {
  const ErrorContext context = context_of(desc, direction);
  const dnnl::prop_kind prop = direction == Direction::fwd ? dnnl::prop_kind::forward_inference
                                                           : dnnl::prop_kind::forward_training;
  std::vector<DType> computes = {desc.dtype};
  if (desc.dtype != DType::f32) computes.push_back(DType::f32);
  std::vector<Candidate> candidates;
  // oneDNN may answer next_impl with an implementation of a name already listed (seen for the
  // f32 lstm in a process that created other RNN primitives before): listed once.
  std::set<std::string> seen;
  for (const DType ct : computes) {
    const bool f32_compute = ct != desc.dtype;
    const std::string formulation =
        detail::cat(cell_name(desc.cell), f32_compute ? f32_compute_suffix : "");
    const std::string problem =
        detail::cat(cell_name(desc.cell), ' ', to_string(direction), ' ', to_string(ct));
    if (const std::string why = desc_reason(desc, direction, ct); !why.empty()) {
      AlgoInfo info = unavailable_info(formulation, why, problem, isa, {});
      if (f32_compute) info.notes.emplace_back(f32_compute_note);
      Candidate c;
      c.info = std::move(info);
      candidates.push_back(std::move(c));
      continue;
    }
    std::string failure;
    dnnl::primitive_desc first = create_or_unavailable(
        [&] { return forward_pd(engine, desc, 0, prop, ct); }, "rnn primitive descriptor", context,
        failure, Unavailable::unimplemented_or_invalid);
    if (!first) {
      AlgoInfo info = unavailable_info(formulation, {}, problem, isa, failure);
      if (f32_compute) info.notes.emplace_back(f32_compute_note);
      Candidate c;
      c.info = std::move(info);
      candidates.push_back(std::move(c));
      continue;
    }
    do {
      const std::string impl = sanitize(first.impl_info_str());
      Candidate c;
      c.ct = ct;
      AlgoInfo& info = c.info;
      info.id = detail::cat("onednn:", impl, ':', formulation);
      if (!seen.insert(info.id).second) continue;
      info.notes = {"rnn", cell_name(desc.cell)};
      if (f32_compute) info.notes.emplace_back(f32_compute_note);
      info.deterministic = true;
      if (direction != Direction::fwd) info.saved_state_format = info.id;
      std::string reason;
      c.forward.push_back(clone(first, context));
      for (std::int64_t l = 1; l < desc.layers && reason.empty(); ++l) {
        std::string problem_l;
        dnnl::primitive_desc pd = create_or_unavailable(
            [&] { return forward_pd(engine, desc, l, prop, ct); }, "rnn primitive descriptor",
            context, problem_l, Unavailable::unimplemented_or_invalid);
        bool found = false;
        if (pd) {
          do {
            if (sanitize(pd.impl_info_str()) == impl) {
              c.forward.push_back(clone(pd, context));
              found = true;
              break;
            }
          } while (pd.next_impl());
        }
        if (!found) {
          reason = detail::cat(onednn_version(), " offers no ", impl, " implementation for layer ",
                               l, " (input size ", desc.layer_input_size(l), ")",
                               problem_l.empty() ? "" : ": ", problem_l);
        }
      }
      std::string backward_impl;
      // A training forward is listed only with its backward: the state it fills selects the
      // backwards' candidate (Note [saved state]).
      if (reason.empty() && direction != Direction::fwd) {
        for (std::int64_t l = 0; l < desc.layers && reason.empty(); ++l) {
          std::string problem_l;
          dnnl::primitive_desc pd = create_or_unavailable(
              [&] {
                return backward_pd(engine, desc, l, ct, c.forward[static_cast<std::size_t>(l)],
                                   context);
              },
              "rnn backward primitive descriptor", context, problem_l,
              Unavailable::unimplemented_or_invalid);
          if (!pd) {
            reason = detail::cat(onednn_version(), " has no backward of ", impl, " for ", problem,
                                 " on cpu isa ", isa, ": ", problem_l);
          } else {
            if (l == 0) backward_impl = sanitize(pd.impl_info_str());
            if (is_backward(direction)) c.backward.push_back(clone(pd, context));
          }
        }
      }
      info.name = detail::cat("oneDNN ", impl, ' ', cell_name(desc.cell), " per layer",
                              backward_impl.empty() ? "" : ", backward ", backward_impl,
                              f32_compute ? ", f32 compute" : "");
      if (!reason.empty()) {
        info.supported = false;
        info.reason = reason;
        c.forward.clear();
        c.backward.clear();
        candidates.push_back(std::move(c));
        continue;
      }
      std::vector<LayerMds> mds;
      std::vector<std::size_t> workspaces;
      std::size_t scratch = 0;
      for (std::int64_t l = 0; l < desc.layers; ++l) {
        mds.push_back(layer_mds(desc, l, ct));
        const auto i = static_cast<std::size_t>(l);
        const dnnl::primitive_desc& run = is_backward(direction) ? c.backward[i] : c.forward[i];
        scratch = std::max(scratch, run.scratchpad_desc().get_size());
        workspaces.push_back(c.forward[i].workspace_desc().get_size());
      }
      if (direction == Direction::bwd_weights) scratch = 0;  // it runs no primitive
      c.work = WorkLayout(desc, direction, ct, scratch, mds);
      info.workspace_bytes = c.work.bytes;
      if (direction != Direction::fwd) {
        c.workspaces = workspaces;
        c.state = StateLayout(desc, ct, workspaces);
        if (direction == Direction::fwd_training) info.saved_state_bytes = c.state.bytes;
      }
      info.supported = true;
      candidates.push_back(std::move(c));
    } while (first.next_impl());
  }
  order_supported_first(candidates);
  return candidates;
}

// Note [cpu rnn variable lengths]: the candidates of the desc without lengths, each running
// groups. What a call needs depends on its lengths, the listing knows only the desc, so the
// workspace and the saved state are sized for the worst case: a group's tensors are at most the
// whole batch's; a group's own plan needs at most the larger workspace of the whole batch and of
// one sequence, both of length seq_length; the groups' states together at most N times the state
// of one sequence of length seq_length (N groups of one; a group of n sequences of length t <= T
// keeps no more than n such states, every part of a state growing with the batch and the length).
// A call checks what its groups need against these and raises a clear error if ever exceeded.
std::vector<Candidate> list_candidates(const dnnl::engine& engine, const RnnDesc& desc,
                                       Direction direction, const std::string& isa) {
  if (!desc.variable_lengths) return list_fixed(engine, desc, direction, isa);
  RnnDesc fixed = desc;
  fixed.variable_lengths = false;
  std::vector<Candidate> candidates = list_fixed(engine, fixed, direction, isa);
  RnnDesc single = fixed;
  single.batch = 1;
  const std::vector<Candidate> singles =
      desc.batch == 1 ? candidates : list_fixed(engine, single, direction, isa);
  for (Candidate& c : candidates) {
    c.grouped = true;
    if (!c.info.supported) continue;
    const auto one = std::find_if(singles.begin(), singles.end(), [&](const Candidate& s) {
      return s.info.supported && s.info.id == c.info.id;
    });
    if (one == singles.end()) {
      c.info.supported = false;
      c.info.reason = detail::cat(
          onednn_version(), " offers ", c.info.id,
          " for the whole batch but not for one sequence: variable lengths run each group of "
          "sequences of one length as a batch of its own, down to one sequence");
      c.forward.clear();
      c.backward.clear();
      continue;
    }
    c.info.name += ", grouped by length";
    c.info.notes.emplace_back("grouped_by_length");
    if (direction != Direction::fwd) {
      const std::size_t one_state = StateLayout(single, one->ct, one->workspaces, false).bytes;
      c.state = StateLayout::grouped(desc, one_state * static_cast<std::size_t>(desc.batch));
      if (direction == Direction::fwd_training) c.info.saved_state_bytes = c.state.bytes;
    }
    if (direction != Direction::bwd_weights) {
      std::vector<std::array<std::size_t, 3>> weight_bytes;
      for (std::int64_t l = 0; l < desc.layers; ++l) {
        const LayerMds m = layer_mds(fixed, l, c.ct, is_backward(direction));
        weight_bytes.push_back(
            {m.weights_layer.get_size(), m.weights_iter.get_size(), m.bias.get_size()});
      }
      c.group_work =
          GroupWork(desc, direction, std::max(c.work.bytes, one->work.bytes), weight_bytes);
      c.info.workspace_bytes = c.group_work.bytes;
    }
  }
  order_supported_first(candidates);
  return candidates;
}

// ---- the plan -----------------------------------------------------------------------------------

// The memory objects of one layer's primitive, made once and bound per call.
struct LayerRun {
  Step step;
  std::vector<std::pair<int, dnnl::memory>> memories;
};

class Plan final : public LayerPlan<RnnArgs> {
 public:
  Plan(std::shared_ptr<Runtime> runtime, const RnnDesc& desc, Direction direction,
       const Candidate& candidate)
      : LayerPlan(candidate.info, context_of(desc, direction, candidate.info.id)),
        runtime_(std::move(runtime)),
        desc_(desc),
        direction_(direction),
        ct_(candidate.ct),
        work_(candidate.work),
        state_(candidate.state),
        forward_(candidate.forward),
        backward_(candidate.backward),
        grouped_(candidate.grouped),
        group_work_(candidate.group_work) {
    if (direction == Direction::bwd_weights || grouped_) return;
    dnnl_call(context_, "building the primitives", [&] {
      const dnnl::engine& engine = runtime_->engine;
      for (std::int64_t l = 0; l < desc_.layers; ++l) {
        const auto i = static_cast<std::size_t>(l);
        const LayerMds m = layer_mds(desc_, l, ct_, is_backward(direction));
        LayerRun run;
        auto add = [&](int arg, const memory::desc& md) {
          if (md.get_size() == 0) return;
          run.memories.emplace_back(arg, dnnl::memory(md, engine, DNNL_MEMORY_NONE));
        };
        add(DNNL_ARG_SRC_LAYER, m.src_layer);
        add(DNNL_ARG_SRC_ITER, m.src_iter);
        add(DNNL_ARG_SRC_ITER_C, m.src_iter_c);
        add(DNNL_ARG_WEIGHTS_LAYER, m.weights_layer);
        add(DNNL_ARG_WEIGHTS_ITER, m.weights_iter);
        add(DNNL_ARG_BIAS, m.bias);
        add(DNNL_ARG_DST_LAYER, m.dst_layer);
        add(DNNL_ARG_DST_ITER, m.dst_iter);
        add(DNNL_ARG_DST_ITER_C, m.dst_iter_c);
        if (direction != Direction::fwd) add(DNNL_ARG_WORKSPACE, forward_[i].workspace_desc());
        if (is_backward(direction)) {
          add(DNNL_ARG_DIFF_SRC_LAYER, m.src_layer);
          add(DNNL_ARG_DIFF_SRC_ITER, m.src_iter);
          add(DNNL_ARG_DIFF_SRC_ITER_C, m.src_iter_c);
          add(DNNL_ARG_DIFF_WEIGHTS_LAYER, m.diff_weights_layer);
          add(DNNL_ARG_DIFF_WEIGHTS_ITER, m.diff_weights_iter);
          add(DNNL_ARG_DIFF_BIAS, m.diff_bias);
          add(DNNL_ARG_DIFF_DST_LAYER, m.dst_layer);
          add(DNNL_ARG_DIFF_DST_ITER, m.dst_iter);
          add(DNNL_ARG_DIFF_DST_ITER_C, m.dst_iter_c);
        }
        std::vector<dnnl_exec_arg_t> args;
        for (const auto& [arg, memory] : run.memories) args.push_back({arg, memory.get()});
        run.step =
            make_step(is_backward(direction) ? backward_[i] : forward_[i], std::move(args), engine);
        runs_.push_back(std::move(run));
      }
    });
  }

  void execute(const RnnArgs& args, detail::Workspace workspace) override {
    check_workspace(workspace);
    auto* base = static_cast<std::byte*>(workspace.data);
    std::lock_guard lock(runtime_->mutex);
    dnnl_call(context_, "running the rnn primitives", [&] {
      const bool training = direction_ == Direction::fwd_training;
      switch (direction_) {
        case Direction::fwd:
        case Direction::fwd_training:
          if (grouped_) {
            forward_grouped(args, base);
          } else {
            forward(args, base, training ? state_of(args) : nullptr, true);
          }
          return;
        case Direction::bwd_data:
          if (grouped_) {
            backward_data_grouped(args, base);
          } else {
            std::byte* state = state_of(args);
            backward_data(args, base, state, reinterpret_cast<float*>(state + state_.grads), false);
            set_flag(state, 1);
          }
          return;
        case Direction::bwd_weights: backward_weights(args, base); return;
      }
    });
  }

 private:
  std::int64_t state_count() const { return desc_.state_dims().product(); }
  std::int64_t layer_state_count() const {
    return desc_.directions() * desc_.batch * desc_.hidden_size;
  }
  std::int64_t layer_out_count() const {
    return desc_.seq_length * desc_.batch * desc_.directions() * desc_.hidden_size;
  }
  std::size_t ct_size() const { return size_of(ct_); }

  // A tensor the primitives read, in the compute type: the caller's memory, its f32 copy in
  // `region`, or zeros there when the tensor is absent.
  void* input(const Tensor* tensor, std::byte* region, std::int64_t count) const {
    if (tensor == nullptr) {
      std::memset(region, 0, elements_bytes(count, ct_));
      return region;
    }
    if (ct_ == desc_.dtype) return tensor->data();
    convert(tensor->data(), desc_.dtype, region, ct_, count);
    return region;
  }
  // A tensor the primitives write: the caller's memory, or `region` (an f32 copy converted out by
  // finish(), or a sink when the tensor is absent).
  void* output(Tensor* tensor, std::byte* region) const {
    return tensor != nullptr && ct_ == desc_.dtype ? tensor->data() : region;
  }
  void finish(Tensor* tensor, const std::byte* region, std::int64_t count) const {
    if (tensor != nullptr && ct_ != desc_.dtype)
      convert(region, ct_, tensor->data(), desc_.dtype, count);
  }

  void run_layer(std::int64_t layer, std::byte* base) {
    LayerRun& run = runs_[static_cast<std::size_t>(layer)];
    run_step(run.step, runtime_->stream.get(), base + work_.scratchpad, context_);
    wait(runtime_->stream.get(), context_);
  }
  void bind_arg(std::int64_t layer, int arg, void* data) {
    LayerRun& run = runs_[static_cast<std::size_t>(layer)];
    for (auto& [a, m] : run.memories) {
      if (a == arg) {
        bind(m, data);
        return;
      }
    }
  }
  // Layer l's part of a {layers * D, N, H} state in the compute type.
  void* slice(void* state, std::int64_t layer) const {
    return static_cast<std::byte*>(state) +
           static_cast<std::size_t>(layer * layer_state_count()) * ct_size();
  }

  // The state's buffer (Note [cpu rnn state]).
  std::byte* state_of(const RnnArgs& args) {
    const SavedState* state = args.state;
    if (state == nullptr)
      detail::raise(ErrorKind::InvalidArgument, "the call has no SavedState", context_);
    timing_ = is_backward(direction_) && state->format() != info_.saved_state_format &&
              state->producer() == detail::rnn_scratch_producer;
    if (timing_) {
      // Note [timing an rnn backward]: a zeroed buffer of the plan's own, its flag set.
      if (timing_state_.empty()) {
        timing_state_.assign(state_.bytes + buffer_alignment, std::byte{0});
      }
      std::byte* aligned = align(timing_state_.data());
      const std::uint64_t flag = 1;
      std::memcpy(aligned, &flag, sizeof flag);
      return aligned;
    }
    if (state->format() != info_.saved_state_format) {
      detail::raise(ErrorKind::InvalidArgument,
                    detail::cat("the SavedState holds format '", state->format(), "' (from '",
                                state->producer(), "'), not '", info_.saved_state_format,
                                "': a backward runs the implementation of the training forward "
                                "that filled its state"),
                    context_);
    }
    if (state->bytes() < state_.bytes || state->data() == nullptr ||
        state->device() != Device::cpu()) {
      detail::raise(ErrorKind::InvalidArgument,
                    detail::cat("the SavedState holds ", state->bytes(), " bytes on ",
                                to_string(state->device()), "; this candidate needs ", state_.bytes,
                                " on cpu"),
                    context_);
    }
    return static_cast<std::byte*>(state->data());
  }
  static std::byte* align(std::byte* p) {
    const auto address = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t rounded =
        (address + buffer_alignment - 1) / buffer_alignment * buffer_alignment;
    return p + (rounded - address);
  }

  // Where a call's converted weights lie, per layer (Note [cpu rnn weights]).
  struct LayerWeights {
    std::vector<std::byte*> layer, iter, bias;
  };
  // This plan's own regions of the workspace at `base`.
  LayerWeights own_weights(std::byte* base) const {
    LayerWeights w;
    for (std::size_t i = 0; i < work_.weights_layer.size(); ++i) {
      w.layer.push_back(base + work_.weights_layer[i]);
      w.iter.push_back(base + work_.weights_iter[i]);
      w.bias.push_back(base + work_.bias[i]);
    }
    return w;
  }

  // The converted weights of a call (Note [cpu rnn weights]), with this plan's temporaries in the
  // workspace at `base`: converted into `regions` (the call's workspace) without a version;
  // with one (Note [rnn weights version]), in the plan's own buffer, converted there when it holds
  // other weights.
  LayerWeights weights_of(const Tensor& weights, std::uint64_t version, std::byte* base,
                          const LayerWeights& regions) {
    if (version == 0) {
      convert_weights(weights, base, regions);
      return regions;
    }
    if (kept_.empty()) {
      RnnDesc fixed = desc_;
      fixed.variable_lengths = false;
      Carver c;
      for (std::int64_t l = 0; l < desc_.layers; ++l) {
        const LayerMds m = layer_mds(fixed, l, ct_, is_backward(direction_));
        kept_at_.push_back({c.take(m.weights_layer.get_size()), c.take(m.weights_iter.get_size()),
                            c.take(m.bias.get_size())});
      }
      kept_.assign(c.bytes + buffer_alignment, std::byte{0});
    }
    std::byte* kept = align(kept_.data());
    LayerWeights w;
    for (const auto& [layer, iter, bias] : kept_at_) {
      w.layer.push_back(kept + layer);
      w.iter.push_back(kept + iter);
      w.bias.push_back(kept + bias);
    }
    if (kept_from_ != weights.data() || kept_version_ != version) {
      kept_version_ = 0;
      convert_weights(weights, base, w);
      kept_from_ = weights.data();
      kept_version_ = version;
    }
    return w;
  }

  // Note [cpu rnn weights]: the flat weights into every layer's regions `to`, with this plan's
  // temporaries (flat_f32, layer_f32) in the workspace at `base`.
  // The forwards take ldigo, the backwards ldgoi (layer_mds).
  void convert_weights(const Tensor& weights, std::byte* base, const LayerWeights& to) const {
    const bool ldgoi = is_backward(direction_);
    const float* flat = static_cast<const float*>(weights.data());
    if (desc_.dtype != DType::f32) {
      convert(weights.data(), desc_.dtype, base + work_.flat_f32, DType::f32,
              desc_.weights_count());
      flat = reinterpret_cast<const float*>(base + work_.flat_f32);
    }
    const std::int64_t D = desc_.directions(), H = desc_.hidden_size, G = desc_.gates();
    const std::int64_t GB = bias_gates(desc_);
    for (std::int64_t l = 0; l < desc_.layers; ++l) {
      const auto i = static_cast<std::size_t>(l);
      const std::int64_t in = desc_.layer_input_size(l);
      const std::int64_t layer_count = D * in * G * H, iter_count = D * H * G * H;
      float* wl =
          reinterpret_cast<float*>(ct_ == DType::f32 ? to.layer[i] : base + work_.layer_f32);
      float* wi = ct_ == DType::f32 ? reinterpret_cast<float*>(to.iter[i]) : wl + layer_count;
      auto* bias = reinterpret_cast<float*>(to.bias[i]);
      for (std::int64_t d = 0; d < D; ++d) {
        const float* w_ih = flat + desc_.weight_offset(l, d, RnnWeight::w_ih);
        const float* w_hh = flat + desc_.weight_offset(l, d, RnnWeight::w_hh);
        for (std::int64_t g = 0; g < G; ++g) {
          const std::int64_t pg = torch_gate(desc_, g);
          for (std::int64_t o = 0; o < H; ++o) {
            const float* row_ih = w_ih + (pg * H + o) * in;
            const float* row_hh = w_hh + (pg * H + o) * H;
            if (ldgoi) {
              std::copy(row_ih, row_ih + in, wl + ((d * G + g) * H + o) * in);
              std::copy(row_hh, row_hh + H, wi + ((d * G + g) * H + o) * H);
              continue;
            }
            for (std::int64_t k = 0; k < in; ++k) wl[((d * in + k) * G + g) * H + o] = row_ih[k];
            for (std::int64_t k = 0; k < H; ++k) wi[((d * H + k) * G + g) * H + o] = row_hh[k];
          }
        }
        float* b = bias + d * GB * H;
        if (!desc_.bias) {
          std::fill(b, b + GB * H, 0.0f);
          continue;
        }
        const float* b_ih = flat + desc_.weight_offset(l, d, RnnWeight::b_ih);
        const float* b_hh = flat + desc_.weight_offset(l, d, RnnWeight::b_hh);
        for (std::int64_t g = 0; g < GB; ++g) {
          for (std::int64_t o = 0; o < H; ++o) {
            float value = 0;
            if (desc_.cell == RnnCell::gru && g == 2) {
              value = b_ih[2 * H + o];
            } else if (desc_.cell == RnnCell::gru && g == 3) {
              value = b_hh[2 * H + o];
            } else {
              const std::int64_t pg = torch_gate(desc_, g);
              value = b_ih[pg * H + o] + b_hh[pg * H + o];
            }
            b[g * H + o] = value;
          }
        }
      }
      if (ct_ != DType::f32) {
        convert(wl, DType::f32, to.layer[i], ct_, layer_count);
        convert(wi, DType::f32, to.iter[i], ct_, iter_count);
      }
    }
  }

  // Note [cpu rnn weights]: layer l's f32 gradients (oneDNN's layout) into the flat gradients.
  // With `add`, added to `grads` instead.
  void gradients_to_flat(std::int64_t l, const std::byte* base, float* grads, bool add) const {
    const auto put = [add](float& to, float value) { to = add ? to + value : value; };
    const std::int64_t D = desc_.directions(), H = desc_.hidden_size, G = desc_.gates();
    const std::int64_t GB = bias_gates(desc_);
    const std::int64_t in = desc_.layer_input_size(l);
    const auto* dl = reinterpret_cast<const float*>(base + work_.diff_layer);
    const auto* di = reinterpret_cast<const float*>(base + work_.diff_iter);
    const auto* db = reinterpret_cast<const float*>(base + work_.diff_bias);
    for (std::int64_t d = 0; d < D; ++d) {
      float* w_ih = grads + desc_.weight_offset(l, d, RnnWeight::w_ih);
      float* w_hh = grads + desc_.weight_offset(l, d, RnnWeight::w_hh);
      for (std::int64_t g = 0; g < G; ++g) {
        const std::int64_t pg = torch_gate(desc_, g);
        for (std::int64_t o = 0; o < H; ++o) {
          float* row_ih = w_ih + (pg * H + o) * in;
          float* row_hh = w_hh + (pg * H + o) * H;
          for (std::int64_t k = 0; k < in; ++k) put(row_ih[k], dl[((d * in + k) * G + g) * H + o]);
          for (std::int64_t k = 0; k < H; ++k) put(row_hh[k], di[((d * H + k) * G + g) * H + o]);
        }
      }
      if (!desc_.bias) continue;
      float* b_ih = grads + desc_.weight_offset(l, d, RnnWeight::b_ih);
      float* b_hh = grads + desc_.weight_offset(l, d, RnnWeight::b_hh);
      const float* b = db + d * GB * H;
      for (std::int64_t g = 0; g < GB; ++g) {
        for (std::int64_t o = 0; o < H; ++o) {
          const float value = b[g * H + o];
          if (desc_.cell == RnnCell::gru && g == 2) {
            put(b_ih[2 * H + o], value);
          } else if (desc_.cell == RnnCell::gru && g == 3) {
            put(b_hh[2 * H + o], value);
          } else {
            const std::int64_t pg = torch_gate(desc_, g);
            put(b_ih[pg * H + o], value);
            put(b_hh[pg * H + o], value);
          }
        }
      }
    }
  }

  bool dropout() const { return desc_.dropout_draws() > 0; }
  static bool kept(const std::uint32_t* masks, std::int64_t i) {
    return ((masks[i / 32] >> (i % 32)) & 1u) != 0;
  }

  // Note [rnn dropout]: the masks of every layer boundary, as bits.
  void draw_masks(const RnnArgs& args, std::uint32_t* masks) const {
    const std::int64_t count = desc_.dropout_draws();
    std::memset(masks, 0, static_cast<std::size_t>((count + 31) / 32) * 4);
    detail::random::Words words{};
    for (std::int64_t i = 0; i < count; ++i) {
      if (i % 4 == 0)
        words =
            detail::random::block_words(args.seed, args.offset + static_cast<std::uint64_t>(i / 4));
      if (detail::random::keep(words.v[i % 4], desc_.dropout))
        masks[i / 32] |= std::uint32_t{1} << (i % 32);
    }
  }

  // Multiplies the f32 values of boundary `boundary` ({T, N, D*H} in the data layout) by its
  // mask (indexed in seq-major order, Note [rnn dropout]) and 1 / (1 - dropout).
  void apply_mask(const std::uint32_t* masks, std::int64_t boundary, const float* from,
                  float* to) const {
    const float scale = 1.0f / (1.0f - desc_.dropout);
    const std::int64_t T = desc_.seq_length, N = desc_.batch;
    const std::int64_t C = desc_.directions() * desc_.hidden_size;
    const std::int64_t first = boundary * layer_out_count();
    for (std::int64_t t = 0; t < T; ++t) {
      for (std::int64_t n = 0; n < N; ++n) {
        const std::int64_t logical = first + (t * N + n) * C;
        const std::int64_t at = desc_.batch_first ? (n * T + t) * C : (t * N + n) * C;
        for (std::int64_t c = 0; c < C; ++c)
          to[at + c] = kept(masks, logical + c) ? from[at + c] * scale : 0.0f;
      }
    }
  }

  // The forward of every layer; `state` is the training forward's (Note [cpu rnn state]), whose
  // masks it draws when `draw` (a group's plan finds them gathered there instead). `converted`:
  // the weights already converted (a group's plan), else converted here.
  void forward(const RnnArgs& args, std::byte* base, std::byte* state, bool draw,
               const LayerWeights* converted = nullptr) {
    const bool training = direction_ == Direction::fwd_training;
    const bool lstm = desc_.cell == RnnCell::lstm;
    const LayerWeights weights =
        converted != nullptr
            ? *converted
            : weights_of(*args.weights, args.weights_version, base, own_weights(base));
    void* src = input(args.src, base + work_.src, desc_.src_dims().product());
    void* hx = input(args.hx, base + work_.hx, state_count());
    void* cx = lstm ? input(args.cx, base + work_.cx, state_count()) : nullptr;
    void* dst = output(args.dst, base + work_.dst);
    void* hy = training ? state + state_.hy : output(args.hy, base + work_.hy);
    void* cy = !lstm ? nullptr : training ? state + state_.cy : output(args.cy, base + work_.cy);
    std::uint32_t* masks = nullptr;
    if (training) {
      set_flag(state, 0);
      if (dropout()) {
        masks = reinterpret_cast<std::uint32_t*>(state + state_.masks);
        if (draw) draw_masks(args, masks);
      }
    }
    for (std::int64_t l = 0; l < desc_.layers; ++l) {
      const auto i = static_cast<std::size_t>(l);
      const bool last = l == desc_.layers - 1;
      void* in = l == 0     ? src
                 : training ? static_cast<void*>(state + state_.input[i])
                            : static_cast<void*>(base + work_.between[(l - 1) % 2]);
      void* out = last       ? dst
                  : training ? static_cast<void*>(state + state_.output[i])
                             : static_cast<void*>(base + work_.between[l % 2]);
      bind_arg(l, DNNL_ARG_SRC_LAYER, in);
      bind_arg(l, DNNL_ARG_SRC_ITER, slice(hx, l));
      if (lstm) bind_arg(l, DNNL_ARG_SRC_ITER_C, slice(cx, l));
      bind_arg(l, DNNL_ARG_WEIGHTS_LAYER, weights.layer[i]);
      bind_arg(l, DNNL_ARG_WEIGHTS_ITER, weights.iter[i]);
      bind_arg(l, DNNL_ARG_BIAS, weights.bias[i]);
      bind_arg(l, DNNL_ARG_DST_LAYER, out);
      bind_arg(l, DNNL_ARG_DST_ITER, slice(hy, l));
      if (lstm) bind_arg(l, DNNL_ARG_DST_ITER_C, slice(cy, l));
      if (training) bind_arg(l, DNNL_ARG_WORKSPACE, state + state_.workspace[i]);
      run_layer(l, base);
      if (training && masks != nullptr && !last) {
        apply_mask(masks, l, static_cast<const float*>(out),
                   reinterpret_cast<float*>(state + state_.input[i + 1]));
      }
    }
    finish(args.dst, static_cast<std::byte*>(dst), desc_.dst_dims().product());
    if (training) {
      // The final states stay in the state (the backward binds them); the caller gets a copy.
      const std::size_t bytes = elements_bytes(state_count(), ct_);
      if (args.hy != nullptr) {
        if (ct_ == desc_.dtype) {
          std::memcpy(args.hy->data(), hy, bytes);
        } else {
          finish(args.hy, static_cast<std::byte*>(hy), state_count());
        }
      }
      if (args.cy != nullptr) {
        if (ct_ == desc_.dtype) {
          std::memcpy(args.cy->data(), cy, bytes);
        } else {
          finish(args.cy, static_cast<std::byte*>(cy), state_count());
        }
      }
    } else {
      finish(args.hy, static_cast<std::byte*>(hy), state_count());
      if (lstm) finish(args.cy, static_cast<std::byte*>(cy), state_count());
    }
  }

  // The backward of every layer on the training forward's `state`: writes the gradients w.r.t.
  // the data, and the weight gradients (f32, flat) into `grads`, or adds them there when `add`.
  // `converted` as for forward().
  void backward_data(const RnnArgs& args, std::byte* base, std::byte* state, float* grads, bool add,
                     const LayerWeights* converted = nullptr) {
    const bool lstm = desc_.cell == RnnCell::lstm;
    const LayerWeights weights =
        converted != nullptr
            ? *converted
            : weights_of(*args.weights, args.weights_version, base, own_weights(base));
    void* src = input(args.src, base + work_.src, desc_.src_dims().product());
    void* hx = input(args.hx, base + work_.hx, state_count());
    void* cx = lstm ? input(args.cx, base + work_.cx, state_count()) : nullptr;
    void* dst = input(args.dst, base + work_.dst, desc_.dst_dims().product());
    void* diff_dst = input(args.diff_dst, base + work_.diff_dst, desc_.dst_dims().product());
    void* diff_hy = input(args.diff_hy, base + work_.diff_hy, state_count());
    void* diff_cy = lstm ? input(args.diff_cy, base + work_.diff_cy, state_count()) : nullptr;
    void* diff_src = output(args.diff_src, base + work_.diff_src);
    void* diff_hx = output(args.diff_hx, base + work_.diff_hx);
    void* diff_cx = lstm ? output(args.diff_cx, base + work_.diff_cx) : nullptr;
    const auto* masks = reinterpret_cast<const std::uint32_t*>(state + state_.masks);
    for (std::int64_t l = desc_.layers - 1; l >= 0; --l) {
      const auto i = static_cast<std::size_t>(l);
      const bool last = l == desc_.layers - 1;
      // oneDNN adds the weight gradients to the diff weights' contents.
      std::memset(base + work_.diff_layer, 0, forward_mds(l).diff_weights_layer.get_size());
      std::memset(base + work_.diff_iter, 0, forward_mds(l).diff_weights_iter.get_size());
      std::memset(base + work_.diff_bias, 0, forward_mds(l).diff_bias.get_size());
      void* in = l == 0 ? src : static_cast<void*>(state + state_.input[i]);
      void* out = last ? dst : static_cast<void*>(state + state_.output[i]);
      void* diff_out = last ? diff_dst : static_cast<void*>(base + work_.between[(l + 1) % 2]);
      void* diff_in = l == 0 ? diff_src : static_cast<void*>(base + work_.between[l % 2]);
      bind_arg(l, DNNL_ARG_SRC_LAYER, in);
      bind_arg(l, DNNL_ARG_SRC_ITER, slice(hx, l));
      if (lstm) bind_arg(l, DNNL_ARG_SRC_ITER_C, slice(cx, l));
      bind_arg(l, DNNL_ARG_WEIGHTS_LAYER, weights.layer[i]);
      bind_arg(l, DNNL_ARG_WEIGHTS_ITER, weights.iter[i]);
      bind_arg(l, DNNL_ARG_BIAS, weights.bias[i]);
      bind_arg(l, DNNL_ARG_DST_LAYER, out);
      bind_arg(l, DNNL_ARG_DST_ITER, slice(state + state_.hy, l));
      if (lstm) bind_arg(l, DNNL_ARG_DST_ITER_C, slice(state + state_.cy, l));
      bind_arg(l, DNNL_ARG_WORKSPACE, state + state_.workspace[i]);
      bind_arg(l, DNNL_ARG_DIFF_DST_LAYER, diff_out);
      bind_arg(l, DNNL_ARG_DIFF_DST_ITER, slice(diff_hy, l));
      if (lstm) bind_arg(l, DNNL_ARG_DIFF_DST_ITER_C, slice(diff_cy, l));
      bind_arg(l, DNNL_ARG_DIFF_SRC_LAYER, diff_in);
      bind_arg(l, DNNL_ARG_DIFF_SRC_ITER, slice(diff_hx, l));
      if (lstm) bind_arg(l, DNNL_ARG_DIFF_SRC_ITER_C, slice(diff_cx, l));
      bind_arg(l, DNNL_ARG_DIFF_WEIGHTS_LAYER, base + work_.diff_layer);
      bind_arg(l, DNNL_ARG_DIFF_WEIGHTS_ITER, base + work_.diff_iter);
      bind_arg(l, DNNL_ARG_DIFF_BIAS, base + work_.diff_bias);
      run_layer(l, base);
      gradients_to_flat(l, base, grads, add);
      if (l > 0 && dropout()) {
        auto* values = static_cast<float*>(diff_in);
        apply_mask(masks, l - 1, values, values);
      }
    }
    finish(args.diff_src, static_cast<std::byte*>(diff_src), desc_.src_dims().product());
    finish(args.diff_hx, static_cast<std::byte*>(diff_hx), state_count());
    if (lstm) finish(args.diff_cx, static_cast<std::byte*>(diff_cx), state_count());
  }

  void backward_weights(const RnnArgs& args, std::byte* base) {
    const std::byte* state = state_of(args);
    std::uint64_t flag = 0;
    std::memcpy(&flag, state, sizeof flag);
    if (flag != 1) {
      detail::raise(ErrorKind::InvalidArgument,
                    "the SavedState holds no weight gradients: oneDNN computes them with the "
                    "gradients w.r.t. the data, so call rnn_bwd_data on this state (after its "
                    "training forward) before rnn_bwd_weights",
                    context_);
    }
    const auto* grads = reinterpret_cast<const float*>(state + state_.grads);
    const std::int64_t count = desc_.weights_count();
    void* out = data_of(args.diff_weights, "diff_weights");
    if (!args.accumulate) {
      convert(grads, DType::f32, out, desc_.dtype, count);
      return;
    }
    float* sum = desc_.dtype == DType::f32 ? static_cast<float*>(out)
                                           : reinterpret_cast<float*>(base + work_.weights_acc);
    if (desc_.dtype != DType::f32) convert(out, desc_.dtype, sum, DType::f32, count);
    for (std::int64_t i = 0; i < count; ++i) sum[i] += grads[i];
    if (desc_.dtype != DType::f32) convert(sum, DType::f32, out, desc_.dtype, count);
  }

  static void set_flag(std::byte* state, std::uint64_t flag) {
    std::memcpy(state, &flag, sizeof flag);
  }

  // ---- variable lengths (Note [cpu rnn variable lengths]) ----

  // The sequences of one length: `members` in batch order.
  struct Group {
    std::int64_t length = 0;
    std::vector<std::int64_t> members;
    Plan* plan = nullptr;
    std::size_t state = 0;  // its state's offset in the call's state (training, backward)
    std::int64_t size() const { return static_cast<std::int64_t>(members.size()); }
  };

  // The call's groups, longest first, each with its plan and, but in an inference forward, its
  // state's place in `state_.groups`.
  std::vector<Group> groups_of(const std::vector<std::int32_t>& lengths) {
    std::map<std::int32_t, std::vector<std::int64_t>, std::greater<>> by_length;
    for (std::size_t n = 0; n < lengths.size(); ++n)
      by_length[lengths[n]].push_back(static_cast<std::int64_t>(n));
    std::vector<Group> groups;
    Carver states;
    for (auto& [length, members] : by_length) {
      Group g;
      g.length = length;
      g.members = std::move(members);
      g.plan = &group_plan(g.size(), g.length);
      if (direction_ != Direction::fwd) g.state = state_.groups + states.take(g.plan->state_.bytes);
      groups.push_back(std::move(g));
    }
    if (states.bytes > state_.group_bytes) {
      detail::raise(ErrorKind::InvalidArgument,
                    detail::cat("the groups of sequences of one length need ", states.bytes,
                                " bytes of saved state, more than the ", state_.group_bytes,
                                " the candidate reserved for them from the desc"),
                    context_);
    }
    return groups;
  }

  // Plans kept for groups of distinct (size, length); past this many the cache starts over.
  static constexpr std::size_t max_group_plans = 256;

  // The plan of candidate info_.id for `batch` sequences of length `length`, made once.
  Plan& group_plan(std::int64_t batch, std::int64_t length) {
    const std::pair key{batch, length};
    if (const auto found = group_plans_.find(key); found != group_plans_.end())
      return *found->second;
    if (group_plans_.size() >= max_group_plans) group_plans_.clear();
    RnnDesc desc = desc_;
    desc.variable_lengths = false;
    desc.batch = batch;
    desc.seq_length = length;
    std::vector<Candidate> listed = list_fixed(runtime_->engine, desc, direction_, runtime_->isa);
    const auto it = std::find_if(listed.begin(), listed.end(), [&](const Candidate& c) {
      return c.info.supported && c.info.id == info_.id;
    });
    if (it == listed.end()) {
      detail::raise(ErrorKind::Unsupported,
                    detail::cat(onednn_version(), " offers no ", info_.id, " for the group of ",
                                batch, " sequences of length ", length,
                                " (variable lengths run each group as a batch of its own)"),
                    context_);
    }
    Candidate c = *it;
    if (direction_ != Direction::fwd) c.state = StateLayout(desc, c.ct, c.workspaces, false);
    if (direction_ != Direction::bwd_weights && c.work.bytes > group_work_.sub_bytes) {
      detail::raise(ErrorKind::Unsupported,
                    detail::cat("the group of ", batch, " sequences of length ", length, " needs ",
                                c.work.bytes, " workspace bytes, more than the ",
                                group_work_.sub_bytes, " the candidate reserved from the desc"),
                    context_);
    }
    auto plan = std::make_unique<Plan>(runtime_, desc, direction_, c);
    return *group_plans_.emplace(key, std::move(plan)).first->second;
  }

  // Whether group `g` is the whole batch at full length: it runs on the caller's tensors.
  bool whole(const Group& g) const {
    return g.size() == desc_.batch && g.length == desc_.seq_length;
  }
  // Element (t, n) of a {T, N, C} or {N, T, C} tensor of `batch` sequences of `steps` steps.
  std::int64_t step_at(std::int64_t t, std::int64_t n, std::int64_t steps,
                       std::int64_t batch) const {
    return desc_.batch_first ? n * steps + t : t * batch + n;
  }
  // The first g.length steps of g's sequences of `from` ({T, N, C} in the data layout) into
  // `to` ({g.length, g.size(), C} likewise), the caller's dtype.
  void gather_steps(const Tensor* from, void* to, const Group& g, std::int64_t C) const {
    const auto* f = static_cast<const std::byte*>(from->data());
    auto* o = static_cast<std::byte*>(to);
    const std::size_t row = elements_bytes(C, desc_.dtype);
    for (std::int64_t j = 0; j < g.size(); ++j) {
      const std::int64_t n = g.members[static_cast<std::size_t>(j)];
      for (std::int64_t t = 0; t < g.length; ++t) {
        std::memcpy(
            o + static_cast<std::size_t>(step_at(t, j, g.length, g.size())) * row,
            f + static_cast<std::size_t>(step_at(t, n, desc_.seq_length, desc_.batch)) * row, row);
      }
    }
  }
  // The reverse of gather_steps, zeros past each sequence's end.
  void scatter_steps(const void* from, Tensor* to, const Group& g, std::int64_t C) const {
    const auto* f = static_cast<const std::byte*>(from);
    auto* o = static_cast<std::byte*>(to->data());
    const std::size_t row = elements_bytes(C, desc_.dtype);
    for (std::int64_t j = 0; j < g.size(); ++j) {
      const std::int64_t n = g.members[static_cast<std::size_t>(j)];
      for (std::int64_t t = 0; t < desc_.seq_length; ++t) {
        std::byte* out =
            o + static_cast<std::size_t>(step_at(t, n, desc_.seq_length, desc_.batch)) * row;
        if (t < g.length) {
          std::memcpy(out, f + static_cast<std::size_t>(step_at(t, j, g.length, g.size())) * row,
                      row);
        } else {
          std::memset(out, 0, row);
        }
      }
    }
  }
  // g's rows of a {layers * D, N, H} state into `to` ({layers * D, g.size(), H}), and back.
  void gather_state(const Tensor* from, void* to, const Group& g) const {
    move_state(static_cast<const std::byte*>(from->data()), static_cast<std::byte*>(to), g, true);
  }
  void scatter_state(const void* from, Tensor* to, const Group& g) const {
    move_state(static_cast<const std::byte*>(from), static_cast<std::byte*>(to->data()), g, false);
  }
  void move_state(const std::byte* from, std::byte* to, const Group& g, bool gather) const {
    const std::size_t row = elements_bytes(desc_.hidden_size, desc_.dtype);
    const std::int64_t rows = desc_.layers * desc_.directions();
    for (std::int64_t k = 0; k < rows; ++k) {
      for (std::int64_t j = 0; j < g.size(); ++j) {
        const auto whole_row =
            static_cast<std::size_t>(k * desc_.batch + g.members[static_cast<std::size_t>(j)]);
        const auto group_row = static_cast<std::size_t>(k * g.size() + j);
        if (gather) {
          std::memcpy(to + group_row * row, from + whole_row * row, row);
        } else {
          std::memcpy(to + whole_row * row, from + group_row * row, row);
        }
      }
    }
  }
  // g's bits of the call's dropout masks (Note [rnn dropout]) as the masks of g's own desc.
  void gather_masks(const std::uint32_t* from, const Group& g, std::uint32_t* to) const {
    const std::int64_t T = desc_.seq_length, N = desc_.batch, C = layer_state_count() / N;
    const std::int64_t Tg = g.length, Ng = g.size();
    std::memset(to, 0, static_cast<std::size_t>(((desc_.layers - 1) * Tg * Ng * C + 31) / 32) * 4);
    for (std::int64_t b = 0; b + 1 < desc_.layers; ++b) {
      for (std::int64_t t = 0; t < Tg; ++t) {
        for (std::int64_t j = 0; j < Ng; ++j) {
          const std::int64_t n = g.members[static_cast<std::size_t>(j)];
          const std::int64_t f = ((b * T + t) * N + n) * C, o = ((b * Tg + t) * Ng + j) * C;
          for (std::int64_t c = 0; c < C; ++c) {
            if (kept(from, f + c)) to[(o + c) / 32] |= std::uint32_t{1} << ((o + c) % 32);
          }
        }
      }
    }
  }
  Tensor group_tensor(std::byte* data, const Dims& dims) const {
    return Tensor::view(data, dims, desc_.dtype);
  }
  // The group workspace's region for the call's weights, converted once for every group's plan
  // (with this plan's temporaries in the then unused region of the groups' own workspace): the
  // converted layout depends on the layers' sizes only, not on a group's batch or length.
  LayerWeights group_weights(std::byte* base) const {
    LayerWeights w;
    for (const auto& [layer, iter, bias] : group_work_.weights) {
      w.layer.push_back(base + layer);
      w.iter.push_back(base + iter);
      w.bias.push_back(base + bias);
    }
    return w;
  }

  void forward_grouped(const RnnArgs& args, std::byte* base) {
    const bool training = direction_ == Direction::fwd_training;
    const bool lstm = desc_.cell == RnnCell::lstm;
    const std::int64_t C = desc_.directions() * desc_.hidden_size;
    std::byte* state = training ? state_of(args) : nullptr;
    const std::vector<std::int32_t> lengths = detail::sequence_lengths(desc_, args);
    const std::vector<Group> groups = groups_of(lengths);
    std::uint32_t* masks = nullptr;
    if (training) {
      set_flag(state, 0);
      std::memcpy(state + state_.lengths, lengths.data(), lengths.size() * sizeof(std::int32_t));
      if (dropout()) {
        masks = reinterpret_cast<std::uint32_t*>(state + state_.masks);
        draw_masks(args, masks);
      }
    }
    const GroupWork& w = group_work_;
    std::byte* sub = base + w.sub;
    const LayerWeights converted = weights_of(*args.weights, args.weights_version,
                                              base + group_work_.sub, group_weights(base));
    for (const Group& g : groups) {
      Plan& plan = *g.plan;
      std::byte* group_state = training ? state + g.state : nullptr;
      if (masks != nullptr) {
        gather_masks(masks, g, reinterpret_cast<std::uint32_t*>(group_state + plan.state_.masks));
      }
      if (whole(g)) {
        RnnArgs a = args;
        a.lengths = nullptr;
        plan.forward(a, sub, group_state, false, &converted);
        continue;
      }
      const RnnDesc& gd = plan.desc_;
      Tensor src = group_tensor(base + w.src, gd.src_dims());
      Tensor dst = group_tensor(base + w.dst, gd.dst_dims());
      Tensor hx = group_tensor(base + w.hx, gd.state_dims());
      Tensor hy = group_tensor(base + w.hy, gd.state_dims());
      Tensor cx, cy;
      gather_steps(args.src, src.data(), g, desc_.input_size);
      RnnArgs a;
      a.src = &src;
      a.weights = args.weights;
      a.dst = &dst;
      if (args.hx != nullptr) gather_state(args.hx, hx.data(), g), a.hx = &hx;
      if (args.hy != nullptr) a.hy = &hy;
      if (lstm) {
        cx = group_tensor(base + w.cx, gd.state_dims());
        cy = group_tensor(base + w.cy, gd.state_dims());
        if (args.cx != nullptr) gather_state(args.cx, cx.data(), g), a.cx = &cx;
        if (args.cy != nullptr) a.cy = &cy;
      }
      plan.forward(a, sub, group_state, false, &converted);
      scatter_steps(dst.data(), args.dst, g, C);
      if (args.hy != nullptr) scatter_state(hy.data(), args.hy, g);
      if (lstm && args.cy != nullptr) scatter_state(cy.data(), args.cy, g);
    }
  }

  void backward_data_grouped(const RnnArgs& args, std::byte* base) {
    const bool lstm = desc_.cell == RnnCell::lstm;
    const std::int64_t C = desc_.directions() * desc_.hidden_size;
    std::byte* state = state_of(args);
    const std::vector<std::int32_t> lengths = detail::sequence_lengths(desc_, args);
    if (!timing_) {
      std::vector<std::int32_t> forward(lengths.size());
      std::memcpy(forward.data(), state + state_.lengths, forward.size() * sizeof(std::int32_t));
      for (std::size_t n = 0; n < lengths.size(); ++n) {
        if (lengths[n] != forward[n]) {
          detail::raise(ErrorKind::InvalidArgument,
                        detail::cat("lengths[", n, "] is ", lengths[n],
                                    " but the training forward that filled the SavedState ran "
                                    "with ",
                                    forward[n], "; a backward takes its forward's lengths"),
                        context_);
        }
      }
    }
    const std::vector<Group> groups = groups_of(lengths);
    auto* grads = reinterpret_cast<float*>(state + state_.grads);
    const GroupWork& w = group_work_;
    std::byte* sub = base + w.sub;
    const LayerWeights converted = weights_of(*args.weights, args.weights_version,
                                              base + group_work_.sub, group_weights(base));
    for (std::size_t i = 0; i < groups.size(); ++i) {
      const Group& g = groups[i];
      Plan& plan = *g.plan;
      std::byte* group_state = state + g.state;
      if (whole(g)) {
        RnnArgs a = args;
        a.lengths = nullptr;
        plan.backward_data(a, sub, group_state, grads, i > 0, &converted);
        continue;
      }
      const RnnDesc& gd = plan.desc_;
      Tensor src = group_tensor(base + w.src, gd.src_dims());
      Tensor dst = group_tensor(base + w.dst, gd.dst_dims());
      Tensor diff_dst = group_tensor(base + w.diff_dst, gd.dst_dims());
      Tensor diff_src = group_tensor(base + w.diff_src, gd.src_dims());
      Tensor hx = group_tensor(base + w.hx, gd.state_dims());
      Tensor diff_hy = group_tensor(base + w.diff_hy, gd.state_dims());
      Tensor diff_hx = group_tensor(base + w.diff_hx, gd.state_dims());
      Tensor cx, diff_cy, diff_cx;
      gather_steps(args.src, src.data(), g, desc_.input_size);
      gather_steps(args.dst, dst.data(), g, C);
      gather_steps(args.diff_dst, diff_dst.data(), g, C);
      RnnArgs a;
      a.src = &src;
      a.weights = args.weights;
      a.dst = &dst;
      a.diff_dst = &diff_dst;
      a.diff_src = &diff_src;
      if (args.hx != nullptr) gather_state(args.hx, hx.data(), g), a.hx = &hx;
      if (args.diff_hy != nullptr)
        gather_state(args.diff_hy, diff_hy.data(), g), a.diff_hy = &diff_hy;
      if (args.diff_hx != nullptr) a.diff_hx = &diff_hx;
      if (lstm) {
        cx = group_tensor(base + w.cx, gd.state_dims());
        diff_cy = group_tensor(base + w.diff_cy, gd.state_dims());
        diff_cx = group_tensor(base + w.diff_cx, gd.state_dims());
        if (args.cx != nullptr) gather_state(args.cx, cx.data(), g), a.cx = &cx;
        if (args.diff_cy != nullptr)
          gather_state(args.diff_cy, diff_cy.data(), g), a.diff_cy = &diff_cy;
        if (args.diff_cx != nullptr) a.diff_cx = &diff_cx;
      }
      plan.backward_data(a, sub, group_state, grads, i > 0, &converted);
      scatter_steps(diff_src.data(), args.diff_src, g, desc_.input_size);
      if (args.diff_hx != nullptr) scatter_state(diff_hx.data(), args.diff_hx, g);
      if (lstm && args.diff_cx != nullptr) scatter_state(diff_cx.data(), args.diff_cx, g);
    }
    set_flag(state, 1);
  }

  LayerMds forward_mds(std::int64_t layer) const { return layer_mds(desc_, layer, ct_); }

  std::shared_ptr<Runtime> runtime_;
  RnnDesc desc_;
  Direction direction_;
  DType ct_;
  WorkLayout work_;
  StateLayout state_;
  std::vector<dnnl::primitive_desc> forward_;  // outlive the primitives made from them
  std::vector<dnnl::primitive_desc> backward_;
  std::vector<LayerRun> runs_;
  std::vector<std::byte> timing_state_;  // Note [timing an rnn backward]
  // Note [rnn weights version]: the converted weights kept across calls (aligned within kept_;
  // per layer the offsets of weights_layer, weights_iter and bias), and whose they are.
  std::vector<std::byte> kept_;
  std::vector<std::array<std::size_t, 3>> kept_at_;
  const void* kept_from_ = nullptr;
  std::uint64_t kept_version_ = 0;
  bool timing_ = false;                  // the last state_of handed out timing_state_
  // Variable lengths (Note [cpu rnn variable lengths]).
  bool grouped_ = false;
  GroupWork group_work_;
  std::map<std::pair<std::int64_t, std::int64_t>, std::unique_ptr<Plan>> group_plans_;
};

using OneDnnRnn = ListedLayerBackend<RnnDesc, RnnArgs, Candidate, list_candidates, Plan>;

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::rnn>> make_rnn_backend(std::shared_ptr<Runtime> runtime,
                                                                   const detail::OpBackends&) {
  return std::make_unique<OneDnnRnn>(std::move(runtime));
}

}  // namespace dnnx::onednn
