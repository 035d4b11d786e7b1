#pragma once
/// \file
/// What a forward call keeps for its backward.

#include <dnnx/algo.hpp>
#include <dnnx/tensor.hpp>

#include <cstddef>
#include <memory>
#include <string>

namespace dnnx {

namespace detail {
struct SavedStateWriter;
}

/// A buffer a forward call fills for its backward (a recurrent layer's reserve space, a dropout
/// mask): memory on the context's device, sized by the candidate that ran, with the record of
/// what made it. Pass the same object to the forward, which fills it, and then to the backward,
/// which reads it. The backward refuses a state no forward filled, or one another op or desc made
/// (InvalidArgument), and runs only candidates that read the layout the forward's candidate wrote
/// (AlgoInfo::saved_state_format). A later forward with the same object replaces the contents,
/// reusing the buffer when it is large enough. Copies share the buffer.
class SavedState {
 public:
  SavedState() = default;

  /// True until a forward has filled it.
  bool empty() const { return producer_.empty(); }
  /// The op whose forward filled it.
  OpKind op() const { return op_; }
  /// That forward's direction (fwd or fwd_training).
  Direction direction() const { return direction_; }
  /// That forward's desc (its key(): the canonical text of every field).
  const std::string& desc() const { return desc_; }
  /// The id of the candidate that filled it.
  const std::string& producer() const { return producer_; }
  /// The layout of its contents, as the producer's AlgoInfo::saved_state_format names it.
  const std::string& format() const { return format_; }
  /// Bytes in use (the producer's AlgoInfo::saved_state_bytes).
  std::size_t bytes() const { return bytes_; }
  /// The buffer (null while empty, or when the producer keeps 0 bytes).
  void* data() const { return storage_ ? storage_->data() : nullptr; }
  /// Where the buffer lives.
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }

 private:
  friend struct detail::SavedStateWriter;

  OpKind op_ = OpKind::conv;
  Direction direction_ = Direction::fwd;
  std::string desc_;
  std::string producer_;
  std::string format_;
  std::size_t bytes_ = 0;
  std::shared_ptr<Storage> storage_;
};

}  // namespace dnnx
