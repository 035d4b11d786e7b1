#pragma once
// The tensors of one recurrent-layer call (Note [op dispatch]); the op layer has validated them
// against the desc: dims, dtype, density, device, lengths, no overlap of an output with anything
// else, and the SavedState (a training forward has one; a backward's was filled by a training
// forward of the same desc).

#include <dnnx/ops/rnn.hpp>
#include <dnnx/saved_state.hpp>
#include <dnnx/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dnnx::detail {

/// Which members are set depends on the direction (optional ones may be null in any direction):
///   fwd:          src, weights, [hx, cx], [lengths] -> dst, [hy, cy]
///   fwd_training: the same, and state (filled), seed and offset (the dropout's Philox blocks)
///   bwd_data:     src, weights, [hx, cx], [lengths], dst, diff_dst, [diff_hy, diff_cy], state
///                 -> diff_src, [diff_hx, diff_cx]
///   bwd_weights:  src, weights, [hx, cx], [lengths], dst, state, accumulate -> diff_weights
/// lengths is set exactly when desc.variable_lengths (a host i32 tensor of N entries, each in
/// [1, T]).
struct RnnArgs {
  const Tensor* src = nullptr;
  const Tensor* weights = nullptr;
  const Tensor* hx = nullptr;
  const Tensor* cx = nullptr;
  const Tensor* lengths = nullptr;
  Tensor* dst = nullptr;  ///< written by the forwards, read by the backwards
  Tensor* hy = nullptr;
  Tensor* cy = nullptr;
  const Tensor* diff_dst = nullptr;
  const Tensor* diff_hy = nullptr;
  const Tensor* diff_cy = nullptr;
  Tensor* diff_src = nullptr;
  Tensor* diff_hx = nullptr;
  Tensor* diff_cx = nullptr;
  Tensor* diff_weights = nullptr;
  bool accumulate = false;  ///< bwd_weights: add to diff_weights instead of overwriting it
  /// fwd_training: filled (sized by the dispatcher for the candidate that runs); backwards: read,
  /// and for candidates that keep backward-data intermediates there (cuDNN), written by bwd_data.
  SavedState* state = nullptr;
  std::uint64_t seed = 0;    ///< fwd_training: the generator's seed
  std::uint64_t offset = 0;  ///< fwd_training: the first Philox block of the call
  /// fwd, fwd_training, bwd_data: RnnForward::weights_version (0: unknown).
  std::uint64_t weights_version = 0;
};

/// The lengths of a call: lengths' entries when set, else T for every sequence.
inline std::vector<std::int32_t> sequence_lengths(const RnnDesc& desc, const RnnArgs& args) {
  std::vector<std::int32_t> out(static_cast<std::size_t>(desc.batch),
                                static_cast<std::int32_t>(desc.seq_length));
  if (args.lengths == nullptr) return out;
  const auto* data = static_cast<const std::int32_t*>(args.lengths->data());
  const std::int64_t stride = args.lengths->strides()[0];
  for (std::int64_t n = 0; n < desc.batch; ++n) out[static_cast<std::size_t>(n)] = data[n * stride];
  return out;
}

// Note [rnn reference state]
// The reference candidate's SavedState (format rnn_reference_format) holds, each part starting at
// a multiple of 8 bytes:
//   a u64 flag, 1 once a backward w.r.t. the data has stored its gradients (0 after the forward);
//   the dropout masks of Note [rnn dropout] as bits (bit i % 32 of 32-bit word i / 32 is 1 when
//   element i is kept), (dropout_draws() + 31) / 32 words;
//   diff_dst as f64 in logical order ({T, N, D*H} or {N, T, D*H}), then diff_hy and, for lstm,
//   diff_cy as f64 ({layers * D, N, H}), zeros where the call had none.
// The backward w.r.t. the weights has no diff_dst of its own: like cuDNN's, it reads what the
// backward w.r.t. the data left in the state, and refuses a state where none ran.

/// The saved-state format of the reference candidate (Note [rnn reference state]).
inline constexpr const char* rnn_reference_format = "dnnx:rnn_reference";

/// Where the parts of the reference state start (bytes) and its size.
struct RnnReferenceLayout {
  std::size_t masks = 8;
  std::size_t diff_dst = 0;
  std::size_t diff_hy = 0;
  std::size_t diff_cy = 0;
  std::size_t bytes = 0;

  explicit RnnReferenceLayout(const RnnDesc& desc) {
    const auto round8 = [](std::size_t n) { return (n + 7) / 8 * 8; };
    const auto mask_bytes = static_cast<std::size_t>((desc.dropout_draws() + 31) / 32) * 4;
    const auto dst = static_cast<std::size_t>(desc.dst_dims().product());
    const auto state = static_cast<std::size_t>(desc.state_dims().product());
    diff_dst = masks + round8(mask_bytes);
    diff_hy = diff_dst + dst * 8;
    diff_cy = diff_hy + state * 8;
    bytes = diff_cy + (desc.cell == RnnCell::lstm ? state * 8 : 0);
  }
};

/// The contents of the op layer's scratch reference state (Note [timing an rnn backward]): the
/// flag set, every mask bit set, zero gradients.
inline std::vector<unsigned char> rnn_reference_scratch(const RnnDesc& desc) {
  const RnnReferenceLayout layout(desc);
  std::vector<unsigned char> bytes(layout.bytes, 0);
  bytes[0] = 1;
  for (std::size_t i = layout.masks; i < layout.diff_dst; ++i) bytes[i] = 0xff;
  return bytes;
}

// Note [timing an rnn backward]
// A backward reads what its own training forward wrote; a selection or profile that times a
// backward without one (on scratch tensors) hands it a state the op layer filled in the reference
// format, producer rnn_scratch_producer (rnn_reference_scratch). Candidates keeping another format
// (cuDNN's reserve space) then run on a buffer of their own of the right size, its contents
// arbitrary: the timing is that of the real call, the results are not used. Any other state of a
// foreign format is refused (InvalidArgument).

/// The producer id of the op layer's scratch state (Note [timing an rnn backward]).
inline constexpr const char* rnn_scratch_producer = "scratch";

}  // namespace dnnx::detail
