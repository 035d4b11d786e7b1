#pragma once
/// \file
/// Elementwise activations (identity, relu, clipped relu, tanh, sigmoid, elu, swish), forward and
/// backward, in place or not (cudnn.torch's `inplace=true`). Semantics are PyTorch's: relu,
/// hardtanh(0, ceiling), tanh, sigmoid, elu(alpha), silu, and the identity.

#include <dnnx/algo.hpp>
#include <dnnx/context.hpp>
#include <dnnx/tensor.hpp>

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx {

/// The function an activation applies to every element x.
enum class ActivationKind : std::uint8_t {
  identity,      ///< x
  relu,          ///< max(x, 0)
  clipped_relu,  ///< min(max(x, 0), ceiling) (PyTorch's hardtanh(x, 0, ceiling))
  tanh,          ///< tanh(x)
  sigmoid,       ///< 1 / (1 + exp(-x))
  elu,           ///< x if x > 0, else alpha * (exp(x) - 1)
  swish,         ///< x * sigmoid(x) (swish with beta 1, PyTorch's silu)
};
/// "identity", "relu", "clipped_relu", "tanh", "sigmoid", "elu", "swish".
std::string_view to_string(ActivationKind kind);
/// Parses the names above (and "silu" for swish); throws InvalidArgument listing them.
ActivationKind parse_activation_kind(std::string_view text);

/// Which forward tensors the backward pass is given: what the forward pass kept. After an
/// in-place forward (dst written over src) only dst is left.
enum class ActivationSaved : std::uint8_t {
  src_and_dst,  ///< both the forward input and output
  dst,          ///< the forward output only (in-place forward)
  src,          ///< the forward input only
};
/// "src_and_dst", "dst", "src".
std::string_view to_string(ActivationSaved saved);
/// Parses the names above (and "both" for src_and_dst); throws InvalidArgument listing them.
ActivationSaved parse_activation_saved(std::string_view text);

/// Whether the backward pass of `kind` with `alpha` can be computed from the forward output alone:
/// relu, clipped relu, tanh, sigmoid, identity, and elu with alpha >= 0 (its sign of dst tells the
/// branches apart). Swish needs src.
bool activation_bwd_from_dst(ActivationKind kind, double alpha);
/// Whether the backward pass of `kind` can be computed from the forward input (every kind).
constexpr bool activation_bwd_from_src(ActivationKind) { return true; }

/// What an activation computes. Plain data: comparable, hashable, printable; the cache key, the
/// error context and the test-case name.
struct ActivationDesc {
  ActivationKind kind = ActivationKind::relu;  ///< the function
  double alpha = 1.0;        ///< elu: the scale of the negative branch (finite); ignored otherwise
  double ceiling = 6.0;      ///< clipped_relu: the upper clip (finite, > 0); ignored otherwise
  Dims dims;                 ///< logical dims of src and dst: N, C, spatial... (rank 1 to 5)
  DType dtype = DType::f32;  ///< of every tensor of the op
  Layout layout = Layout::channels_first;  ///< memory order of every tensor of the op
  /// Which forward tensors activation_bwd is given (and the candidates may read). Forward ignores
  /// it.
  ActivationSaved saved = ActivationSaved::src_and_dst;

  /// A desc of `kind` over `dims` (alpha 1, ceiling 6, both forward tensors saved).
  static ActivationDesc from_dims(ActivationKind kind, const Dims& dims, DType dtype = DType::f32,
                                  Layout layout = Layout::channels_first);
  /// elu with `alpha`.
  static ActivationDesc elu(const Dims& dims, double alpha = 1.0, DType dtype = DType::f32,
                            Layout layout = Layout::channels_first);
  /// clipped relu with `ceiling` (relu6 for 6).
  static ActivationDesc clipped_relu(const Dims& dims, double ceiling = 6.0,
                                     DType dtype = DType::f32,
                                     Layout layout = Layout::channels_first);

  /// Throws InvalidArgument naming the first bad field and its value.
  void validate() const;
  /// Number of elements of src (and of every other tensor of the op).
  std::int64_t numel() const { return dims.product(); }
  /// Whether backward can run with what `saved` keeps (some candidate may then be supported).
  bool bwd_computable() const;

  /// The `dnnx` CLI line reproducing this case, e.g.
  /// `dnnx profile act --input 64x256x56x56 --kind relu --dtype f16 --layout nhwc --direction fwd`.
  std::string repro(Direction direction = Direction::fwd) const;
  /// Canonical one-line text of every field that changes the computation (the cache-key part).
  std::string key() const;
  std::size_t hash() const;
  bool operator==(const ActivationDesc&) const = default;
};

std::ostream& operator<<(std::ostream& out, const ActivationDesc& desc);

/// dst = f(src). `dst` may be `src` itself, or any tensor over exactly the same memory with the
/// same strides (in place); any other overlap is an InvalidArgument. Returns the choice that ran.
std::shared_ptr<const Choice> activation_fwd(Context& context, const ActivationDesc& desc,
                                             const Tensor& src, Tensor& dst);
/// diff_src = diff_dst * f'(x). `src` and `dst` are the forward input and output: exactly those
/// desc.saved names must be given, the other must be null (after an in-place forward pass
/// desc.saved = dst and src = nullptr). `diff_src` may be `diff_dst` (in place). Candidates that
/// need a forward tensor desc.saved does not keep are unsupported. Returns the choice that ran.
std::shared_ptr<const Choice> activation_bwd(Context& context, const ActivationDesc& desc,
                                             const Tensor* src, const Tensor* dst,
                                             const Tensor& diff_dst, Tensor& diff_src);

/// Every candidate of the context's backend for (desc, direction) with support status, workspace
/// and determinism; nothing is run. The backward pass is Direction::bwd_data.
std::vector<AlgoInfo> activation_list(Context& context, const ActivationDesc& desc,
                                      Direction direction);
/// The choice the context's policy makes for (desc, direction) (may time candidates; cached).
std::shared_ptr<const Choice> activation_select(Context& context, const ActivationDesc& desc,
                                                Direction direction);
/// Times every candidate on scratch tensors and returns the table.
ProfileResult activation_profile(Context& context, const ActivationDesc& desc, Direction direction);

}  // namespace dnnx
