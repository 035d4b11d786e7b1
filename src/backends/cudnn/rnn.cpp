// The cudnn backend's recurrent layer: cuDNN 9's RNN API (cudnnSetRNNDescriptor_v8,
// cudnnRNNForward, cudnnRNNBackwardData_v8, cudnnRNNBackwardWeights_v8).
//
// Note [cudnn rnn candidates]
// cuDNN has no find or heuristic call for RNNs; the algorithm is a field of the RNN descriptor.
// The candidates are every algorithm (standard, persist_static, persist_static_small_h,
// persist_dynamic) under every math type (fma, default, tensor_op, tensor_op_allow_conversion),
// ids "cudnn:rnn:<algo>:<math>", in that order (standard first: it takes every configuration, so
// the heuristic pick always runs). Whether one is supported is asked of cuDNN when listing: the
// descriptor is set and the workspace and reserve sizes queried (cudnnGetRNNTempSpaceSizes, the
// TRAINING mode for every direction but fwd) for the desc's largest case (every sequence T long);
// a failure is the reason, with cuDNN's status and message (persistent kernels on variable
// lengths, hidden sizes or compute capabilities they do not take, ...). Listing refuses, without
// asking cuDNN: sizes beyond int, and for f32 the math types that may round to TF32 or f16 unless
// DNNX_ALLOW_TF32 is set. Dropout between layers runs layer by layer (Note [cudnn rnn dropout]).
// Compute precision is f32 for every dtype. persist_dynamic's plan is compiled once for the desc's
// batch (cudnnBuildRNNDynamic) when its plan is built and kept with it.
//
// Data goes to cuDNN in its unpacked layouts (SEQ_MAJOR_UNPACKED, or BATCH_MAJOR_UNPACKED for
// batch_first) with padded I/O enabled and the call's lengths, dst's padding filled with zeros.
// When cuDNN refuses that for an algorithm and the desc is sequence-major with full lengths, the
// same memory is described as SEQ_MAJOR_PACKED without padded I/O (identical bytes when every
// sequence is T long), the form persistent kernels may need.
//
// Note [cudnn rnn weights]
// cuDNN keeps the weights in its own weight space; cudnnGetRNNWeightParams gives each gate
// matrix's and bias's address there (pseudo-layer layer * D + direction, linLayerID g for W_ih's
// gate g and G + g for W_hh's, in PyTorch's gate order, which is cuDNN's). When building a plan,
// those addresses are compared with dnnx's flat layout (Note [rnn weight layout]): when every one
// sits at the same byte offset and the sizes agree, the plan passes the caller's weights (and
// diff_weights) to cuDNN as they are, converting nothing. Otherwise the plan keeps a weight space
// of its own and copies the caller's weights into it: on every call, or, when the call gives a
// weights_version, only when the (address, version) pair differs from the one the space holds
// (Note [rnn weights version]); a backward w.r.t. the weights computes into a gradient space of
// its own and copies back (reading the caller's diff_weights in first when accumulating; it
// converts no weights, cuDNN reading none there).
// The plan's record says which ("weights_converted" note; not the listing's: cuDNN's layout is
// known once a plan asks where each matrix lies). When the plan is built, the matrices' and
// biases' byte ranges are sorted and merged into runs contiguous in both layouts: a single run
// is one cudaMemcpyAsync per conversion, several are one launch of kernels/segments.cu (Note
// [segment copies]) over a table of the runs cut into chunks, uploaded to the device once per
// plan. One launch per conversion whatever the number of matrices (a bidirectional two-layer
// LSTM with biases has 64), rather than a copy per run, each a launch of a few microseconds.
//
// Note [cudnn rnn dropout]
// cuDNN's own RNN dropout draws its masks from cuDNN's RNG states, not from dnnx's Philox stream
// (Note [rnn dropout]), so no other backend could match its training forward. A training
// direction (fwd_training, bwd_data, bwd_weights) of a desc with dropout between layers
// therefore runs as the cpu backend does: one cuDNN RNN of one layer per layer (the desc with
// layers 1, that layer's input size, no dropout), each its own plan of the same algorithm and math
// type, chained, with dnnx's masks applied between them by kernels/rnn.cu (the reference's masks,
// bit for bit in position). A candidate is supported when every layer's is (the first refusal
// is the reason, naming the layer); its notes add "layer_by_layer". Layer l's weights are the
// slice of the flat weights at weight_offset(l, 0, w_ih) (dnnx's layout is layer-major), its
// states the {D, N, H} slice l of hx / hy / cx / cy. The SavedState (format: the candidate's id)
// holds, each part at a multiple of 256 bytes: the masks of every boundary as bits (Note [rnn
// reference state]'s layout), each layer's cuDNN reserve space, and per layer but the last its
// output and the next layer's input (the output with the mask applied): the backward w.r.t. the
// data runs the layers last to first, multiplying each layer's gradient w.r.t. its input by the
// mask below it, the backward w.r.t. the weights runs each layer's on the inputs and outputs kept.
// The workspace is the largest of the layers' plus regions where the slices of the caller's
// weights and states that are not 256-byte aligned are staged (cuDNN wants its tensors at least
// 4-byte aligned, f16 included; a layer's slice is wherever the previous layers end), plus, for
// bwd_data, two buffers for the gradients between layers. A layer's staging copies in go in one
// launch of kernels/segments.cu's list copy before its call, its copies back in one after; a
// layer's weights (or weight gradients) are not staged when its plan converts them (Note [cudnn
// rnn weights]): the conversion reads and writes the caller's slice at any alignment. The
// inference forward applies no dropout and runs the whole desc at once.

#include "backends/cudnn/kernels/rnn.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/conv_common.hpp"
#include "backends/cudnn/handles.hpp"
#include "backends/cudnn/kernels/segments.hpp"
#include "backends/cudnn/launch_graph.hpp"
#include "backends/cudnn/layer_common.hpp"
#include "backends/cudnn/layers.hpp"
#include "core/rnn_args.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dnnx::cudnn {
namespace {

using detail::RnnArgs;
using RnnDescriptor = Handle<cudnnRNNDescriptor_t, cudnnDestroyRNNDescriptor>;
using RnnDataDescriptor = Handle<cudnnRNNDataDescriptor_t, cudnnDestroyRNNDataDescriptor>;
using DropoutDescriptor = Handle<cudnnDropoutDescriptor_t, cudnnDestroyDropoutDescriptor>;

struct AlgoName {
  cudnnRNNAlgo_t algo;
  const char* name;
};
constexpr std::array<AlgoName, 4> algos{{
    {CUDNN_RNN_ALGO_STANDARD, "standard"},
    {CUDNN_RNN_ALGO_PERSIST_STATIC, "persist_static"},
    {CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H, "persist_static_small_h"},
    {CUDNN_RNN_ALGO_PERSIST_DYNAMIC, "persist_dynamic"},
}};

struct MathName {
  cudnnMathType_t math;
  const char* name;
};
constexpr std::array<MathName, 4> maths{{
    {CUDNN_FMA_MATH, "fma"},
    {CUDNN_DEFAULT_MATH, "default"},
    {CUDNN_TENSOR_OP_MATH, "tensor_op"},
    {CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, "tensor_op_allow_conversion"},
}};

// How the data tensors are described to cuDNN (Note [cudnn rnn candidates]).
enum class Io : std::uint8_t { padded, packed };

struct Candidate {
  AlgoInfo info;
  cudnnRNNAlgo_t algo = CUDNN_RNN_ALGO_STANDARD;
  cudnnMathType_t math = CUDNN_FMA_MATH;
  Io io = Io::padded;
  std::size_t workspace = 0;
  std::size_t reserve = 0;
  // Note [cudnn rnn dropout]: a training direction with dropout between layers, per layer.
  std::vector<Candidate> layers;
};

ErrorContext context_of(const RnnDesc& desc, Direction direction, std::string id = {}) {
  return detail::op_context(BackendKind::cudnn, desc, direction, std::move(id));
}

cudnnRNNMode_t mode_of(RnnCell cell) {
  switch (cell) {
    case RnnCell::rnn_relu: return CUDNN_RNN_RELU;
    case RnnCell::rnn_tanh: return CUDNN_RNN_TANH;
    case RnnCell::lstm: return CUDNN_LSTM;
    case RnnCell::gru: return CUDNN_GRU;
  }
  return CUDNN_LSTM;
}

bool is_backward(Direction direction) {
  return direction == Direction::bwd_data || direction == Direction::bwd_weights;
}

// The descriptors of one configuration; set() reports the first cuDNN failure instead of throwing.
struct Descriptors {
  DropoutDescriptor dropout;
  RnnDescriptor rnn;
  RnnDataDescriptor x, y;
  TensorDescriptor h;
  Io io = Io::padded;
  double padding_fill[1] = {0.0};  // zero bits: 0 in every dtype; cuDNN reads it at set time

  // "" on success, else what failed with cuDNN's status and message.
  std::string set(cudnnHandle_t handle, const RnnDesc& desc, cudnnRNNAlgo_t algo,
                  cudnnMathType_t math, Io layout, const std::vector<std::int32_t>& lengths) {
    io = layout;
    auto failure = [](const char* what, cudnnStatus_t status) {
      std::string text = detail::cat(what, " failed: ", status_name(status));
      if (const std::string message = last_cudnn_message(); !message.empty())
        text += detail::cat(" (", message, ")");
      return text;
    };
    cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
    if (!dropout) {
      cudnnDropoutDescriptor_t raw = nullptr;
      if ((status = cudnnCreateDropoutDescriptor(&raw)) != CUDNN_STATUS_SUCCESS)
        return failure("cudnnCreateDropoutDescriptor", status);
      dropout = DropoutDescriptor(raw, "cudnnDropoutDescriptor_t");
      // No dropout: no RNG states (as PyTorch's set_no_dropout).
      if ((status = cudnnSetDropoutDescriptor(dropout.get(), handle, 0.0f, nullptr, 0, 0)) !=
          CUDNN_STATUS_SUCCESS)
        return failure("cudnnSetDropoutDescriptor", status);
    }
    if (!rnn) {
      cudnnRNNDescriptor_t raw = nullptr;
      if ((status = cudnnCreateRNNDescriptor(&raw)) != CUDNN_STATUS_SUCCESS)
        return failure("cudnnCreateRNNDescriptor", status);
      rnn = RnnDescriptor(raw, "cudnnRNNDescriptor_t");
    }
    const auto hidden = static_cast<std::int32_t>(desc.hidden_size);
    status = cudnnSetRNNDescriptor_v8(
        rnn.get(), algo, mode_of(desc.cell), desc.bias ? CUDNN_RNN_DOUBLE_BIAS : CUDNN_RNN_NO_BIAS,
        desc.bidirectional ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT,
        data_type(desc.dtype), CUDNN_DATA_FLOAT, math, static_cast<std::int32_t>(desc.input_size),
        hidden, hidden, static_cast<std::int32_t>(desc.layers), dropout.get(),
        layout == Io::padded ? CUDNN_RNN_PADDED_IO_ENABLED : CUDNN_RNN_PADDED_IO_DISABLED);
    if (status != CUDNN_STATUS_SUCCESS) return failure("cudnnSetRNNDescriptor_v8", status);
    if (std::string problem = set_data(desc, lengths); !problem.empty()) return problem;
    if (!h) {
      cudnnTensorDescriptor_t raw = nullptr;
      if ((status = cudnnCreateTensorDescriptor(&raw)) != CUDNN_STATUS_SUCCESS)
        return failure("cudnnCreateTensorDescriptor", status);
      h = TensorDescriptor(raw, "cudnnTensorDescriptor_t");
      const int dims[3] = {static_cast<int>(desc.layers * desc.directions()),
                           static_cast<int>(desc.batch), hidden};
      const int strides[3] = {dims[1] * dims[2], dims[2], 1};
      if ((status = cudnnSetTensorNdDescriptor(h.get(), data_type(desc.dtype), 3, dims, strides)) !=
          CUDNN_STATUS_SUCCESS)
        return failure("cudnnSetTensorNdDescriptor (states)", status);
    }
    return {};
  }

  // The data descriptors for `lengths` (per call with variable lengths).
  std::string set_data(const RnnDesc& desc, const std::vector<std::int32_t>& lengths) {
    const cudnnRNNDataLayout_t layout = io == Io::packed ? CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED
                                        : desc.batch_first
                                            ? CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED
                                            : CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED;
    const auto T = static_cast<int>(desc.seq_length);
    const auto N = static_cast<int>(desc.batch);
    for (RnnDataDescriptor* d : {&x, &y}) {
      if (*d) continue;
      cudnnRNNDataDescriptor_t raw = nullptr;
      if (const cudnnStatus_t status = cudnnCreateRNNDataDescriptor(&raw);
          status != CUDNN_STATUS_SUCCESS)
        return detail::cat("cudnnCreateRNNDataDescriptor failed: ", status_name(status));
      *d = RnnDataDescriptor(raw, "cudnnRNNDataDescriptor_t");
    }
    const cudnnDataType_t type = data_type(desc.dtype);
    cudnnStatus_t status =
        cudnnSetRNNDataDescriptor(x.get(), type, layout, T, N, static_cast<int>(desc.input_size),
                                  lengths.data(), padding_fill);
    if (status == CUDNN_STATUS_SUCCESS) {
      status = cudnnSetRNNDataDescriptor(y.get(), type, layout, T, N,
                                         static_cast<int>(desc.directions() * desc.hidden_size),
                                         lengths.data(), padding_fill);
    }
    if (status != CUDNN_STATUS_SUCCESS) {
      std::string text = detail::cat("cudnnSetRNNDataDescriptor failed: ", status_name(status));
      if (const std::string message = last_cudnn_message(); !message.empty())
        text += detail::cat(" (", message, ")");
      return text;
    }
    return {};
  }
};

// Whether the direction runs layer by layer (Note [cudnn rnn dropout]).
bool layered(const RnnDesc& desc, Direction direction) {
  return direction != Direction::fwd && desc.dropout_draws() > 0;
}

// Layer `layer` of `desc` as a desc of its own (Note [cudnn rnn dropout]).
RnnDesc layer_desc(const RnnDesc& desc, std::int64_t layer) {
  RnnDesc d = desc;
  d.layers = 1;
  d.input_size = desc.layer_input_size(layer);
  d.dropout = 0.0f;
  return d;
}

std::size_t round_256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// Where the parts of a layer-by-layer state and workspace lie (Note [cudnn rnn dropout]).
struct LayeredLayout {
  std::size_t masks = 0;
  std::vector<std::size_t> reserve;  // per layer
  std::vector<std::size_t> output;   // per layer but the last
  std::vector<std::size_t> input;    // per layer (0 unused): the masked input
  std::size_t bytes = 0;             // the state
  // In the workspace, after the layers' own: staging regions for slices of the caller's tensors
  // that are not 256-byte aligned (0: a layer's weights or weight gradients, 1-6: a layer's
  // part of a state), then for bwd_data the gradients between layers.
  std::array<std::size_t, 7> staging{};
  std::array<std::size_t, 2> between{};
  std::size_t work_bytes = 0;

  LayeredLayout() = default;
  LayeredLayout(const RnnDesc& desc, Direction direction, const std::vector<Candidate>& layers) {
    const auto layer_out = static_cast<std::size_t>(desc.seq_length * desc.batch *
                                                    desc.directions() * desc.hidden_size) *
                           size_of(desc.dtype);
    std::size_t at = 0;
    auto take = [&at](std::size_t size) {
      const std::size_t here = at;
      at += round_256(size);
      return here;
    };
    masks = take(static_cast<std::size_t>((desc.dropout_draws() + 31) / 32) * 4);
    std::size_t work = 0;
    for (const Candidate& c : layers) {
      reserve.push_back(take(c.reserve));
      work = std::max(work, c.workspace);
    }
    input.assign(layers.size(), 0);
    for (std::size_t l = 0; l + 1 < layers.size(); ++l) {
      output.push_back(take(layer_out));
      input[l + 1] = take(layer_out);
    }
    bytes = at;
    std::size_t weights = 0;
    for (std::size_t l = 0; l < layers.size(); ++l) {
      weights = std::max(
          weights,
          static_cast<std::size_t>(layer_desc(desc, static_cast<std::int64_t>(l)).weights_count()));
    }
    const std::size_t part =
        static_cast<std::size_t>(desc.directions() * desc.batch * desc.hidden_size) *
        size_of(desc.dtype);
    work_bytes = round_256(work);
    for (std::size_t i = 0; i < staging.size(); ++i) {
      staging[i] = work_bytes;
      work_bytes += round_256(i == 0 ? weights * size_of(desc.dtype) : part);
    }
    if (direction == Direction::bwd_data) {
      between = {work_bytes, work_bytes + round_256(layer_out)};
      work_bytes += 2 * round_256(layer_out);
    }
  }
};

// Why no candidate of this backend can run the desc (before asking cuDNN); "" when they may.
std::string desc_reason(const RnnDesc& desc) {
  const std::int64_t d = desc.directions();
  const std::int64_t largest_vector = std::max(desc.input_size, d * desc.hidden_size);
  if (desc.seq_length > INT_MAX || desc.batch > INT_MAX || largest_vector > INT_MAX ||
      desc.layers * d * desc.batch * desc.hidden_size > INT_MAX) {
    return detail::cat("cuDNN's RNN descriptors hold int sizes; got seq_length ", desc.seq_length,
                       ", batch ", desc.batch, ", input_size ", desc.input_size, ", hidden_size ",
                       desc.hidden_size, " (each, and each state's element count, must be at most ",
                       INT_MAX, ")");
  }
  return {};
}

// Why `math` is refused for the desc's dtype by dnnx itself; "" when cuDNN is asked.
std::string math_reason(const RnnDesc& desc, cudnnMathType_t math, bool allow_tf32) {
  if (desc.dtype == DType::f32 && math != CUDNN_FMA_MATH && !allow_tf32) {
    return "on f32 this math type lets cuDNN round operands to TF32 (or to f16 with "
           "allow_conversion), below f32 accuracy; set DNNX_ALLOW_TF32=1 to admit it";
  }
  return {};
}

std::vector<Candidate> list_candidates(Runtime& runtime, const RnnDesc& desc, Direction direction);

// A candidate of `algo` and `math` before support is asked (Note [cudnn rnn candidates]).
Candidate candidate_of(const AlgoName& algo, const MathName& math, Direction direction) {
  Candidate c;
  c.algo = algo.algo;
  c.math = math.math;
  c.info.id = detail::cat("cudnn:rnn:", algo.name, ":", math.name);
  c.info.name = detail::cat("cuDNN RNN ", algo.name, " algorithm, ", math.name, " math");
  c.info.notes = {"rnn", algo.name, math.name};
  if (math.math != CUDNN_FMA_MATH) c.info.notes.emplace_back("tensor_cores");
  if (algo.algo != CUDNN_RNN_ALGO_STANDARD) c.info.notes.emplace_back("persistent");
  // cuDNN documents no bitwise guarantee for its backward passes.
  c.info.deterministic = !is_backward(direction);
  if (direction != Direction::fwd) c.info.saved_state_format = c.info.id;
  return c;
}

// Note [cudnn rnn dropout]: every layer's candidates, combined by id.
std::vector<Candidate> list_layered(Runtime& runtime, const RnnDesc& desc, Direction direction) {
  const std::string common = desc_reason(desc);
  std::vector<std::vector<Candidate>> per_layer;
  if (common.empty()) {
    for (std::int64_t l = 0; l < desc.layers; ++l)
      per_layer.push_back(list_candidates(runtime, layer_desc(desc, l), direction));
  }
  std::vector<Candidate> list;
  for (const AlgoName& algo : algos) {
    for (const MathName& math : maths) {
      Candidate c = candidate_of(algo, math, direction);
      c.info.name += ", layer by layer with dnnx's dropout masks";
      c.info.notes.emplace_back("layer_by_layer");
      std::string reason = common;
      for (std::size_t l = 0; l < per_layer.size() && reason.empty(); ++l) {
        const auto found =
            std::find_if(per_layer[l].begin(), per_layer[l].end(),
                         [&](const Candidate& one) { return one.info.id == c.info.id; });
        if (found == per_layer[l].end()) {
          reason = detail::cat("layer ", l, " lists no ", c.info.id);
        } else if (!found->info.supported) {
          reason = detail::cat("layer ", l,
                               " (run alone, Note [cudnn rnn dropout]): ", found->info.reason);
        } else {
          c.layers.push_back(*found);
        }
      }
      c.info.supported = reason.empty();
      c.info.reason = std::move(reason);
      if (c.info.supported) {
        const LayeredLayout layout(desc, direction, c.layers);
        c.workspace = layout.work_bytes;
        c.reserve = layout.bytes;
        c.info.workspace_bytes = c.workspace;
        if (direction == Direction::fwd_training) c.info.saved_state_bytes = c.reserve;
        for (const Candidate& one : c.layers) {
          if (one.io == Io::packed) {
            c.info.notes.emplace_back("packed_io");
            break;
          }
        }
      } else {
        c.layers.clear();
      }
      list.push_back(std::move(c));
    }
  }
  for (std::size_t i = 0; i < list.size(); ++i) list[i].info.priority = static_cast<int>(i);
  return list;
}

std::vector<Candidate> list_candidates(Runtime& runtime, const RnnDesc& desc, Direction direction) {
  if (layered(desc, direction)) return list_layered(runtime, desc, direction);
  const std::string common = desc_reason(desc);
  const std::vector<std::int32_t> full(static_cast<std::size_t>(desc.batch),
                                       static_cast<std::int32_t>(desc.seq_length));
  const cudnnForwardMode_t mode =
      direction == Direction::fwd ? CUDNN_FWD_MODE_INFERENCE : CUDNN_FWD_MODE_TRAINING;
  std::vector<Candidate> list;
  for (const AlgoName& algo : algos) {
    for (const MathName& math : maths) {
      Candidate c = candidate_of(algo, math, direction);
      std::string reason = common;
      if (reason.empty()) reason = math_reason(desc, math.math, runtime.allow_tf32());
      if (reason.empty() && desc.variable_lengths && algo.algo != CUDNN_RNN_ALGO_STANDARD) {
        // cuDNN sizes these plans for variable lengths, and then its forward refuses them with
        // CUDNN_STATUS_NOT_SUPPORTED: they are listed as unsupported instead.
        reason =
            "persistent algorithms take sequences of one length only (cudnnRNNForward "
            "answers CUDNN_STATUS_NOT_SUPPORTED for variable lengths)";
      }
      if (reason.empty()) {
        Descriptors d;
        std::string padded = d.set(runtime.handle(), desc, algo.algo, math.math, Io::padded, full);
        auto sizes = [&](std::string& problem) {
          if (!problem.empty()) return;
          cudnnStatus_t status = cudnnGetRNNTempSpaceSizes(runtime.handle(), d.rnn.get(), mode,
                                                           d.x.get(), &c.workspace, &c.reserve);
          if (status != CUDNN_STATUS_SUCCESS && algo.algo == CUDNN_RNN_ALGO_PERSIST_DYNAMIC) {
            // The dynamic algorithm may need its kernels compiled before cuDNN sizes them.
            status =
                cudnnBuildRNNDynamic(runtime.handle(), d.rnn.get(), static_cast<int>(desc.batch));
            if (status == CUDNN_STATUS_SUCCESS) {
              status = cudnnGetRNNTempSpaceSizes(runtime.handle(), d.rnn.get(), mode, d.x.get(),
                                                 &c.workspace, &c.reserve);
            }
          }
          if (status != CUDNN_STATUS_SUCCESS) {
            problem = detail::cat("cudnnGetRNNTempSpaceSizes failed: ", status_name(status));
            if (const std::string message = last_cudnn_message(); !message.empty())
              problem += detail::cat(" (", message, ")");
          }
        };
        sizes(padded);
        reason = padded;
        if (!padded.empty() && !desc.batch_first && !desc.variable_lengths) {
          std::string packed =
              d.set(runtime.handle(), desc, algo.algo, math.math, Io::packed, full);
          sizes(packed);
          if (packed.empty()) {
            c.io = Io::packed;
            reason.clear();
          } else {
            reason = detail::cat("padded I/O: ", padded, "; packed I/O: ", packed);
          }
        } else if (!padded.empty()) {
          reason = detail::cat(padded, desc.variable_lengths ? " (variable lengths need padded I/O)"
                                                             : " (batch_first needs padded I/O)");
        }
      }
      c.info.supported = reason.empty();
      c.info.reason = std::move(reason);
      if (c.info.supported) {
        c.info.workspace_bytes = c.workspace;
        if (direction == Direction::fwd_training) c.info.saved_state_bytes = c.reserve;
        if (c.io == Io::packed) c.info.notes.emplace_back("packed_io");
      } else {
        c.workspace = c.reserve = 0;
      }
      list.push_back(std::move(c));
    }
  }
  for (std::size_t i = 0; i < list.size(); ++i) list[i].info.priority = static_cast<int>(i);
  return list;
}

// A run of bytes copied between dnnx's flat weights (first: the byte offset in dnnx's layout) and
// cuDNN's weight space (second: the byte offset there).
using Segment = kernels::segments::Segment;

class Plan final : public detail::LayerPlanBase<RnnArgs> {
 public:
  Plan(std::shared_ptr<Runtime> runtime, const RnnDesc& desc, Direction direction,
       const Candidate& candidate)
      : LayerPlanBase(candidate.info, context_of(desc, direction, candidate.info.id)),
        runtime_(std::move(runtime)),
        desc_(desc),
        direction_(direction),
        candidate_(candidate),
        full_lengths_(static_cast<std::size_t>(desc.batch),
                      static_cast<std::int32_t>(desc.seq_length)) {
    runtime_->make_current();
    if (!candidate.layers.empty()) {
      // Note [cudnn rnn dropout]: a plan per layer.
      layout_ = LayeredLayout(desc, direction, candidate.layers);
      for (std::size_t l = 0; l < candidate.layers.size(); ++l) {
        layer_plans_.push_back(
            std::make_unique<Plan>(runtime_, layer_desc(desc, static_cast<std::int64_t>(l)),
                                   direction, candidate.layers[l]));
      }
      workspace_ = layout_.work_bytes;
      reserve_ = layout_.bytes;
      info_.workspace_bytes = workspace_;
      if (direction == Direction::fwd_training) info_.saved_state_bytes = reserve_;
      for (const auto& plan : layer_plans_) {
        if (plan->info_.has_note("weights_converted")) {
          info_.notes.emplace_back("weights_converted");
          break;
        }
      }
      return;
    }
    const cudnnHandle_t handle = runtime_->handle();
    if (const std::string problem =
            d_.set(handle, desc, candidate.algo, candidate.math, candidate.io, full_lengths_);
        !problem.empty()) {
      detail::raise(ErrorKind::BackendFailure, problem, context_);
    }
    if (candidate.algo == CUDNN_RNN_ALGO_PERSIST_DYNAMIC) {
      DNNX_CUDNN_CHECK(cudnnBuildRNNDynamic(handle, d_.rnn.get(), static_cast<int>(desc.batch)),
                       context_, "compiling the persist_dynamic plan (cudnnBuildRNNDynamic)");
    }
    const cudnnForwardMode_t mode =
        direction == Direction::fwd ? CUDNN_FWD_MODE_INFERENCE : CUDNN_FWD_MODE_TRAINING;
    DNNX_CUDNN_CHECK(
        cudnnGetRNNTempSpaceSizes(handle, d_.rnn.get(), mode, d_.x.get(), &workspace_, &reserve_),
        context_, "asking for the workspace and reserve sizes");
    info_.workspace_bytes = workspace_;
    if (direction == Direction::fwd_training) info_.saved_state_bytes = reserve_;
    map_weights(handle);
    lengths_device_ = std::make_unique<Storage>(runtime_->allocator(),
                                                full_lengths_.size() * sizeof(std::int32_t));
    DNNX_CUDNN_CHECK(cudaMemcpyAsync(lengths_device_->data(), full_lengths_.data(),
                                     full_lengths_.size() * sizeof(std::int32_t),
                                     cudaMemcpyHostToDevice, runtime_->stream()),
                     context_, "copying the sequence lengths to the device");
    // The copy reads full_lengths_, a member: done before any call can change it (none does).
  }

  void execute(const RnnArgs& args, detail::Workspace workspace) override {
    runtime_->make_current();
    DNNX_ASSERT(workspace.bytes >= workspace_ || workspace_ == 0);
    if (!layer_plans_.empty()) {
      execute_layered(args, static_cast<std::byte*>(workspace.data));
      return;
    }
    run(args, workspace.data, direction_ == Direction::fwd ? nullptr : reserve_of(args));
  }

 private:
  // The memory of one call: every pointer its launches read or write.
  struct Bound {
    const void* src = nullptr;
    const void* user_weights = nullptr;  // the caller's weights (diff_weights for bwd_weights)
    const void* weights = nullptr;       // what cuDNN reads: the caller's or weight_space_
    const void* hx = nullptr;
    const void* cx = nullptr;
    void* dst = nullptr;  // written by the forwards, read by the backwards
    void* hy = nullptr;
    void* cy = nullptr;
    const void* diff_dst = nullptr;
    const void* diff_hy = nullptr;
    const void* diff_cy = nullptr;
    void* diff_src = nullptr;
    std::size_t diff_src_bytes = 0;
    void* diff_hx = nullptr;
    void* diff_cx = nullptr;
    void* diff_weights = nullptr;  // cuDNN's: the caller's or diff_space_
    void* work = nullptr;
    void* reserve = nullptr;
    bool accumulate = false;
    bool convert = false;  // the weights go into weight_space_ first
  };

  // One cuDNN call on `work` (workspace_ bytes) and the reserve space `reserve` (reserve_ bytes;
  // null for the inference forward). Note [rnn graph replay]: with every sequence at full length
  // the call's launches (weight conversion, memsets, the cuDNN call) replay as a CUDA graph on
  // the same memory; with variable lengths the data descriptors change with the call's lengths,
  // which a graph would not follow, so they run directly. A call that converts and one that
  // reuses the converted weights (Note [rnn weights version]) are different graphs.
  void run(const RnnArgs& args, void* work, void* reserve) {
    set_lengths(args);
    const Bound b = bind(args, work, reserve);
    // The weight space holds what it held before only once the call is queued.
    if (b.convert) converted_ = {};
    if (desc_.variable_lengths) {
      launch(b);
    } else {
      replay_.run(
          runtime_->settings(), runtime_->stream(),
          {b.src, b.user_weights, b.hx, b.cx, b.dst, b.hy, b.cy, b.diff_dst, b.diff_hy, b.diff_cy,
           b.diff_src, b.diff_hx, b.diff_cx, b.diff_weights, b.work, b.reserve,
           b.accumulate ? this : nullptr, b.convert ? weight_space_.get() : nullptr},
          [&] { launch(b); }, context_);
    }
    if (b.convert) converted_ = {b.user_weights, args.weights_version};
  }

  Bound bind(const RnnArgs& args, void* work, void* reserve) const {
    Bound b;
    b.work = work;
    b.reserve = reserve;
    b.src = data_of(args.src, "src", context_);
    b.hx = args.hx != nullptr ? data_of(args.hx, "hx", context_) : nullptr;
    b.cx = args.cx != nullptr ? data_of(args.cx, "cx", context_) : nullptr;
    if (direction_ == Direction::bwd_weights) {
      b.user_weights = data_of(args.diff_weights, "diff_weights", context_);
      b.diff_weights = identity_ ? const_cast<void*>(b.user_weights) : diff_space_->data();
      b.accumulate = args.accumulate;
      b.dst = data_of(args.dst, "dst", context_);
      return b;
    }
    b.user_weights = data_of(args.weights, "weights", context_);
    // cudnnRNNBackwardWeights_v8 reads no weights: nothing to convert for it.
    b.weights = identity_ ? b.user_weights : weight_space_->data();
    b.convert = !identity_ &&
                (args.weights_version == 0 || converted_.version == 0 ||
                 converted_.from != b.user_weights || converted_.version != args.weights_version);
    if (direction_ == Direction::bwd_data) {
      b.dst = data_of(args.dst, "dst", context_);
      b.diff_dst = data_of(args.diff_dst, "diff_dst", context_);
      b.diff_src = data_of(args.diff_src, "diff_src", context_);
      b.diff_src_bytes = args.diff_src->span_bytes();
      b.diff_hy = args.diff_hy != nullptr ? data_of(args.diff_hy, "diff_hy", context_) : nullptr;
      b.diff_cy = args.diff_cy != nullptr ? data_of(args.diff_cy, "diff_cy", context_) : nullptr;
      b.diff_hx = args.diff_hx != nullptr ? data_of(args.diff_hx, "diff_hx", context_) : nullptr;
      b.diff_cx = args.diff_cx != nullptr ? data_of(args.diff_cx, "diff_cx", context_) : nullptr;
      return b;
    }
    b.dst = data_of(args.dst, "dst", context_);
    b.hy = args.hy != nullptr ? data_of(args.hy, "hy", context_) : nullptr;
    b.cy = args.cy != nullptr ? data_of(args.cy, "cy", context_) : nullptr;
    return b;
  }

  // Queues the call's work on the runtime's stream.
  void launch(const Bound& b) {
    const cudnnHandle_t handle = runtime_->handle();
    const cudaStream_t stream = runtime_->stream();
    if (b.convert) copy_segments(const_cast<void*>(b.user_weights), weight_space_->data(), true);
    const std::size_t reserve_bytes = direction_ == Direction::fwd ? 0 : reserve_;
    const cudnnTensorDescriptor_t h = d_.h.get();
    switch (direction_) {
      case Direction::fwd:
      case Direction::fwd_training:
        DNNX_CUDNN_CHECK(
            cudnnRNNForward(
                handle, d_.rnn.get(),
                direction_ == Direction::fwd ? CUDNN_FWD_MODE_INFERENCE : CUDNN_FWD_MODE_TRAINING,
                lengths(), d_.x.get(), b.src, d_.y.get(), b.dst, h, b.hx, b.hy, h, b.cx, b.cy,
                weight_bytes_, b.weights, workspace_, b.work, reserve_bytes, b.reserve),
            context_, "running cudnnRNNForward");
        return;
      case Direction::bwd_data: {
        if (desc_.variable_lengths) {
          // diff_src past a sequence's end is 0 (include/dnnx/ops/rnn.hpp), whatever cuDNN leaves.
          DNNX_CUDNN_CHECK(cudaMemsetAsync(b.diff_src, 0, b.diff_src_bytes, stream), context_,
                           "clearing diff_src");
        }
        DNNX_CUDNN_CHECK(
            cudnnRNNBackwardData_v8(handle, d_.rnn.get(), lengths(), d_.y.get(), b.dst, b.diff_dst,
                                    d_.x.get(), b.diff_src, h, b.hx, b.diff_hy, b.diff_hx, h, b.cx,
                                    b.diff_cy, b.diff_cx, weight_bytes_, b.weights, workspace_,
                                    b.work, reserve_bytes, b.reserve),
            context_, "running cudnnRNNBackwardData_v8");
        return;
      }
      case Direction::bwd_weights: {
        // cudnnRNNBackwardWeights_v8 takes CUDNN_WGRAD_MODE_ADD only (SET answers
        // CUDNN_STATUS_NOT_SUPPORTED): overwriting is adding to zeros.
        if (b.accumulate) {
          if (!identity_) copy_segments(const_cast<void*>(b.user_weights), b.diff_weights, true);
        } else {
          DNNX_CUDNN_CHECK(cudaMemsetAsync(b.diff_weights, 0, weight_bytes_, stream), context_,
                           "clearing diff_weights");
        }
        DNNX_CUDNN_CHECK(cudnnRNNBackwardWeights_v8(
                             handle, d_.rnn.get(), CUDNN_WGRAD_MODE_ADD, lengths(), d_.x.get(),
                             b.src, h, b.hx, d_.y.get(), b.dst, weight_bytes_, b.diff_weights,
                             workspace_, b.work, reserve_bytes, b.reserve),
                         context_, "running cudnnRNNBackwardWeights_v8");
        if (!identity_) copy_segments(const_cast<void*>(b.user_weights), b.diff_weights, false);
        return;
      }
    }
  }

  // Note [cudnn rnn dropout]: the layers one after the other, dnnx's masks between them.
  void execute_layered(const RnnArgs& args, std::byte* work) {
    auto* state = static_cast<std::byte*>(reserve_of(args));
    auto* masks = reinterpret_cast<std::uint32_t*>(state + layout_.masks);
    const cudaStream_t stream = runtime_->stream();
    const std::int64_t L = desc_.layers, T = desc_.seq_length, N = desc_.batch;
    const std::int64_t C = desc_.directions() * desc_.hidden_size;
    const std::size_t element = size_of(desc_.dtype);
    const float scale = 1.0f / (1.0f - desc_.dropout);
    const kernels::rnn::Element kind = desc_.dtype == DType::f16    ? kernels::rnn::Element::f16
                                       : desc_.dtype == DType::bf16 ? kernels::rnn::Element::bf16
                                                                    : kernels::rnn::Element::f32;
    const Device device = Device::cuda(runtime_->device());
    auto at = [](const Tensor* tensor, std::size_t bytes) {
      return static_cast<std::byte*>(tensor->data()) + bytes;
    };
    auto view = [&](void* data, const Dims& dims) {
      return Tensor::view(data, dims, desc_.dtype, Layout::channels_first, device);
    };
    // Multiplies boundary b's values (T, N, C in the data layout) by its mask and scale.
    auto mask = [&](const void* from, void* to, std::int64_t b) {
      DNNX_CUDNN_CHECK(kernels::rnn::apply_mask(kind, from, to, masks, b * T * N * C, T, N, C,
                                                desc_.batch_first, scale, stream),
                       context_, "launching the rnn dropout kernel (Note [cudnn rnn dropout])");
    };
    if (direction_ == Direction::fwd_training) {
      DNNX_CUDNN_CHECK(kernels::rnn::draw_masks(masks, desc_.dropout_draws(), desc_.dropout,
                                                args.seed, args.offset, stream),
                       context_, "launching the rnn dropout mask kernel");
    }
    // A slice of a caller's tensor (a layer's weights, its part of a state) that is not at a
    // multiple of 256 bytes goes to cuDNN through staging region `region` of the workspace
    // (cuDNN wants tensors at least 4-byte aligned, f16 included): copied in when `in`, and back
    // after the layer's call when `out`. A layer's copies in go in one launch before its call,
    // its copies back in one after.
    using kernels::segments::Copy;
    std::vector<Copy> copy_in, copy_back;
    auto flush = [&](std::vector<Copy>& copies) {
      DNNX_ASSERT(copies.size() <= static_cast<std::size_t>(kernels::segments::max_copies));
      DNNX_CUDNN_CHECK(
          kernels::segments::copy_list(copies.data(), static_cast<int>(copies.size()), stream),
          context_, "launching the staging copies (Note [cudnn rnn dropout])");
      copies.clear();
    };
    auto stage = [&](std::size_t region, std::byte* user, std::size_t bytes, bool in,
                     bool out) -> std::byte* {
      if (reinterpret_cast<std::uintptr_t>(user) % 256 == 0) return user;
      std::byte* staged = work + layout_.staging[region];
      if (in) copy_in.push_back({user, staged, bytes});
      if (out) copy_back.push_back({staged, user, bytes});
      return staged;
    };
    // The tensors of layer l's call, kept alive while it runs.
    struct LayerTensors {
      Tensor src, weights, hx, cx, dst, hy, cy, diff_dst, diff_hy, diff_cy, diff_src, diff_hx,
          diff_cx, diff_weights;
    };
    const bool backward = is_backward(direction_);
    for (std::int64_t step = 0; step < L; ++step) {
      const std::int64_t l = backward ? L - 1 - step : step;
      const auto i = static_cast<std::size_t>(l);
      const bool last = l == L - 1;
      Plan& plan = *layer_plans_[i];
      const RnnDesc& ld = plan.desc_;
      LayerTensors x;
      RnnArgs a;
      a.lengths = args.lengths;
      a.accumulate = args.accumulate;
      a.seed = args.seed;
      a.offset = args.offset;
      a.weights_version = args.weights_version;
      const std::size_t weights_at =
          static_cast<std::size_t>(desc_.weight_offset(l, 0, RnnWeight::w_ih)) * element;
      const Dims weight_dims{ld.weights_count()};
      const std::size_t weight_bytes = static_cast<std::size_t>(ld.weights_count()) * element;
      // cuDNN reads no weights in its backward w.r.t. the weights; a layer plan that converts
      // the weights reads the caller's slice at any alignment (Note [segment copies]).
      x.weights = view(direction_ == Direction::bwd_weights || !plan.identity_
                           ? at(args.weights, weights_at)
                           : stage(0, at(args.weights, weights_at), weight_bytes, true, false),
                       weight_dims);
      a.weights = &x.weights;
      // Layer l's {D, N, H} slice of a {layers * D, N, H} state, or none.
      const std::size_t part_bytes = static_cast<std::size_t>(ld.state_dims().product()) * element;
      const std::size_t part_at = static_cast<std::size_t>(l) * part_bytes;
      auto part = [&](const Tensor* whole, Tensor& out, std::size_t region, bool input) -> Tensor* {
        if (whole == nullptr) return nullptr;
        out = view(stage(region, at(whole, part_at), part_bytes, input, !input), ld.state_dims());
        return &out;
      };
      a.hx = part(args.hx, x.hx, 1, true);
      a.cx = part(args.cx, x.cx, 2, true);
      if (l == 0) {
        a.src = args.src;
      } else {
        x.src = view(state + layout_.input[i], ld.src_dims());
        a.src = &x.src;
      }
      if (last) {
        a.dst = args.dst;
      } else {
        x.dst = view(state + layout_.output[i], ld.dst_dims());
        a.dst = &x.dst;
      }
      auto run_layer = [&](const RnnArgs& layer_args) {
        flush(copy_in);
        plan.run(layer_args, work, state + layout_.reserve[i]);
      };
      switch (direction_) {
        case Direction::fwd:
        case Direction::fwd_training:
          a.hy = part(args.hy, x.hy, 3, false);
          a.cy = part(args.cy, x.cy, 4, false);
          run_layer(a);
          if (!last) mask(state + layout_.output[i], state + layout_.input[i + 1], l);
          break;
        case Direction::bwd_data: {
          if (last) {
            a.diff_dst = args.diff_dst;
          } else {
            x.diff_dst = view(work + layout_.between[(i + 1) % 2], ld.dst_dims());
            a.diff_dst = &x.diff_dst;
          }
          if (l == 0) {
            a.diff_src = args.diff_src;
          } else {
            x.diff_src = view(work + layout_.between[i % 2], ld.src_dims());
            a.diff_src = &x.diff_src;
          }
          a.diff_hy = part(args.diff_hy, x.diff_hy, 3, true);
          a.diff_cy = part(args.diff_cy, x.diff_cy, 4, true);
          a.diff_hx = part(args.diff_hx, x.diff_hx, 5, false);
          a.diff_cx = part(args.diff_cx, x.diff_cx, 6, false);
          run_layer(a);
          // The gradient w.r.t. layer l's input becomes that w.r.t. layer l-1's output.
          if (l > 0) mask(a.diff_src->data(), a.diff_src->data(), l - 1);
          break;
        }
        case Direction::bwd_weights:
          x.diff_weights = view(plan.identity_ ? stage(0, at(args.diff_weights, weights_at),
                                                       weight_bytes, args.accumulate, true)
                                               : at(args.diff_weights, weights_at),
                                weight_dims);
          a.diff_weights = &x.diff_weights;
          run_layer(a);
          break;
      }
      flush(copy_back);
    }
  }

  const std::int32_t* lengths() const {
    return static_cast<const std::int32_t*>(lengths_device_->data());
  }

  // With variable lengths, the data descriptors and the device copy of the call's lengths.
  void set_lengths(const RnnArgs& args) {
    if (!desc_.variable_lengths) return;
    DNNX_ASSERT(args.lengths != nullptr);
    call_lengths_ = detail::sequence_lengths(desc_, args);
    for (const std::int32_t length : call_lengths_) {
      if (length < 1 || length > desc_.seq_length)
        detail::raise(
            ErrorKind::InvalidArgument,
            detail::cat("lengths holds ", length, "; each must be in [1, ", desc_.seq_length, "]"),
            context_);
    }
    if (const std::string problem = d_.set_data(desc_, call_lengths_); !problem.empty())
      detail::raise(ErrorKind::BackendFailure, problem, context_);
    // From pageable memory: the call returns once the bytes are staged, so call_lengths_ may
    // change on the next call while this copy is still queued.
    DNNX_CUDNN_CHECK(cudaMemcpyAsync(lengths_device_->data(), call_lengths_.data(),
                                     call_lengths_.size() * sizeof(std::int32_t),
                                     cudaMemcpyHostToDevice, runtime_->stream()),
                     context_, "copying the sequence lengths to the device");
  }

  // The reserve space: the state's buffer when it holds this candidate's format, a buffer of the
  // plan's own when a selection times a backward on the op layer's scratch state (Note [timing an
  // rnn backward]).
  void* reserve_of(const RnnArgs& args) {
    const SavedState* state = args.state;
    if (state == nullptr)
      detail::raise(ErrorKind::InvalidArgument, "the call has no SavedState", context_);
    if (is_backward(direction_) && state->format() != info_.saved_state_format &&
        state->producer() == detail::rnn_scratch_producer) {
      if (!timing_reserve_ && reserve_ > 0)
        timing_reserve_ = std::make_unique<Storage>(runtime_->allocator(), reserve_);
      return timing_reserve_ ? timing_reserve_->data() : nullptr;
    }
    if (state->format() != info_.saved_state_format) {
      detail::raise(ErrorKind::InvalidArgument,
                    detail::cat("the SavedState holds format '", state->format(), "' (from '",
                                state->producer(), "'), not '", info_.saved_state_format,
                                "': a backward runs the algorithm of the training forward that "
                                "filled its state"),
                    context_);
    }
    if (state->bytes() < reserve_ ||
        (reserve_ > 0 &&
         (state->data() == nullptr || state->device() != Device::cuda(runtime_->device())))) {
      detail::raise(ErrorKind::InvalidArgument,
                    detail::cat("the SavedState holds ", state->bytes(), " bytes on ",
                                to_string(state->device()), "; this candidate's reserve space is ",
                                reserve_, " bytes on cuda:", runtime_->device()),
                    context_);
    }
    return state->data();
  }

  // Note [cudnn rnn weights]: where each matrix lies in cuDNN's weight space.
  void map_weights(cudnnHandle_t handle) {
    DNNX_CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(handle, d_.rnn.get(), &weight_bytes_), context_,
                     "asking for the weight space size");
    const std::size_t element = size_of(desc_.dtype);
    const auto flat_bytes = static_cast<std::size_t>(desc_.weights_count()) * element;
    // A real buffer for the address queries: it becomes the plan's weight space when converting.
    weight_space_ = std::make_unique<Storage>(runtime_->allocator(), weight_bytes_);
    auto* base = static_cast<std::byte*>(weight_space_->data());
    TensorDescriptor matrix = make_tensor_descriptor(context_);
    TensorDescriptor bias = make_tensor_descriptor(context_);
    const std::int64_t G = desc_.gates(), H = desc_.hidden_size;
    std::vector<Segment> segments;
    bool identity = weight_bytes_ == flat_bytes;
    for (std::int64_t layer = 0; layer < desc_.layers; ++layer) {
      const std::int64_t in = desc_.layer_input_size(layer);
      for (std::int64_t dir = 0; dir < desc_.directions(); ++dir) {
        const auto pseudo = static_cast<std::int32_t>(layer * desc_.directions() + dir);
        for (std::int64_t id = 0; id < 2 * G; ++id) {
          void* m = nullptr;
          void* b = nullptr;
          DNNX_CUDNN_CHECK(cudnnGetRNNWeightParams(handle, d_.rnn.get(), pseudo, weight_bytes_,
                                                   base, static_cast<std::int32_t>(id),
                                                   matrix.get(), &m, bias.get(), &b),
                           context_, "asking where the weights lie (cudnnGetRNNWeightParams)");
          const bool input = id < G;
          const std::int64_t gate = input ? id : id - G;
          const std::int64_t cols = input ? in : H;
          const std::int64_t matrix_at =
              desc_.weight_offset(layer, dir, input ? RnnWeight::w_ih : RnnWeight::w_hh) +
              gate * H * cols;
          add_segment(segments, identity, m, base, matrix_at, H * cols);
          if (desc_.bias) {
            const std::int64_t bias_at =
                desc_.weight_offset(layer, dir, input ? RnnWeight::b_ih : RnnWeight::b_hh) +
                gate * H;
            add_segment(segments, identity, b, base, bias_at, H);
          }
        }
      }
    }
    identity_ = identity;
    if (identity_) {
      weight_space_.reset();
    } else {
      info_.notes.emplace_back("weights_converted");
      // The address queries are done, and cuDNN's backward w.r.t. the weights reads no weights.
      if (direction_ == Direction::bwd_weights) weight_space_.reset();
      runs_ = kernels::segments::merged(std::move(segments));
      if (runs_.size() > 1) {
        // The table the conversion kernel reads, on the device for the plan's life.
        table_ = kernels::segments::chunks(runs_);
        const std::size_t table_bytes = table_.size() * sizeof(Segment);
        table_device_ = std::make_unique<Storage>(runtime_->allocator(), table_bytes);
        DNNX_CUDNN_CHECK(cudaMemcpyAsync(table_device_->data(), table_.data(), table_bytes,
                                         cudaMemcpyHostToDevice, runtime_->stream()),
                         context_, "copying the weight conversion's table to the device");
      }
      if (direction_ == Direction::bwd_weights) {
        diff_space_ = std::make_unique<Storage>(runtime_->allocator(), weight_bytes_);
        DNNX_CUDNN_CHECK(cudaMemsetAsync(diff_space_->data(), 0, weight_bytes_, runtime_->stream()),
                         context_, "clearing the gradient space");
      }
    }
  }

  // Records that `count` elements at `flat_offset` of the flat weights lie at `address` of the
  // weight space starting at `base`; identity becomes false where the byte offsets differ.
  void add_segment(std::vector<Segment>& segments, bool& identity, void* address,
                   const std::byte* base, std::int64_t flat_offset, std::int64_t count) const {
    if (address == nullptr) {
      detail::raise(ErrorKind::BackendFailure,
                    "cudnnGetRNNWeightParams gave no address for a weight matrix or bias",
                    context_);
    }
    const std::size_t element = size_of(desc_.dtype);
    const auto space = static_cast<std::size_t>(static_cast<const std::byte*>(address) - base);
    const auto flat = static_cast<std::size_t>(flat_offset) * element;
    const auto bytes = static_cast<std::size_t>(count) * element;
    if (space + bytes > weight_bytes_) {
      detail::raise(ErrorKind::BackendFailure,
                    detail::cat("cudnnGetRNNWeightParams placed ", bytes, " bytes at offset ",
                                space, " of a weight space of ", weight_bytes_, " bytes"),
                    context_);
    }
    if (space != flat) identity = false;
    segments.push_back({flat, space, bytes});
  }

  // Copies the weights from dnnx's layout into cuDNN's (to_space) or back: one copy for a single
  // run, else one launch of the segment kernel over the plan's table (Note [cudnn rnn weights]).
  void copy_segments(void* flat, void* space, bool to_space) const {
    const cudaStream_t stream = runtime_->stream();
    if (runs_.size() == 1) {
      const Segment& run = runs_.front();
      auto* f = static_cast<std::byte*>(flat) + run.first;
      auto* s = static_cast<std::byte*>(space) + run.second;
      DNNX_CUDNN_CHECK(cudaMemcpyAsync(to_space ? s : f, to_space ? f : s, run.bytes,
                                       cudaMemcpyDeviceToDevice, stream),
                       context_, "converting the weights (Note [cudnn rnn weights])");
      return;
    }
    DNNX_CUDNN_CHECK(kernels::segments::copy_table(
                         static_cast<const Segment*>(table_device_->data()),
                         static_cast<std::int64_t>(table_.size()), flat, space, to_space, stream),
                     context_, "launching the weight conversion kernel (Note [cudnn rnn weights])");
  }

  std::shared_ptr<Runtime> runtime_;  // first: outlives the buffers it allocated
  RnnDesc desc_;
  Direction direction_;
  Candidate candidate_;
  Descriptors d_;
  std::size_t workspace_ = 0;
  std::size_t reserve_ = 0;
  std::size_t weight_bytes_ = 0;
  bool identity_ = false;
  // When converting: the runs of bytes between the two layouts (merged), and with more than one,
  // the kernel's table (the runs in chunks) on the host and the device.
  std::vector<Segment> runs_;
  std::vector<Segment> table_;
  std::unique_ptr<Storage> table_device_;
  std::unique_ptr<Storage> weight_space_;    // cuDNN's layout, when converting (not bwd_weights)
  // What weight_space_ holds (Note [rnn weights version]): the caller's weights at `from` as
  // of `version`; version 0 when unknown.
  struct Converted {
    const void* from = nullptr;
    std::uint64_t version = 0;
  };
  Converted converted_;
  std::unique_ptr<Storage> diff_space_;      // bwd_weights, when converting
  std::unique_ptr<Storage> timing_reserve_;  // Note [timing an rnn backward]
  std::unique_ptr<Storage> lengths_device_;
  LaunchGraph replay_;  // Note [rnn graph replay]
  std::vector<std::int32_t> full_lengths_;
  std::vector<std::int32_t> call_lengths_;
  // Note [cudnn rnn dropout]: the layers' plans and where their parts lie.
  std::vector<std::unique_ptr<Plan>> layer_plans_;
  LayeredLayout layout_;
};

class CudnnRnn final : public LayerBackend<RnnDesc, RnnArgs, Candidate> {
 public:
  explicit CudnnRnn(std::shared_ptr<Runtime> runtime)
      : RuntimeLayerBackend(BackendKind::cudnn, std::move(runtime)) {}

 private:
  std::vector<Candidate> enumerate(const RnnDesc& desc, Direction direction) override {
    runtime_->make_current();
    return list_candidates(*runtime_, desc, direction);
  }
  std::shared_ptr<detail::OpPlan<RnnArgs>> build(const RnnDesc& desc, Direction direction,
                                                 const Candidate& candidate) override {
    return std::make_shared<Plan>(runtime_, desc, direction, candidate);
  }
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::rnn>> make_rnn_backend(std::shared_ptr<Runtime> runtime,
                                                                   const detail::OpBackends&) {
  return std::make_unique<CudnnRnn>(std::move(runtime));
}

}  // namespace dnnx::cudnn
