// The cudnn backend's matrix multiply: cuBLASLt's algorithms, each configuration a candidate, and
// cuBLAS's cublasGemmEx.
//
// Note [cudnn matmul candidates]
// In priority order:
//   cublaslt:a<id>:t<tile>:s<stages>:k<splitk>:r<red>:w<swizzle>:c<custom>:i<inner>:x<cluster>
//       every configuration cublasLtMatmulAlgoGetHeuristic returns for the problem (up to 32, in
//       its order: its first one that dnnx supports is the heuristic pick), then every algorithm
//       cublasLtMatmulAlgoGetIds names (up to 64) not listed yet: in its default configuration
//       when cublasLtMatmulAlgoCheck accepts it, else in the one a heuristic search limited to the
//       algorithm (CUBLASLT_SEARCH_LIMITED_BY_ALGO_ID) finds, else listed unsupported with
//       cuBLASLt's statuses. The id is the configuration's attributes
//       (CUBLASLT_ALGO_CONFIG_*), the same for the same problem, library and GPU in every process,
//       so a persisted choice finds its algorithm again. A suffix names a fused epilogue: ":bias"
//       (CUBLASLT_EPILOGUE_BIAS, fwd), ":bgrada" / ":bgradb" (the bias gradient of bwd_weights);
//       without one, a desc with bias gets it from dnnx's kernels (kernels/matmul.cu) after the
//       GEMM. A desc with an activation lists only its fused candidates here (Note [matmul
//       activation candidates] in src/core/matmul_activation.hpp adds the others): fwd with
//       ":relu", ":relu_bias", ":gelu" or ":gelu_bias" (CUBLASLT_EPILOGUE_RELU, ..._GELU_BIAS),
//       fwd_training with gelu ":gelu_aux" / ":gelu_aux_bias" (Note [matmul gelu aux]).
//   cublas:gemm_ex
//       cublasGemmStridedBatchedEx with CUBLAS_GEMM_DEFAULT (cuBLAS picks its kernel), bias by
//       dnnx's kernels.
// f32 runs in CUBLAS_COMPUTE_32F, or CUBLAS_COMPUTE_32F_FAST_TF32 when DNNX_ALLOW_TF32 allows
// (Runtime::allow_tf32, part of the backend's fingerprint); f16 and bf16 in CUBLAS_COMPUTE_32F.
// Alpha and beta are f32. A configuration whose split-K partial sums would be added in f16 or bf16
// (CUBLASLT_REDUCTION_SCHEME_INPLACE reduces in the output type, OUTPUT_TYPE stores the partials in
// it) is never asked for when the output is f16 or bf16: dnnx accumulates in f32.
//
// Note [row-major matmul]
// dnnx's matrices are row-major and cuBLAS's column-major: a row-major r x c matrix is the
// column-major c x r matrix of its transpose, same bytes. So row-major D = X Y is computed as the
// column-major D^T = Y^T X^T, operands swapped, and each direction becomes one GEMM (gemm_of):
//   fwd          dst^T = op(b)^T op(a)^T                     (M = n, N = m, K = k)
//   bwd_data     diff_a^T = op(b) diff_dst^T                 (M = k, N = m, K = n)
//                diff_a = diff_dst op(b)^T if transpose_a    (M = m, N = k, K = n)
//   bwd_weights  diff_b^T = diff_dst^T op(a)                 (M = n, N = k, K = m)
//                diff_b = op(a)^T diff_dst if transpose_b    (M = k, N = n, K = m)
// Products of a batch are one strided-batched GEMM; a shared a or b has batch stride 0. When b
// is shared and a not transposed, a, dst and diff_dst are dense [batch * m, *] matrices and the
// batch folds into one GEMM of batch * m rows, which bwd_weights needs: its shared diff_b sums
// over the batch, which is then the GEMM's own reduction. With a transposed a cannot fold, and
// bwd_weights runs one GEMM per product accumulating into diff_b (beta, then 1); a shared a's
// gradient (bwd_data with broadcast_a) is summed the same way, since dst's rows of different
// products are not one dense matrix beside each other. In f16 and bf16 these accumulate into f32
// scratch, stored to the gradient once at the end (kernels::matmul::store_accumulator), so the
// sum over the batch is f32 too.
//
// Note [matmul bias]
// fwd adds bias[j] to column j of dst: row j of the column-major dst^T, which is what
// CUBLASLT_EPILOGUE_BIAS adds (a vector as long as D's rows, added to alpha * AB + beta * C, as the
// desc says). diff_bias is the column sums of diff_dst over every row of every product: the
// reduction over the GEMM's K of its diff_dst operand, which is what CUBLASLT_EPILOGUE_BGRADA
// (diff_dst is cuBLAS's A, when !transpose_b) or BGRADB (its B) writes. The epilogue overwrites
// diff_bias and sums one product, so the fused bias gradient is offered for beta 0 and a single
// GEMM (batch 1, or folded) only, and for alpha 1 (what a linear layer uses; cuBLASLt does not say
// whether alpha scales the gradient). Every other candidate runs kernels::matmul::add_bias or
// bias_gradient (f32 sums in a fixed order) after its GEMM.
//
// Note [matmul determinism]
// cuBLAS documents every routine as bitwise reproducible from run to run on one GPU model and
// library version while one stream uses the handle; dnnx's handle allows no atomics
// (CUBLAS_ATOMICS_NOT_ALLOWED), so cublas:gemm_ex is deterministic. A cuBLASLt configuration
// without split-K (reduction scheme NONE), or whose splits are added in place in a fixed order
// (INPLACE: counters in the workspace serialize them), is deterministic; one whose partial sums
// are reduced by a separate step (COMPUTE_TYPE, OUTPUT_TYPE) is not claimed to be, since cuBLASLt
// does not document that step's order. dnnx's bias kernels add in a fixed order. The GPU test runs
// every claim twice and compares bits.
//
// Note [matmul workspace]
// cuBLASLt is offered up to 32 MiB (CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) and each candidate
// reports what its configuration needs; when no configuration of the heuristic's needs none, the
// heuristic is asked again with no workspace, so a zero-workspace GEMM is listed. cublas:gemm_ex
// gets the workspace cuBLAS recommends (32 MiB from compute capability 9.0, 4 MiB before) through
// cublasSetWorkspace, never cuBLAS's own pool. The f32 accumulator of Note [row-major matmul] and
// the bias gradient's partial sums follow the GEMM's workspace, each 256-byte aligned.
//
// Note [matmul alignment]
// The heuristic is told that every matrix is 16-byte aligned
// (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*), what dnnx's allocator gives and what vectorized kernels
// need, except an operand of the per-product loop of Note [row-major matmul]: only what its
// per-product offset keeps. A plan checks each pointer against its configuration's own requirement
// (CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_*) and raises BackendFailure on a misaligned one, which makes
// the op layer fall back to the next candidate; cublas:gemm_ex takes any alignment.
//
// Note [split-K variants]
// cuBLASLt's heuristic gives each configuration it proposes one split-K count, and the count is
// what decides a product of small output and long reduction, such as the weight gradient of a
// 1x1 convolution (MobileNetV2's b5.project in f16: a 64 x 192 result summed over 25,088 rows).
// There PyTorch's cuDNN ran cuBLASLt's kernel of tile 64x32, cluster 1x2 faster than dnnx, which
// listed that kernel only with the heuristic's 17 splits; 16 splits closed most of the gap
// (docs/benchmarks.md, *Split-K variants*). So, as the knob search does for cuDNN's engines (Note
// [knob search] in conv_engine.cpp, the same setting), the configurations the heuristic proposes
// with split-K are seeds of variants that change the count alone: the ladder 2, 3, 4, 6, 8, 12, 16,
// 24, ... within half to twice the seed's count, nearest first, up to DNNX_CUDNN_KNOB_VARIANTS per
// seed, those cublasLtMatmulAlgoCheck accepts (the others are dropped, not listed: dnnx made them
// up). DNNX_CUDNN_KNOB_SEARCH=top takes the first four seeds that differ in more than the count,
// `all` every one, `off` none. Variants come after every other cuBLASLt candidate and name their
// seed (AlgoInfo::variant_of), so the search runs none whose seed was far slower than the best
// (Note [pruning variants] in src/tune/select.cpp). The backend's fingerprint says "+splitk" after
// the knob search's setting.

#include "backends/cudnn/kernels/matmul.hpp"

#include "backends/cudnn/check.hpp"
#include "backends/cudnn/handles.hpp"
#include "backends/cudnn/launch_graph.hpp"
#include "backends/cudnn/layer_common.hpp"
#include "backends/cudnn/layers.hpp"
#include "core/check.hpp"
#include "core/dropout_args.hpp"
#include "core/matmul_activation.hpp"
#include "core/matmul_args.hpp"
#include "core/strings.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace dnnx::cudnn {
namespace {

constexpr const char* gemm_ex_id = "cublas:gemm_ex";
constexpr const char* lt_prefix = "cublaslt";
constexpr std::size_t lt_workspace_offer = std::size_t{32} << 20;  // Note [matmul workspace]
constexpr int heuristic_requests = 32;
constexpr int extra_algo_limit = 64;
constexpr std::size_t scratch_alignment = 256;
constexpr std::uint32_t assumed_alignment = 16;  // Note [matmul alignment]

ErrorContext context_of(const MatmulDesc& desc, Direction direction, std::string implementation) {
  return detail::op_context(BackendKind::cudnn, desc, direction, std::move(implementation));
}

std::size_t aligned(std::size_t bytes) {
  return (bytes + scratch_alignment - 1) / scratch_alignment * scratch_alignment;
}

std::size_t element_bytes(DType dtype) { return dtype == DType::f32 ? 4 : 2; }

cudaDataType_t data_type_of(DType dtype) {
  switch (dtype) {
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

kernels::matmul::Element element_of(DType dtype) {
  switch (dtype) {
    case DType::f16: return kernels::matmul::Element::f16;
    case DType::bf16: return kernels::matmul::Element::bf16;
    default: return kernels::matmul::Element::f32;
  }
}

// ---- the GEMM of a (desc, direction): Note [row-major matmul] ----------------------------------

// The tensors a GEMM reads.
enum class Source { a, b, diff_dst };

// One input of the GEMM as cuBLAS sees it: the stored column-major rows x cols matrix (leading
// dimension ld) that `op` transposes or not.
struct Operand {
  Source source = Source::a;
  cublasOperation_t op = CUBLAS_OP_N;
  std::int64_t rows = 1, cols = 1, ld = 1;
  std::int64_t batch_stride = 0;  // elements between products of the batched layout (0: shared)
  std::int64_t loop_stride = 0;   // elements between the products of the per-product loop
};

struct Gemm {
  Operand l, r;                      // cuBLAS's A and B
  std::int64_t m = 1, n = 1, k = 1;  // D is m x n (leading dimension m), K = k
  std::int64_t batch = 1;            // products in the batched layout
  std::int64_t out_batch_stride = 0;
  std::int64_t loops = 1;         // GEMMs run one after the other into one output
  bool f32_accumulator = false;   // the loop accumulates into f32 scratch
  bool bias_from_l = false;       // bwd_weights: diff_dst is l (BGRADA), else r (BGRADB)
  std::int64_t rows = 1;          // rows of dst / diff_dst over the whole batch
  std::int64_t out_elements = 1;  // elements of the direction's output
};

// The column-major view of a row-major matrix of `rows` x `cols` with leading batch stride.
Operand stored(Source source, std::int64_t rows, std::int64_t cols, bool transpose,
               std::int64_t batch_stride) {
  Operand o;
  o.source = source;
  o.op = transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  o.rows = cols;  // a row-major rows x cols matrix is the column-major cols x rows one
  o.cols = rows;
  o.ld = cols;
  o.batch_stride = batch_stride;
  return o;
}

// Note [row-major matmul]: the products as one GEMM each, one after the other, summed into the
// one gradient of a shared operand.
void loop_into_one_output(Gemm& g, DType dtype) {
  g.loops = g.batch;
  g.batch = 1;
  g.out_batch_stride = 0;
  for (Operand* o : {&g.l, &g.r}) {
    o->loop_stride = o->batch_stride;
    o->batch_stride = 0;
  }
  g.f32_accumulator = dtype != DType::f32;
}

Gemm gemm_of(const MatmulDesc& d, Direction direction) {
  const bool fold = d.broadcast_b && !d.transpose_a;
  const std::int64_t rows = fold ? d.batch * d.m : d.m;
  const std::int64_t products = fold ? 1 : d.batch;
  const std::int64_t a_stride = d.broadcast_a ? 0 : d.m * d.k;
  const std::int64_t b_stride = d.broadcast_b ? 0 : d.k * d.n;
  const std::int64_t g_stride = d.m * d.n;
  // op(a) is `rows` x k: a is stored rows x k, or k x rows when transpose_a; op(b) is k x n.
  const auto a_rows = d.transpose_a ? d.k : rows;
  const auto a_cols = d.transpose_a ? rows : d.k;
  const auto b_rows = d.transpose_b ? d.n : d.k;
  const auto b_cols = d.transpose_b ? d.k : d.n;
  Gemm g;
  g.batch = products;
  g.rows = d.batch * d.m;
  switch (direction) {
    case Direction::fwd:  // dst^T (n x rows) = op(b)^T op(a)^T
    case Direction::fwd_training:
      g.l = stored(Source::b, b_rows, b_cols, d.transpose_b, b_stride);
      g.r = stored(Source::a, a_rows, a_cols, d.transpose_a, a_stride);
      g.m = d.n, g.n = rows, g.k = d.k;
      g.out_batch_stride = g_stride;
      g.out_elements = d.batch * d.m * d.n;
      break;
    case Direction::bwd_data:
      if (!d.transpose_a) {  // diff_a^T (k x rows) = op(b) diff_dst^T
        g.l = stored(Source::b, b_rows, b_cols, !d.transpose_b, b_stride);
        g.r = stored(Source::diff_dst, rows, d.n, false, g_stride);
        g.m = d.k, g.n = rows, g.k = d.n;
      } else {  // diff_a (m x k, stored k x m) = diff_dst op(b)^T
        g.l = stored(Source::diff_dst, rows, d.n, true, g_stride);
        g.r = stored(Source::b, b_rows, b_cols, d.transpose_b, b_stride);
        g.m = d.m, g.n = d.k, g.k = d.n;
      }
      g.out_batch_stride = a_stride;
      g.out_elements = (d.broadcast_a ? 1 : d.batch) * d.m * d.k;
      if (d.broadcast_a && products > 1) loop_into_one_output(g, d.dtype);
      break;
    case Direction::bwd_weights:
      if (!d.transpose_b) {  // diff_b^T (n x k) = diff_dst^T op(a)
        g.l = stored(Source::diff_dst, rows, d.n, false, g_stride);
        g.r = stored(Source::a, a_rows, a_cols, !d.transpose_a, a_stride);
        g.m = d.n, g.n = d.k, g.k = rows;
        g.bias_from_l = true;
      } else {  // diff_b^T (k x n, stored n x k) = op(a)^T diff_dst
        g.l = stored(Source::a, a_rows, a_cols, d.transpose_a, a_stride);
        g.r = stored(Source::diff_dst, rows, d.n, true, g_stride);
        g.m = d.k, g.n = d.n, g.k = rows;
      }
      g.out_batch_stride = b_stride;
      g.out_elements = (d.broadcast_b ? 1 : d.batch) * d.k * d.n;
      if (d.broadcast_b && products > 1) loop_into_one_output(g, d.dtype);
      break;
  }
  return g;
}

// ---- candidates --------------------------------------------------------------------------------

enum class Engine { cublaslt, gemm_ex };

// How a desc with bias gets it (fwd) or diff_bias (bwd_weights).
enum class BiasWork { none, fused, kernel };

// The workspace of one candidate (Note [matmul workspace]): the GEMM's own, then the f32
// accumulator, then the bias gradient's partial sums.
struct Scratch {
  std::size_t gemm = 0;
  std::size_t accumulator_offset = 0;
  std::size_t bias_offset = 0;
  std::size_t total = 0;
};

Scratch scratch_of(const Gemm& g, std::size_t gemm_bytes, std::size_t bias_bytes) {
  Scratch s;
  s.gemm = gemm_bytes;
  s.accumulator_offset = aligned(gemm_bytes);
  const std::size_t accumulator =
      g.f32_accumulator ? static_cast<std::size_t>(g.out_elements) * sizeof(float) : 0;
  s.bias_offset = s.accumulator_offset + aligned(accumulator);
  s.total = bias_bytes > 0 ? s.bias_offset + bias_bytes
                           : (accumulator > 0 ? s.accumulator_offset + accumulator : gemm_bytes);
  return s;
}

struct Candidate {
  // A candidate listed with the reason dnnx does not run it (info.reason set).
  static Candidate unsupported(AlgoInfo info) {
    Candidate candidate;
    candidate.info = std::move(info);
    return candidate;
  }

  AlgoInfo info;
  Engine engine = Engine::cublaslt;
  cublasLtMatmulAlgo_t algo{};  // cublaslt only
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  BiasWork bias = BiasWork::none;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  Gemm gemm;
  Scratch scratch;
};

// What every GEMM of a (desc, direction) shares.
struct Problem {
  Gemm gemm;
  cudaDataType_t ab = CUDA_R_32F;   // a, b and diff_dst
  cudaDataType_t out = CUDA_R_32F;  // C and D (f32 for the accumulator)
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  bool tf32 = false;
};

Problem problem_of(const MatmulDesc& desc, Direction direction, bool allow_tf32) {
  Problem p;
  p.gemm = gemm_of(desc, direction);
  p.ab = data_type_of(desc.dtype);
  p.out = p.gemm.f32_accumulator ? CUDA_R_32F : p.ab;
  p.tf32 = desc.dtype == DType::f32 && allow_tf32;
  p.compute = p.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  return p;
}

const char* epilogue_suffix(cublasLtEpilogue_t epilogue) {
  switch (epilogue) {
    case CUBLASLT_EPILOGUE_RELU: return ":relu";
    case CUBLASLT_EPILOGUE_RELU_BIAS: return ":relu_bias";
    case CUBLASLT_EPILOGUE_GELU: return ":gelu";
    case CUBLASLT_EPILOGUE_GELU_BIAS: return ":gelu_bias";
    case CUBLASLT_EPILOGUE_GELU_AUX: return ":gelu_aux";
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: return ":gelu_aux_bias";
    case CUBLASLT_EPILOGUE_BIAS: return ":bias";
    case CUBLASLT_EPILOGUE_BGRADA: return ":bgrada";
    case CUBLASLT_EPILOGUE_BGRADB: return ":bgradb";
    default: return "";
  }
}

const char* epilogue_name(cublasLtEpilogue_t epilogue) {
  switch (epilogue) {
    case CUBLASLT_EPILOGUE_RELU: return "CUBLASLT_EPILOGUE_RELU";
    case CUBLASLT_EPILOGUE_RELU_BIAS: return "CUBLASLT_EPILOGUE_RELU_BIAS";
    case CUBLASLT_EPILOGUE_GELU: return "CUBLASLT_EPILOGUE_GELU";
    case CUBLASLT_EPILOGUE_GELU_BIAS: return "CUBLASLT_EPILOGUE_GELU_BIAS";
    case CUBLASLT_EPILOGUE_GELU_AUX: return "CUBLASLT_EPILOGUE_GELU_AUX";
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: return "CUBLASLT_EPILOGUE_GELU_AUX_BIAS";
    case CUBLASLT_EPILOGUE_BIAS: return "CUBLASLT_EPILOGUE_BIAS";
    case CUBLASLT_EPILOGUE_BGRADA: return "CUBLASLT_EPILOGUE_BGRADA";
    case CUBLASLT_EPILOGUE_BGRADB: return "CUBLASLT_EPILOGUE_BGRADB";
    default: return "CUBLASLT_EPILOGUE_DEFAULT";
  }
}

const char* reduction_name(std::uint32_t scheme) {
  switch (scheme) {
    case CUBLASLT_REDUCTION_SCHEME_NONE: return "none";
    case CUBLASLT_REDUCTION_SCHEME_INPLACE: return "in place";
    case CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE: return "compute type";
    case CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE: return "output type";
    default: return "?";
  }
}

// The attributes that make up a configuration's id (Note [cudnn matmul candidates]).
struct Config {
  std::int32_t algo = 0;
  std::uint32_t tile = 0;
  std::uint32_t stages = 0;
  std::int32_t split_k = 1;
  std::uint32_t reduction = 0;
  std::uint32_t swizzle = 0;
  std::uint32_t custom = 0;
  std::uint16_t inner = 0;
  std::uint16_t cluster = 0;
  std::uint64_t numerics = 0;  // CUBLASLT_ALGO_CAP_NUMERICAL_IMPL_FLAGS (0 if unknown)
};

// A configuration attribute, left at its default when the library does not report it (an older
// cuBLASLt without the attribute): the id then shows the default, the same in every process.
template <typename T>
void read_config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attribute,
                 T& value) {
  std::size_t written = 0;
  T read{};
  if (!failed(
          cublasLtMatmulAlgoConfigGetAttribute(&algo, attribute, &read, sizeof(read), &written)))
    value = read;
}

Config config_of(const cublasLtMatmulAlgo_t& algo) {
  Config c;
  read_config(algo, CUBLASLT_ALGO_CONFIG_ID, c.algo);
  read_config(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, c.tile);
  read_config(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, c.stages);
  read_config(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, c.split_k);
  read_config(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, c.reduction);
  read_config(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, c.swizzle);
  read_config(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, c.custom);
  read_config(algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, c.inner);
  read_config(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, c.cluster);
  std::size_t written = 0;
  if (failed(cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_NUMERICAL_IMPL_FLAGS,
                                               &c.numerics, sizeof(c.numerics), &written)))
    c.numerics = 0;
  return c;
}

// Keeps [A-Za-z0-9_:+.-] of `text` (the id alphabet), dropping anything else.
std::string sanitized(const std::string& text) {
  std::string out;
  for (const char ch : text) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '_' || ch == ':' || ch == '+' || ch == '.' ||
                    ch == '-';
    if (ok) out += ch;
  }
  return out;
}

std::string lt_id(const Config& c, cublasLtEpilogue_t epilogue) {
  return sanitized(detail::cat(lt_prefix, ":a", c.algo, ":t", c.tile, ":s", c.stages, ":k",
                               c.split_k, ":r", c.reduction, ":w", c.swizzle, ":c", c.custom, ":i",
                               c.inner, ":x", c.cluster, epilogue_suffix(epilogue)));
}

// The configuration an id of lt_id() without an epilogue names (Note [matmul descriptions]);
// nullopt for any other text.
std::optional<Config> parse_lt_id(std::string_view id) {
  const std::vector<std::string> parts = detail::split(id, ':');
  constexpr std::string_view tags = "atskrwcix";  // lt_id()'s fields, in its order
  if (parts.size() != tags.size() + 1 || parts[0] != lt_prefix) return std::nullopt;
  std::array<std::int64_t, tags.size()> values{};
  for (std::size_t i = 0; i < tags.size(); ++i) {
    const std::string& part = parts[i + 1];
    if (part.size() < 2 || part[0] != tags[i]) return std::nullopt;
    const char* end = part.data() + part.size();
    const auto [ptr, error] = std::from_chars(part.data() + 1, end, values[i]);
    if (error != std::errc() || ptr != end) return std::nullopt;
  }
  const auto in_range = [](std::int64_t v, std::int64_t lo, std::int64_t hi) {
    return v >= lo && v <= hi;
  };
  constexpr std::int64_t i32 = INT32_MAX;
  constexpr std::int64_t u32 = UINT32_MAX;
  constexpr std::int64_t u16 = UINT16_MAX;
  if (!in_range(values[0], INT32_MIN, i32) || !in_range(values[3], INT32_MIN, i32) ||
      !in_range(values[7], 0, u16) || !in_range(values[8], 0, u16))
    return std::nullopt;
  for (const std::size_t i : {1, 2, 4, 5, 6}) {
    if (!in_range(values[i], 0, u32)) return std::nullopt;
  }
  Config c;
  c.algo = static_cast<std::int32_t>(values[0]);
  c.tile = static_cast<std::uint32_t>(values[1]);
  c.stages = static_cast<std::uint32_t>(values[2]);
  c.split_k = static_cast<std::int32_t>(values[3]);
  c.reduction = static_cast<std::uint32_t>(values[4]);
  c.swizzle = static_cast<std::uint32_t>(values[5]);
  c.custom = static_cast<std::uint32_t>(values[6]);
  c.inner = static_cast<std::uint16_t>(values[7]);
  c.cluster = static_cast<std::uint16_t>(values[8]);
  return c;
}

// Note [matmul determinism].
bool lt_deterministic(const Config& c) {
  return c.split_k <= 1 || c.reduction == CUBLASLT_REDUCTION_SCHEME_NONE ||
         c.reduction == CUBLASLT_REDUCTION_SCHEME_INPLACE;
}

void add_bias_notes(AlgoInfo& info, BiasWork bias, Direction direction) {
  const bool gradient = direction == Direction::bwd_weights;
  if (bias == BiasWork::fused)
    info.notes.emplace_back(gradient ? "fused_bias_gradient" : "fused_bias");
  if (bias == BiasWork::kernel)
    info.notes.emplace_back(gradient ? "bias_gradient_kernel" : "bias_kernel");
}

// ---- cuBLASLt descriptors ----------------------------------------------------------------------

template <typename T>
void set_desc(const MatmulDescriptor& desc, cublasLtMatmulDescAttributes_t attribute,
              const T& value, const ErrorContext& context) {
  DNNX_CUDNN_CHECK(cublasLtMatmulDescSetAttribute(desc.get(), attribute, &value, sizeof(value)),
                   context,
                   detail::cat("setting attribute ", static_cast<int>(attribute),
                               " of the cuBLASLt matmul descriptor"));
}

template <typename T>
void set_layout(const MatrixLayout& layout, cublasLtMatrixLayoutAttribute_t attribute,
                const T& value, const ErrorContext& context) {
  DNNX_CUDNN_CHECK(cublasLtMatrixLayoutSetAttribute(layout.get(), attribute, &value, sizeof(value)),
                   context,
                   detail::cat("setting attribute ", static_cast<int>(attribute),
                               " of a cuBLASLt matrix layout"));
}

template <typename T>
void set_preference(const MatmulPreference& preference,
                    cublasLtMatmulPreferenceAttributes_t attribute, const T& value,
                    const ErrorContext& context) {
  DNNX_CUDNN_CHECK(
      cublasLtMatmulPreferenceSetAttribute(preference.get(), attribute, &value, sizeof(value)),
      context,
      detail::cat("setting attribute ", static_cast<int>(attribute), " of a cuBLASLt preference"));
}

MatrixLayout layout_of(cudaDataType_t type, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                       std::int64_t batch, std::int64_t batch_stride, const ErrorContext& context) {
  MatrixLayout layout = make_matrix_layout(type, static_cast<std::uint64_t>(rows),
                                           static_cast<std::uint64_t>(cols), ld, context);
  if (batch > 1) {
    set_layout(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, static_cast<std::int32_t>(batch),
               context);
    set_layout(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, batch_stride, context);
  }
  return layout;
}

// Note [matmul gelu aux]
// CUBLASLT_EPILOGUE_GELU_AUX(_BIAS) writes the GELU's input, pre = alpha * AB + beta * C (+ bias),
// as a matrix shaped as D in D's type, with its own leading dimension and batch stride, both
// multiples of 8 elements (cublasLt.h, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD / _BATCH_STRIDE). D is
// dst^T (Note [row-major matmul]): n x (batch) m column-major, leading dimension n, which is
// Note [matmul aux]'s gelu state (pre row-major as dst) when the aux takes D's leading dimension
// n and batch stride m * n; both are multiples of 8 exactly when n is, so the fused training
// forward is offered for n % 8 == 0 only (else the +act candidates write the state). Its relu
// counterpart writes an opaque bit-mask (leading dimension a multiple of 128 bits) that only
// cuBLASLt's DRELU epilogues read; dnnx's relu state is its own mask, written from dst.
bool has_aux(cublasLtEpilogue_t epilogue) {
  return epilogue == CUBLASLT_EPILOGUE_GELU_AUX || epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}

// The descriptors of one cuBLASLt GEMM: the operation, cuBLAS's A (l), B (r) and D (also C).
struct LtProblem {
  MatmulDescriptor operation;
  MatrixLayout l, r, out;
};

LtProblem make_lt_problem(const Problem& p, cublasLtEpilogue_t epilogue,
                          const ErrorContext& context) {
  const Gemm& g = p.gemm;
  LtProblem lt;
  lt.operation = make_matmul_descriptor(p.compute, CUDA_R_32F, context);
  set_desc(lt.operation, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<std::int32_t>(g.l.op), context);
  set_desc(lt.operation, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<std::int32_t>(g.r.op), context);
  if (epilogue != CUBLASLT_EPILOGUE_DEFAULT)
    set_desc(lt.operation, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<std::uint32_t>(epilogue),
             context);
  if (has_aux(epilogue)) {
    // Note [matmul gelu aux]: pre laid out as D (dst^T, column-major, leading dimension n).
    set_desc(lt.operation, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, static_cast<std::int64_t>(g.m),
             context);
    if (g.batch > 1)
      set_desc(lt.operation, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE,
               static_cast<std::int64_t>(g.out_batch_stride), context);
  }
  lt.l = layout_of(p.ab, g.l.rows, g.l.cols, g.l.ld, g.batch, g.l.batch_stride, context);
  lt.r = layout_of(p.ab, g.r.rows, g.r.cols, g.r.ld, g.batch, g.r.batch_stride, context);
  lt.out = layout_of(p.out, g.m, g.n, g.m, g.batch, g.out_batch_stride, context);
  return lt;
}

// The largest power of two (at most `assumed_alignment`) dividing every pointer a looped operand
// takes: Note [matmul alignment].
std::uint32_t alignment_of(const Operand& o, std::size_t element) {
  std::uint32_t alignment = assumed_alignment;
  const auto step = static_cast<std::uint64_t>(o.loop_stride) * element;
  while (step != 0 && step % alignment != 0) alignment /= 2;
  return alignment;
}

MatmulPreference preference_of(const Problem& p, DType dtype, std::size_t workspace,
                               const ErrorContext& context) {
  MatmulPreference preference = make_matmul_preference(context);
  set_preference(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                 static_cast<std::uint64_t>(workspace), context);
  if (p.out != CUDA_R_32F) {
    // Note [cudnn matmul candidates]: split-K partial sums only in f32.
    set_preference(preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                   static_cast<std::uint32_t>(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE), context);
  }
  const std::size_t element = element_bytes(dtype);
  set_preference(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                 alignment_of(p.gemm.l, element), context);
  set_preference(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                 alignment_of(p.gemm.r, element), context);
  set_preference(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, assumed_alignment,
                 context);
  set_preference(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, assumed_alignment,
                 context);
  return preference;
}

// ---- plans -------------------------------------------------------------------------------------

// The pointers of one call.
struct Bound {
  const void* l = nullptr;
  const void* r = nullptr;
  void* out = nullptr;
  const void* bias = nullptr;      // fwd with bias
  const void* diff_dst = nullptr;  // bwd_weights: the bias gradient's input
  void* diff_bias = nullptr;       // bwd_weights with bias
  void* aux = nullptr;             // fwd_training: the state (Note [matmul gelu aux])
};

const void* source_of(Source source, const detail::MatmulArgs& args, const ErrorContext& context) {
  switch (source) {
    case Source::a: return data_of(args.a, "a", context);
    case Source::b: return data_of(args.b, "b", context);
    case Source::diff_dst: return data_of(args.diff_dst, "diff_dst", context);
  }
  return nullptr;
}

Bound bind(const detail::MatmulArgs& args, const MatmulDesc& desc, Direction direction,
           const Gemm& g, const ErrorContext& context) {
  Bound t;
  t.l = source_of(g.l.source, args, context);
  t.r = source_of(g.r.source, args, context);
  switch (direction) {
    case Direction::fwd:
    case Direction::fwd_training:
      t.out = data_of(args.dst, "dst", context);
      if (desc.bias) t.bias = data_of(args.bias, "bias", context);
      break;
    case Direction::bwd_data: t.out = data_of(args.diff_a, "diff_a", context); break;
    case Direction::bwd_weights:
      t.out = data_of(args.diff_b, "diff_b", context);
      if (desc.bias) {
        t.diff_dst = data_of(args.diff_dst, "diff_dst", context);
        t.diff_bias = data_of(args.diff_bias, "diff_bias", context);
      }
      break;
  }
  return t;
}

const void* advanced(const void* pointer, std::int64_t elements, std::size_t element) {
  return static_cast<const char*>(pointer) + elements * static_cast<std::int64_t>(element);
}

// What both engines' plans share: binding, the workspace split, the loop over products and the
// bias kernels around the GEMMs.
class MatmulPlan : public detail::LayerPlanBase<detail::MatmulArgs> {
 public:
  MatmulPlan(std::shared_ptr<Runtime> runtime, const MatmulDesc& desc, Direction direction,
             const Candidate& candidate)
      : LayerPlanBase(candidate.info, context_of(desc, direction, candidate.info.id)),
        runtime_(std::move(runtime)),
        desc_(desc),
        direction_(direction),
        gemm_(candidate.gemm),
        scratch_(candidate.scratch),
        bias_(candidate.bias),
        element_(element_bytes(desc.dtype)) {}

  void execute(const detail::MatmulArgs& args, detail::Workspace workspace) override {
    Bound t = bind(args, desc_, direction_, gemm_, context_);
    if (direction_ == Direction::fwd_training) {
      // A caller below the op layer may hand any state: checked before cuBLASLt writes it.
      const std::string problem = detail::mask_state_problem(
          args.state, detail::matmul_aux_format(desc_), detail::matmul_aux_bytes(desc_),
          Device::cuda(runtime_->device()));
      if (!problem.empty()) detail::raise(ErrorKind::InvalidArgument, problem, context_);
      t.aux = args.state->data();
    }
    detail::check_workspace_bytes(workspace.bytes, workspace.data, scratch_.total, context_);
    auto* base = static_cast<char*>(workspace.data);
    void* gemm_workspace = scratch_.gemm > 0 ? base : nullptr;
    float* accumulator = gemm_.f32_accumulator
                             ? reinterpret_cast<float*>(base + scratch_.accumulator_offset)
                             : nullptr;
    runtime_->make_current();
    void* partial = scratch_.total > scratch_.bias_offset ? base + scratch_.bias_offset : nullptr;
    auto launch = [&] {
      prepare(t);  // a replayed graph holds what it set
      void* out = accumulator != nullptr ? static_cast<void*>(accumulator) : t.out;
      for (std::int64_t p = 0; p < gemm_.loops; ++p) {
        // The first GEMM applies beta (none into the accumulator), the others add to it.
        const float beta = p > 0 ? 1.0f : (accumulator != nullptr ? 0.0f : desc_.beta);
        run_gemm(advanced(t.l, p * gemm_.l.loop_stride, element_),
                 advanced(t.r, p * gemm_.r.loop_stride, element_), beta, out, gemm_workspace);
      }
      const kernels::matmul::Element element = element_of(desc_.dtype);
      const cudaStream_t stream = runtime_->stream();
      if (accumulator != nullptr) {
        DNNX_CUDNN_CHECK(kernels::matmul::store_accumulator(element, gemm_.out_elements,
                                                            accumulator, desc_.beta, t.out, stream),
                         context_, "launching the kernel that stores diff_b");
      }
      if (bias_ != BiasWork::kernel) return;
      if (direction_ == Direction::fwd) {
        DNNX_CUDNN_CHECK(
            kernels::matmul::add_bias(element, gemm_.rows, desc_.n, t.bias, t.out, stream),
            context_, "launching the bias kernel");
      } else {
        DNNX_CUDNN_CHECK(kernels::matmul::bias_gradient(element, gemm_.rows, desc_.n, t.diff_dst,
                                                        desc_.beta, t.diff_bias, partial,
                                                        runtime_->facts().sm_count, stream),
                         context_, "launching the bias gradient kernel");
      }
    };
    // Note [graph replay]: a cuBLASLt call can take more host time than a small product's kernels
    // (MobileNetV2's last 1x1 bwd_weights: docs/benchmarks.md, "The timing loops' gate").
    replay_.run(runtime_->settings(), runtime_->stream(),
                {t.l, t.r, t.out, t.bias, t.diff_dst, t.diff_bias, t.aux, workspace.data}, launch,
                context_);
  }

 protected:
  // Engine state for a call (the fused epilogue's pointer, the handle's stream and workspace).
  virtual void prepare(const Bound& t) = 0;
  // One GEMM: out = alpha * op(l) op(r) + beta * out.
  virtual void run_gemm(const void* l, const void* r, float beta, void* out, void* workspace) = 0;

  std::shared_ptr<Runtime> runtime_;
  MatmulDesc desc_;
  Direction direction_;
  Gemm gemm_;
  Scratch scratch_;
  BiasWork bias_;
  std::size_t element_;
  LaunchGraph replay_;  // Note [graph replay]
};

class LtPlan final : public MatmulPlan {
 public:
  LtPlan(std::shared_ptr<Runtime> runtime, const MatmulDesc& desc, Direction direction,
         const Candidate& candidate)
      : MatmulPlan(std::move(runtime), desc, direction, candidate),
        algo_(candidate.algo),
        epilogue_(candidate.epilogue),
        handle_(runtime_->blas_lt()) {
    Problem p;
    p.gemm = candidate.gemm;
    p.ab = data_type_of(desc.dtype);
    p.out = p.gemm.f32_accumulator ? CUDA_R_32F : p.ab;
    p.compute = candidate.compute;
    runtime_->make_current();
    lt_ = make_lt_problem(p, epilogue_, context_);
    const std::array<cublasLtMatmulAlgoCapAttributes_t, 4> caps{
        CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_A_BYTES, CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_C_BYTES, CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_D_BYTES};
    for (std::size_t i = 0; i < caps.size(); ++i) {
      std::size_t written = 0;
      std::uint32_t value = 1;
      if (!failed(
              cublasLtMatmulAlgoCapGetAttribute(&algo_, caps[i], &value, sizeof(value), &written)))
        alignment_[i] = std::max<std::uint32_t>(value, 1);
    }
  }

 private:
  void prepare(const Bound& t) override {
    if (bias_ == BiasWork::fused) {
      const void* bias = direction_ == Direction::bwd_weights ? t.diff_bias : t.bias;
      set_desc(lt_.operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias, context_);
    }
    if (has_aux(epilogue_)) {
      DNNX_ASSERT(t.aux != nullptr);
      if (reinterpret_cast<std::uintptr_t>(t.aux) % assumed_alignment != 0) {
        detail::raise(ErrorKind::BackendFailure,
                      detail::cat("the GELU aux epilogue needs the state ", assumed_alignment,
                                  "-byte aligned; got address ", t.aux),
                      context_);
      }
      set_desc(lt_.operation, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, t.aux, context_);
    }
  }

  void check_alignment(const void* pointer, std::size_t which, const char* role) const {
    if (reinterpret_cast<std::uintptr_t>(pointer) % alignment_[which] != 0) {
      detail::raise(ErrorKind::BackendFailure,
                    detail::cat("this cuBLASLt configuration needs ", role, " ", alignment_[which],
                                "-byte aligned; got address ", pointer),
                    context_);
    }
  }

  void run_gemm(const void* l, const void* r, float beta, void* out, void* workspace) override {
    check_alignment(l, 0, "cuBLAS's A");
    check_alignment(r, 1, "cuBLAS's B");
    check_alignment(out, 2, "the output");
    check_alignment(out, 3, "the output");
    const float alpha = desc_.alpha;
    DNNX_CUDNN_CHECK(cublasLtMatmul(handle_, lt_.operation.get(), &alpha, l, lt_.l.get(), r,
                                    lt_.r.get(), &beta, out, lt_.out.get(), out, lt_.out.get(),
                                    &algo_, workspace, scratch_.gemm, runtime_->stream()),
                     context_, "running cublasLtMatmul");
  }

  cublasLtMatmulAlgo_t algo_;
  cublasLtEpilogue_t epilogue_;
  cublasLtHandle_t handle_;  // the runtime's, made when the plan is built
  LtProblem lt_;
  std::array<std::uint32_t, 4> alignment_{1, 1, 1, 1};
};

class GemmExPlan final : public MatmulPlan {
 public:
  GemmExPlan(std::shared_ptr<Runtime> runtime, const MatmulDesc& desc, Direction direction,
             const Candidate& candidate)
      : MatmulPlan(std::move(runtime), desc, direction, candidate),
        compute_(candidate.compute),
        ab_(data_type_of(desc.dtype)),
        out_(candidate.gemm.f32_accumulator ? CUDA_R_32F : ab_) {
    runtime_->make_current();
    handle_ = runtime_->blas();  // created now rather than on the first call
  }

 private:
  void prepare(const Bound&) override {
    DNNX_CUDNN_CHECK(cublasSetStream(handle_, runtime_->stream()), context_,
                     "binding the cuBLAS handle to the stream");
  }

  void run_gemm(const void* l, const void* r, float beta, void* out, void* workspace) override {
    // After cublasSetStream, which resets the workspace to cuBLAS's pool (Note [cuBLAS handles]).
    DNNX_CUDNN_CHECK(cublasSetWorkspace(handle_, workspace, scratch_.gemm), context_,
                     "giving cuBLAS its workspace");
    const float alpha = desc_.alpha;
    const Gemm& g = gemm_;
    DNNX_CUDNN_CHECK(cublasGemmStridedBatchedEx_64(
                         handle_, g.l.op, g.r.op, g.m, g.n, g.k, &alpha, l, ab_, g.l.ld,
                         g.l.batch_stride, r, ab_, g.r.ld, g.r.batch_stride, &beta, out, out_, g.m,
                         g.out_batch_stride, g.batch, compute_, CUBLAS_GEMM_DEFAULT),
                     context_, "running cublasGemmStridedBatchedEx");
  }

  cublasComputeType_t compute_;
  cudaDataType_t ab_;
  cudaDataType_t out_;
  cublasHandle_t handle_ = nullptr;  // the runtime's, made when the plan is built
};

// ---- the op backend ----------------------------------------------------------------------------

// Note [matmul descriptions]
// A choice read from a cache file is re-validated by describing its id alone (Note
// [re-validating persisted choices] in src/ops/dispatch.cpp), and a listing costs a heuristic
// query and a check of up to 64 algorithms: on an H200 a later process spent 3-35 ms per
// convolution whose choice is a cuBLASLt product describing it, 115 ms for the first; described
// as below, 0.13 ms, and 72 ms for the first (cuBLASLt's first use in the process)
// (docs/benchmarks.md, "The second process"). So an id of a GEMM without bias, activation or
// epilogue is described from the configuration it names: the algorithm initialized with the
// problem's types, its configuration attributes set, and cublasLtMatmulAlgoCheck's answer
// (supported here, workspace); the candidate is the listing's (lt_candidate()), and its id must
// come back the same, else (and for every other id) the listing answers. Its plan goes to the
// plan cache on the way, so the call that follows finds it without a listing.
class CudnnMatmul final : public LayerBackend<MatmulDesc, detail::MatmulArgs, Candidate> {
 public:
  explicit CudnnMatmul(std::shared_ptr<Runtime> runtime)
      : RuntimeLayerBackend(BackendKind::cudnn, std::move(runtime)) {}

  std::optional<AlgoInfo> describe_candidate(const MatmulDesc& desc, Direction direction,
                                             const std::string& id) override {
    check_direction(desc, direction);
    desc.validate();
    if (!is_listed(desc, direction)) {
      if (std::optional<Candidate> candidate = unlisted_candidate(desc, direction, id)) {
        // Its plan (a few descriptors) goes to the plan cache, where plan() finds it unlisted.
        plans().get_or_build(desc, direction, id,
                             [&] { return build(desc, direction, *candidate); });
        return candidate->info;
      }
    }
    return RuntimeLayerBackend::describe_candidate(desc, direction, id);
  }

 private:
  // Note [matmul descriptions]: the candidate `id` names, as the listing would make it, or
  // nullopt where the listing must answer.
  std::optional<Candidate> unlisted_candidate(const MatmulDesc& desc, Direction direction,
                                              const std::string& id) {
    if (desc.activation != MatmulActivation::none || desc.bias ||
        direction == Direction::fwd_training)
      return std::nullopt;
    const Problem p = problem_of(desc, direction, runtime_->allow_tf32());
    if (id == gemm_ex_id) return gemm_ex_candidate(desc, direction, p);
    const std::optional<Config> c = parse_lt_id(id);
    if (!c || p.gemm.batch > INT32_MAX) return std::nullopt;
    runtime_->make_current();
    const cublasLtHandle_t handle = runtime_->blas_lt();
    cublasLtMatmulAlgo_t algo{};
    if (failed(cublasLtMatmulAlgoInit(handle, p.compute, CUDA_R_32F, p.ab, p.ab, p.out, p.out,
                                      c->algo, &algo)))
      return std::nullopt;
    const auto set = [&algo](cublasLtMatmulAlgoConfigAttributes_t attribute, const auto& value) {
      return !failed(cublasLtMatmulAlgoConfigSetAttribute(&algo, attribute, &value, sizeof(value)));
    };
    if (!set(CUBLASLT_ALGO_CONFIG_TILE_ID, c->tile) ||
        !set(CUBLASLT_ALGO_CONFIG_STAGES_ID, c->stages) ||
        !set(CUBLASLT_ALGO_CONFIG_SPLITK_NUM, c->split_k) ||
        !set(CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, c->reduction) ||
        !set(CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, c->swizzle) ||
        !set(CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, c->custom) ||
        !set(CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, c->inner) ||
        !set(CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, c->cluster))
      return std::nullopt;
    const LtProblem lt =
        make_lt_problem(p, CUBLASLT_EPILOGUE_DEFAULT, context_of(desc, direction, id));
    cublasLtMatmulHeuristicResult_t result{};
    if (failed(cublasLtMatmulAlgoCheck(handle, lt.operation.get(), lt.l.get(), lt.r.get(),
                                       lt.out.get(), lt.out.get(), &algo, &result)))
      return std::nullopt;
    Candidate candidate = lt_candidate(desc, direction, p, algo, result.workspaceSize,
                                       CUBLASLT_EPILOGUE_DEFAULT, BiasWork::none, false);
    if (candidate.info.id != id) return std::nullopt;
    return candidate;
  }

  // Note [cudnn matmul candidates].
  std::vector<Candidate> enumerate(const MatmulDesc& desc, Direction direction) override {
    const Problem p = problem_of(desc, direction, runtime_->allow_tf32());
    const ErrorContext context = context_of(desc, direction, {});
    runtime_->make_current();
    std::vector<Candidate> candidates;
    std::set<std::string> seen;
    if (desc.activation != MatmulActivation::none) {
      list_fused_activation(desc, direction, p, context, candidates, seen);
    } else if (p.gemm.batch > INT32_MAX) {
      AlgoInfo info;
      info.id = lt_prefix;
      info.name = "cublasLtMatmul";
      info.reason = detail::cat("cuBLASLt takes at most ", INT32_MAX,
                                " products in a batched layout; got batch ", p.gemm.batch);
      candidates.push_back(Candidate::unsupported(std::move(info)));
    } else {
      list_lt(desc, direction, p, context, candidates, seen);
    }
    if (desc.activation == MatmulActivation::none)
      candidates.push_back(gemm_ex_candidate(desc, direction, p));
    // Supported candidates before unsupported ones, each group in priority order.
    std::stable_partition(candidates.begin(), candidates.end(),
                          [](const Candidate& candidate) { return candidate.info.supported; });
    for (std::size_t i = 0; i < candidates.size(); ++i)
      candidates[i].info.priority = static_cast<int>(i);
    return candidates;
  }

  std::shared_ptr<detail::OpPlan<detail::MatmulArgs>> build(const MatmulDesc& desc,
                                                            Direction direction,
                                                            const Candidate& candidate) override {
    if (candidate.engine == Engine::gemm_ex)
      return std::make_shared<GemmExPlan>(runtime_, desc, direction, candidate);
    return std::make_shared<LtPlan>(runtime_, desc, direction, candidate);
  }

  // The bias gradient kernel's scratch for this desc (0 without bias).
  std::size_t bias_scratch(const MatmulDesc& desc, Direction direction, BiasWork bias) const {
    if (bias != BiasWork::kernel || direction != Direction::bwd_weights) return 0;
    return kernels::matmul::bias_gradient_workspace(desc.batch * desc.m, desc.n,
                                                    runtime_->facts().sm_count);
  }

  // Why the fused bias gradient cannot compute this desc ("" when it can): Note [matmul bias].
  static std::string bias_gradient_epilogue_reason(const MatmulDesc& desc, const Gemm& g) {
    if (g.batch > 1 || g.loops > 1)
      return detail::cat("the fused bias gradient sums one product; this desc has ", desc.batch,
                         " that do not fold into one GEMM (a bias gradient kernel runs after the "
                         "GEMMs instead)");
    if (desc.beta != 0.0f)
      return detail::cat("the fused bias gradient overwrites diff_bias; beta is ",
                         detail::shortest(desc.beta), " (a bias gradient kernel adds instead)");
    if (desc.alpha != 1.0f)
      return detail::cat("the fused bias gradient is offered for alpha 1; alpha is ",
                         detail::shortest(desc.alpha));
    return {};
  }

  // Note [matmul activation candidates]: the epilogues that apply the activation (fwd) and write
  // its state (fwd_training with gelu, Note [matmul gelu aux]); nothing for the other directions.
  void list_fused_activation(const MatmulDesc& desc, Direction direction, const Problem& p,
                             const ErrorContext& context, std::vector<Candidate>& candidates,
                             std::set<std::string>& seen) {
    const bool relu = desc.activation == MatmulActivation::relu;
    const bool training = direction == Direction::fwd_training;
    if ((direction != Direction::fwd && !training) || (training && relu)) return;
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    if (training) {
      epilogue = desc.bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    } else if (relu) {
      epilogue = desc.bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    } else {
      epilogue = desc.bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    }
    std::string reason;
    if (p.gemm.batch > INT32_MAX) {
      reason = detail::cat("cuBLASLt takes at most ", INT32_MAX,
                           " products in a batched layout; got batch ", p.gemm.batch);
    } else if (desc.beta != 0.0f) {
      // Note [matmul activation candidates]: with beta != 0 the epilogues' output is not
      // act(alpha * AB + beta * C + bias), the activation of dnnx's desc; the GEMM followed by
      // dnnx's activation kernel (the "+act" candidates) serves such a desc.
      reason = detail::cat(
          "cuBLASLt's activation epilogues are offered for beta 0 (with beta != 0 "
          "they do not apply the activation to alpha * AB + beta * C + bias); "
          "beta is ",
          detail::shortest(desc.beta));
    } else if (training && desc.n % 8 != 0) {
      reason = detail::cat(
          "the GELU aux epilogue's leading dimension must be a multiple of 8 "
          "elements and dnnx's state has n; n is ",
          desc.n, " (Note [matmul gelu aux])");
    }
    if (!reason.empty()) {
      AlgoInfo info;
      info.id = detail::cat(lt_prefix, epilogue_suffix(epilogue));
      info.name = detail::cat("cublasLtMatmul with ", epilogue_name(epilogue));
      info.reason = std::move(reason);
      candidates.push_back(Candidate::unsupported(std::move(info)));
      return;
    }
    const BiasWork bias = desc.bias ? BiasWork::fused : BiasWork::none;
    heuristic(desc, direction, p, epilogue, bias, lt_workspace_offer, context, candidates, seen);
    // Note [matmul workspace]: a configuration that needs no workspace of its own.
    if (std::none_of(candidates.begin(), candidates.end(),
                     [](const Candidate& c) { return c.info.supported && c.scratch.gemm == 0; }))
      heuristic(desc, direction, p, epilogue, bias, 0, context, candidates, seen);
    enumerated(desc, direction, p, epilogue, bias, context, candidates, seen);
  }

  void list_lt(const MatmulDesc& desc, Direction direction, const Problem& p,
               const ErrorContext& context, std::vector<Candidate>& candidates,
               std::set<std::string>& seen) {
    // The epilogue groups in priority order; the last is the one GetIds' algorithms join.
    struct Group {
      cublasLtEpilogue_t epilogue;
      BiasWork bias;
    };
    std::vector<Group> groups;
    if (desc.bias && direction == Direction::fwd) {
      groups = {{CUBLASLT_EPILOGUE_BIAS, BiasWork::fused}};
    } else if (desc.bias && direction == Direction::bwd_weights) {
      const cublasLtEpilogue_t bgrad =
          p.gemm.bias_from_l ? CUBLASLT_EPILOGUE_BGRADA : CUBLASLT_EPILOGUE_BGRADB;
      if (std::string reason = bias_gradient_epilogue_reason(desc, p.gemm); reason.empty()) {
        groups.push_back({bgrad, BiasWork::fused});
      } else {
        AlgoInfo info;
        info.id = detail::cat(lt_prefix, epilogue_suffix(bgrad));
        info.name = detail::cat("cublasLtMatmul with ", epilogue_name(bgrad));
        info.reason = std::move(reason);
        candidates.push_back(Candidate::unsupported(std::move(info)));
      }
      groups.push_back({CUBLASLT_EPILOGUE_DEFAULT, BiasWork::kernel});
    } else {
      groups = {{CUBLASLT_EPILOGUE_DEFAULT, BiasWork::none}};
    }
    const std::size_t first = candidates.size();
    for (const Group& group : groups)
      heuristic(desc, direction, p, group.epilogue, group.bias, lt_workspace_offer, context,
                candidates, seen);
    if (desc.bias && direction == Direction::fwd &&
        std::none_of(candidates.begin() + static_cast<std::ptrdiff_t>(first), candidates.end(),
                     [](const Candidate& c) { return c.info.supported; })) {
      // No fused bias for this problem: the GEMM alone, then dnnx's bias kernel.
      groups = {{CUBLASLT_EPILOGUE_DEFAULT, BiasWork::kernel}};
      heuristic(desc, direction, p, CUBLASLT_EPILOGUE_DEFAULT, BiasWork::kernel, lt_workspace_offer,
                context, candidates, seen);
    }
    const Group& last = groups.back();
    // Note [matmul workspace]: a configuration that needs no workspace of its own.
    if (std::none_of(candidates.begin() + static_cast<std::ptrdiff_t>(first), candidates.end(),
                     [](const Candidate& c) { return c.info.supported && c.scratch.gemm == 0; }))
      heuristic(desc, direction, p, last.epilogue, last.bias, 0, context, candidates, seen);
    enumerated(desc, direction, p, last.epilogue, last.bias, context, candidates, seen);
    split_k_variants(desc, direction, p, first, context, candidates, seen);
  }

  // Note [split-K variants]: the variants of the heuristic's split-K configurations among
  // candidates[first..], appended.
  void split_k_variants(const MatmulDesc& desc, Direction direction, const Problem& p,
                        std::size_t first, const ErrorContext& context,
                        std::vector<Candidate>& candidates, std::set<std::string>& seen) {
    const Settings& settings = runtime_->settings();
    if (settings.knob_search == KnobSearch::off || settings.knob_variants <= 0) return;
    constexpr std::size_t top_seeds = 4;
    constexpr std::array<std::int32_t, 15> ladder = {2,  3,  4,  6,  8,   12,  16, 24,
                                                     32, 48, 64, 96, 128, 192, 256};
    // The seeds: heuristic configurations with split-K, one per configuration less its count.
    std::vector<std::size_t> seeds;
    std::set<std::string> families;
    for (std::size_t i = first; i < candidates.size(); ++i) {
      const Candidate& candidate = candidates[i];
      if (!candidate.info.supported || candidate.engine != Engine::cublaslt ||
          !candidate.info.has_note("heuristic"))
        continue;
      Config family = config_of(candidate.algo);
      if (family.split_k <= 1) continue;
      family.split_k = 0;
      if (!families.insert(lt_id(family, candidate.epilogue)).second) continue;
      seeds.push_back(i);
      if (settings.knob_search == KnobSearch::top && seeds.size() == top_seeds) break;
    }
    const cublasLtHandle_t handle = runtime_->blas_lt();
    const auto cap = static_cast<std::size_t>(settings.knob_variants);
    for (const std::size_t s : seeds) {
      // Copies: `candidates` grows below.
      const cublasLtMatmulAlgo_t seed_algo = candidates[s].algo;
      const cublasLtEpilogue_t epilogue = candidates[s].epilogue;
      const BiasWork bias = candidates[s].bias;
      const std::string seed_id = candidates[s].info.id;
      const std::int32_t k = config_of(seed_algo).split_k;
      std::vector<std::int32_t> counts;
      for (const std::int32_t count : ladder) {
        if (count != k && 2 * count >= k && count <= 2 * k) counts.push_back(count);
      }
      const auto distance = [k](std::int32_t count) {
        return std::abs(std::log(static_cast<double>(count) / k));
      };
      std::stable_sort(counts.begin(), counts.end(),
                       [&](std::int32_t a, std::int32_t b) { return distance(a) < distance(b); });
      const LtProblem lt = make_lt_problem(p, epilogue, context);
      std::size_t added = 0;
      for (const std::int32_t count : counts) {
        if (added == cap) break;
        cublasLtMatmulAlgo_t algo = seed_algo;
        if (failed(cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                                                        &count, sizeof(count))))
          continue;
        cublasLtMatmulHeuristicResult_t result{};
        if (failed(cublasLtMatmulAlgoCheck(handle, lt.operation.get(), lt.l.get(), lt.r.get(),
                                           lt.out.get(), lt.out.get(), &algo, &result)) ||
            failed(result.state) || config_of(algo).split_k != count)
          continue;
        Candidate variant =
            lt_candidate(desc, direction, p, algo, result.workspaceSize, epilogue, bias, false);
        if (!variant.info.supported || seen.count(variant.info.id) != 0) continue;
        variant.info.variant_of = seed_id;
        variant.info.name += detail::cat(", split-K variant of ", seed_id);
        std::replace(variant.info.notes.begin(), variant.info.notes.end(),
                     std::string("enumerated"), std::string("split_k_variant"));
        add(std::move(variant), candidates, seen);
        ++added;
      }
    }
  }

  // A candidate of configuration `algo`; unsupported with a reason when dnnx does not run it.
  Candidate lt_candidate(const MatmulDesc& desc, Direction direction, const Problem& p,
                         const cublasLtMatmulAlgo_t& algo, std::size_t workspace,
                         cublasLtEpilogue_t epilogue, BiasWork bias, bool from_heuristic) {
    const Config c = config_of(algo);
    Candidate candidate;
    candidate.engine = Engine::cublaslt;
    candidate.algo = algo;
    candidate.epilogue = epilogue;
    candidate.bias = bias;
    candidate.compute = p.compute;
    candidate.gemm = p.gemm;
    candidate.scratch = scratch_of(p.gemm, workspace, bias_scratch(desc, direction, bias));
    AlgoInfo& info = candidate.info;
    info.id = lt_id(c, epilogue);
    info.name = detail::cat(
        "cublasLtMatmul algo ", c.algo, ", tile ", c.tile, ", stages ", c.stages, ", split-K ",
        c.split_k, " (reduction ", reduction_name(c.reduction), ")",
        epilogue != CUBLASLT_EPILOGUE_DEFAULT ? detail::cat(", ", epilogue_name(epilogue))
                                              : std::string(),
        bias == BiasWork::kernel ? ", dnnx bias kernel" : "");
    info.workspace_bytes = candidate.scratch.total;
    info.deterministic = lt_deterministic(c);
    info.notes = {"cublaslt", "gemm", from_heuristic ? "heuristic" : "enumerated"};
    if ((c.numerics & CUBLASLT_NUMERICAL_IMPL_FLAGS_TENSOR_OP_MASK) != 0)
      info.notes.emplace_back("tensor_cores");
    // Under CUBLAS_COMPUTE_32F_FAST_TF32 every configuration may round its inputs to TF32, whether
    // or not its numerical flags report tensor operations.
    if (p.tf32) info.notes.emplace_back("tf32");
    if (c.split_k > 1) info.notes.emplace_back("split_k");
    add_bias_notes(info, bias, direction);
    if (desc.activation != MatmulActivation::none) info.notes.emplace_back("fused_activation");
    if (direction == Direction::fwd_training) {
      info.saved_state_format = detail::matmul_aux_format(desc);
      info.saved_state_bytes = detail::matmul_aux_bytes(desc);
    }
    if ((c.numerics & CUBLASLT_NUMERICAL_IMPL_FLAGS_ACCUMULATOR_16F) != 0) {
      info.reason = "accumulates in f16; dnnx accumulates in f32";
    } else if (workspace > lt_workspace_offer) {
      info.reason = detail::cat("needs ", workspace,
                                " bytes of workspace; cuBLASLt candidates are "
                                "offered at most ",
                                lt_workspace_offer);
    } else if (p.out != CUDA_R_32F && c.split_k > 1 &&
               c.reduction != CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE) {
      info.reason =
          detail::cat("adds its split-K partial sums in ", to_string(desc.dtype), " (reduction ",
                      reduction_name(c.reduction), "); dnnx accumulates in f32");
    }
    info.supported = info.reason.empty();
    return candidate;
  }

  void add(Candidate candidate, std::vector<Candidate>& candidates, std::set<std::string>& seen) {
    if (!seen.insert(candidate.info.id).second) return;
    candidates.push_back(std::move(candidate));
  }

  // cublasLtMatmulAlgoGetHeuristic's configurations, in its order.
  void heuristic(const MatmulDesc& desc, Direction direction, const Problem& p,
                 cublasLtEpilogue_t epilogue, BiasWork bias, std::size_t workspace,
                 const ErrorContext& context, std::vector<Candidate>& candidates,
                 std::set<std::string>& seen) {
    const LtProblem lt = make_lt_problem(p, epilogue, context);
    const MatmulPreference preference = preference_of(p, desc.dtype, workspace, context);
    std::vector<cublasLtMatmulHeuristicResult_t> results(heuristic_requests);
    int count = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        runtime_->blas_lt(), lt.operation.get(), lt.l.get(), lt.r.get(), lt.out.get(), lt.out.get(),
        preference.get(), heuristic_requests, results.data(), &count);
    if (failed(status) || count == 0) {
      // Listed once per epilogue, with cuBLASLt's answer (e.g. no fused epilogue for f32).
      AlgoInfo info;
      info.id = detail::cat(lt_prefix, epilogue_suffix(epilogue));
      info.name = detail::cat("cublasLtMatmul with ", epilogue_name(epilogue));
      info.reason = detail::cat(
          "cublasLtMatmulAlgoGetHeuristic offers no configuration",
          epilogue != CUBLASLT_EPILOGUE_DEFAULT ? detail::cat(" with ", epilogue_name(epilogue))
                                                : std::string(),
          workspace == 0 ? " without workspace" : "",
          " for this problem: ", failed(status) ? status_name(status) : "no result");
      add(Candidate::unsupported(std::move(info)), candidates, seen);
      return;
    }
    for (int i = 0; i < count; ++i) {
      if (failed(results[i].state)) continue;
      add(lt_candidate(desc, direction, p, results[i].algo, results[i].workspaceSize, epilogue,
                       bias, true),
          candidates, seen);
    }
  }

  // cublasLtMatmulAlgoGetIds' algorithms: each in its default configuration when
  // cublasLtMatmulAlgoCheck accepts it, else in the configuration a heuristic search limited to
  // that algorithm finds (Note [cudnn matmul candidates]).
  void enumerated(const MatmulDesc& desc, Direction direction, const Problem& p,
                  cublasLtEpilogue_t epilogue, BiasWork bias, const ErrorContext& context,
                  std::vector<Candidate>& candidates, std::set<std::string>& seen) {
    const cublasLtHandle_t handle = runtime_->blas_lt();
    std::vector<int> ids(extra_algo_limit);
    int count = 0;
    if (failed(cublasLtMatmulAlgoGetIds(handle, p.compute, CUDA_R_32F, p.ab, p.ab, p.out, p.out,
                                        extra_algo_limit, ids.data(), &count)))
      return;
    const LtProblem lt = make_lt_problem(p, epilogue, context);
    const MatmulPreference limited = preference_of(p, desc.dtype, lt_workspace_offer, context);
    set_preference(limited, CUBLASLT_MATMUL_PREF_SEARCH_MODE,
                   static_cast<std::uint32_t>(CUBLASLT_SEARCH_LIMITED_BY_ALGO_ID), context);
    for (int i = 0; i < count; ++i) {
      cublasLtMatmulAlgo_t algo{};
      if (failed(cublasLtMatmulAlgoInit(handle, p.compute, CUDA_R_32F, p.ab, p.ab, p.out, p.out,
                                        ids[i], &algo)))
        continue;
      cublasLtMatmulHeuristicResult_t result{};
      const cublasStatus_t checked =
          cublasLtMatmulAlgoCheck(handle, lt.operation.get(), lt.l.get(), lt.r.get(), lt.out.get(),
                                  lt.out.get(), &algo, &result);
      if (!failed(checked)) {
        add(lt_candidate(desc, direction, p, algo, result.workspaceSize, epilogue, bias, false),
            candidates, seen);
        continue;
      }
      cublasLtMatmulHeuristicResult_t found{};
      found.algo = algo;
      int returned = 0;
      const cublasStatus_t searched = cublasLtMatmulAlgoGetHeuristic(
          handle, lt.operation.get(), lt.l.get(), lt.r.get(), lt.out.get(), lt.out.get(),
          limited.get(), 1, &found, &returned);
      if (!failed(searched) && returned > 0 && !failed(found.state)) {
        add(lt_candidate(desc, direction, p, found.algo, found.workspaceSize, epilogue, bias,
                         false),
            candidates, seen);
        continue;
      }
      Candidate candidate = lt_candidate(desc, direction, p, algo, 0, epilogue, bias, false);
      candidate.info.supported = false;
      candidate.info.reason =
          detail::cat("cublasLtMatmulAlgoCheck rejects algorithm ", ids[i],
                      " in its default configuration for this problem (", status_name(checked),
                      ") and a heuristic search limited to it finds no configuration (",
                      failed(searched) ? status_name(searched)
                                       : (returned > 0 ? status_name(found.state) : "no result"),
                      ")");
      add(std::move(candidate), candidates, seen);
    }
  }

  Candidate gemm_ex_candidate(const MatmulDesc& desc, Direction direction, const Problem& p) {
    Candidate candidate;
    candidate.engine = Engine::gemm_ex;
    candidate.compute = p.compute;
    candidate.gemm = p.gemm;
    candidate.bias =
        desc.bias && direction != Direction::bwd_data ? BiasWork::kernel : BiasWork::none;
    // Note [matmul workspace]: cuBLAS's recommendation.
    const std::size_t gemm_bytes =
        runtime_->facts().major >= 9 ? std::size_t{32} << 20 : std::size_t{4} << 20;
    candidate.scratch =
        scratch_of(p.gemm, gemm_bytes, bias_scratch(desc, direction, candidate.bias));
    AlgoInfo& info = candidate.info;
    info.id = gemm_ex_id;
    info.name = detail::cat("cublasGemmStridedBatchedEx, CUBLAS_GEMM_DEFAULT",
                            candidate.bias == BiasWork::kernel ? ", dnnx bias kernel" : "");
    info.supported = true;
    info.workspace_bytes = candidate.scratch.total;
    info.deterministic = true;  // Note [matmul determinism]
    info.notes = {"cublas", "gemm"};
    if (p.tf32) info.notes.emplace_back("tf32");
    add_bias_notes(info, candidate.bias, direction);
    return candidate;
  }
};

// Note [matmul activation candidates]: the passes as dnnx's kernels on the runtime's stream.
class KernelPasses final : public detail::MatmulActivationPasses {
 public:
  explicit KernelPasses(std::shared_ptr<Runtime> runtime) : runtime_(std::move(runtime)) {}

  void forward(const MatmulDesc& desc, void* dst, void* aux, const ErrorContext& context) override {
    runtime_->make_current();
    DNNX_CUDNN_CHECK(kernels::matmul::activation_forward(element_of(desc.dtype), activation(desc),
                                                         count(desc), dst, aux, runtime_->stream()),
                     context, "launching the activation kernel");
  }

  void forward_from_pre(const MatmulDesc& desc, const void* pre, void* dst,
                        const ErrorContext& context) override {
    runtime_->make_current();
    DNNX_CUDNN_CHECK(kernels::matmul::gelu_forward_from(element_of(desc.dtype), count(desc), pre,
                                                        dst, runtime_->stream()),
                     context, "launching the activation kernel");
  }

  void backward(const MatmulDesc& desc, const void* diff_dst, const void* aux, void* diff_pre,
                const ErrorContext& context) override {
    runtime_->make_current();
    DNNX_CUDNN_CHECK(
        kernels::matmul::activation_backward(element_of(desc.dtype), activation(desc), count(desc),
                                             diff_dst, aux, diff_pre, runtime_->stream()),
        context, "launching the activation derivative kernel");
  }

  // Note [activation derivative with the bias gradient] (kernels/matmul.cu).
  std::optional<std::size_t> backward_bias_scratch(const MatmulDesc& desc) const override {
    return kernels::matmul::activation_backward_bias_workspace(desc.batch * desc.m, desc.n,
                                                               runtime_->facts().sm_count);
  }

  void backward_bias(const MatmulDesc& desc, const void* diff_dst, const void* aux, void* diff_pre,
                     void* diff_bias, void* scratch, const ErrorContext& context) override {
    runtime_->make_current();
    DNNX_CUDNN_CHECK(kernels::matmul::activation_backward_bias(
                         element_of(desc.dtype), activation(desc), desc.batch * desc.m, desc.n,
                         diff_dst, aux, diff_pre, desc.beta, diff_bias, scratch,
                         runtime_->facts().sm_count, runtime_->stream()),
                     context, "launching the activation derivative and bias gradient kernel");
  }

  Device device() const override { return Device::cuda(runtime_->device()); }
  std::string name() const override { return "dnnx kernel"; }

 private:
  static kernels::matmul::Activation activation(const MatmulDesc& desc) {
    return desc.activation == MatmulActivation::relu ? kernels::matmul::Activation::relu
                                                     : kernels::matmul::Activation::gelu_tanh;
  }
  static std::int64_t count(const MatmulDesc& desc) { return desc.batch * desc.m * desc.n; }

  std::shared_ptr<Runtime> runtime_;
};

}  // namespace

std::unique_ptr<detail::OpBackendOf<OpKind::matmul>> make_matmul_backend(
    std::shared_ptr<Runtime> runtime, const detail::OpBackends&) {
  auto passes = std::make_shared<KernelPasses>(runtime);
  return detail::with_activation_passes(BackendKind::cudnn, "cudnn",
                                        std::make_unique<CudnnMatmul>(std::move(runtime)),
                                        std::move(passes));
}

}  // namespace dnnx::cudnn
