#pragma once
// Network shape lists for `dnnx tune`: the built-in ones are bench/shapes/*.txt, embedded at build
// time so that an installed dnnx needs no source tree.

#include <dnnx/dnnx.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dnnx::cli {

/// One distinct convolution layer of a network.
struct ModelLayer {
  std::string name;
  Dims src;                          ///< C x spatial... (the batch is left out)
  Dims weights;                      ///< O x C/groups x kernel...
  std::vector<std::int64_t> stride;  ///< one entry or one per spatial dim
  std::vector<std::int64_t> pad;     ///< symmetric; one entry or one per spatial dim
  std::vector<std::int64_t> dilation{1};  ///< one entry or one per spatial dim (dilation=)
  std::int64_t count = 1;            ///< times the shape occurs in the network
  bool bench = false;                ///< one of the benchmark shapes

  /// The desc at `batch`; groups follow from the channel counts (C / weights' C/groups).
  ConvDesc desc(std::int64_t batch, DType dtype, Layout layout) const;
};

struct Model {
  std::string name;
  std::vector<ModelLayer> layers;
};

/// Names of the built-in models.
std::vector<std::string> builtin_models();
/// A built-in model by name, or else a shapes file at that path; throws UsageError naming --model.
Model load_model(std::string_view name_or_path);
/// Parses a shapes file: per line `name src weights stride pad count [options] [tags]`, '#'
/// comments (Note [shapes file lines]); `batch=N` lines are skipped (the batch is --batch).
/// Throws UsageError naming `source` and the line.
Model parse_model(std::string_view text, std::string_view name, std::string_view source);

}  // namespace dnnx::cli
