// Bad inputs to pooling: every case must raise dnnx::Error of the right kind whose message (without
// the context decorations) names the argument and the value received. Nothing may crash.

#include <dnnx/dnnx.hpp>
#include <dnnx/ops/pool.hpp>

#include "support/errors.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dnnx::test {
namespace {

// N=2, C=3, 9x7 input, kernel 3x2, stride 2x1, pad 1x0: dst 2x3x5x6. Sizes are chosen so that each
// number a case corrupts is distinct from the sizes around it in the message.
PoolDesc base_desc() {
  PoolDesc desc;
  desc.spatial_dims = 2;
  desc.batch = 2;
  desc.channels = 3;
  desc.input = {9, 7, 1};
  desc.kernel = {3, 2, 1};
  desc.stride = {2, 1, 1};
  desc.pad_before = {1, 0, 0};
  desc.pad_after = {1, 0, 0};
  return desc;
}

struct Tensors {
  explicit Tensors(const PoolDesc& desc)
      : src(Tensor::zeros(desc.src_dims(), desc.dtype, desc.layout)),
        dst(Tensor::zeros(desc.dst_dims(), desc.dtype, desc.layout)),
        diff_dst(Tensor::zeros(desc.dst_dims(), desc.dtype, desc.layout)),
        diff_src(Tensor::zeros(desc.src_dims(), desc.dtype, desc.layout)) {}
  Tensor src, dst, diff_dst, diff_src;
};

using BadInput = BadCase;

// Validates the base desc after `edit` corrupted one field: through the op layer (pool_list must
// validate before asking any backend), then directly.
std::function<void()> desc_with(std::function<void(PoolDesc&)> edit) {
  return [edit] {
    PoolDesc desc = base_desc();
    edit(desc);
    Context context = reference_context();
    try {
      dnnx::pool_list(context, desc, Direction::fwd);
    } catch (const dnnx::Error&) {
      desc.validate();  // must throw the same kind and message
      throw;
    }
  };
}

// Runs forward (or backward) on the valid base desc after `edit` corrupted one of its tensors.
std::function<void()> fwd_with(std::function<void(Tensors&)> edit) {
  return [edit] {
    const PoolDesc desc = base_desc();
    Tensors t(desc);
    edit(t);
    Context context = reference_context();
    dnnx::pool_fwd(context, desc, t.src, t.dst);
  };
}
std::function<void()> bwd_with(std::function<void(Tensors&)> edit) {
  return [edit] {
    const PoolDesc desc = base_desc();
    Tensors t(desc);
    edit(t);
    Context context = reference_context();
    dnnx::pool_bwd(context, desc, t.src, t.dst, t.diff_dst, t.diff_src);
  };
}

// The base desc with indices, its tensors and valid i64 indices (each its window's first input
// element: row max(2 oh - 1, 0), column ow, of the 9x7 plane).
PoolDesc indices_desc() {
  PoolDesc desc = base_desc();
  desc.indices = true;
  return desc;
}
struct IndexTensors : Tensors {
  explicit IndexTensors(const PoolDesc& desc)
      : Tensors(desc), indices(Tensor::zeros(desc.dst_dims(), DType::i64, desc.layout)) {
    auto* data = static_cast<std::int64_t*>(indices.data());
    for (std::int64_t i = 0; i < indices.numel(); ++i) {
      const std::int64_t oh = i / 6 % 5, ow = i % 6;
      data[i] = std::max<std::int64_t>(2 * oh - 1, 0) * 7 + ow;
    }
  }
  Tensor indices;
};

// Forward / backward with indices after `edit`, on the reference backend unless `backend` says.
std::function<void()> fwd_indices_with(std::function<void(IndexTensors&)> edit,
                                       BackendKind backend = BackendKind::reference) {
  return [edit, backend] {
    const PoolDesc desc = indices_desc();
    IndexTensors t(desc);
    edit(t);
    Context context = backend == BackendKind::reference ? reference_context() : Context(backend);
    dnnx::pool_fwd(context, desc, t.src, t.dst, t.indices);
  };
}
std::function<void()> bwd_indices_with(std::function<void(IndexTensors&)> edit,
                                       BackendKind backend = BackendKind::reference) {
  return [edit, backend] {
    const PoolDesc desc = indices_desc();
    IndexTensors t(desc);
    edit(t);
    Context context = backend == BackendKind::reference ? reference_context() : Context(backend);
    if (backend != BackendKind::reference)
      context.set_choice_cache(std::make_shared<ChoiceCache>());
    dnnx::pool_bwd(context, desc, t.diff_dst, t.indices, t.diff_src);
  };
}

// Sets the index of dst element [n, c, oh, ow] (nchw).
void set_index(IndexTensors& t, std::int64_t n, std::int64_t c, std::int64_t oh, std::int64_t ow,
               std::int64_t value) {
  static_cast<std::int64_t*>(t.indices.data())[((n * 3 + c) * 5 + oh) * 6 + ow] = value;
}

// The backward with indices of `desc` on `backend`, through valid indices (each window's first
// input element: the reference forward of zeros) except the one at dst position `element`
// (logical order), which is `value`.
std::function<void()> bad_index(const PoolDesc& desc, std::int64_t element, std::int64_t value,
                                BackendKind backend) {
  return [desc, element, value, backend] {
    Tensors t(desc);
    Tensor indices = Tensor::zeros(desc.dst_dims(), DType::i64, desc.layout);
    Context reference = reference_context();
    dnnx::pool_fwd(reference, desc, t.src, t.dst, indices);
    const Dims dims = desc.dst_dims();
    std::int64_t rest = element, offset = 0;
    for (int k = dims.rank() - 1; k >= 0; --k) {
      offset += rest % dims[k] * indices.strides()[k];
      rest /= dims[k];
    }
    static_cast<std::int64_t*>(indices.data())[offset] = value;
    Context context = backend == BackendKind::reference ? reference_context() : Context(backend);
    context.set_choice_cache(std::make_shared<ChoiceCache>());
    dnnx::pool_bwd(context, desc, t.diff_dst, indices, t.diff_src);
  };
}

// Indices outside their windows on the reference backend and the cpu backend's candidates (the
// same message: Note [cpu pool index check]): per dim of 1-, 2- and 3-D windows, dense and
// dilated, both layouts.
void add_window_index_cases(std::vector<BadInput>& cases) {
  PoolDesc dense_2d = indices_desc();
  PoolDesc dilated_2d = indices_desc();  // 4x5 outputs; rows 2 oh - 1 + 2 j, columns ow + 2 j
  dilated_2d.dilation = {2, 2, 1};
  dilated_2d.layout = Layout::channels_last;
  PoolDesc dense_3d = PoolDesc::from_shapes({1, 2, 4, 5, 6}, {2});  // 2x2x3 outputs
  dense_3d.indices = true;
  PoolDesc dilated_1d = PoolDesc::from_shapes({2, 3, 11}, {3}, {2}, {2}, {2}, PoolMode::max);
  dilated_1d.indices = true;  // 6 outputs; positions 2 o - 2 + 2 j
  // Windows in the padding (the cpu backend's exact checks rather than its table).
  PoolDesc padded_2d = PoolDesc::from_shapes({1, 2, 6, 8}, {3}, {2}, {1});  // 3x4 outputs
  padded_2d.indices = true;
  PoolDesc padded_3d = PoolDesc::from_shapes({1, 2, 4, 5, 6}, {3}, {2}, {1});  // 2x3x3 outputs
  padded_3d.indices = true;
  struct Row {
    const char* name;
    PoolDesc desc;
    std::int64_t element, value;
    std::vector<std::string> needles;
  };
  const std::vector<Row> rows{
      // [0, 0, 2, 1]: rows [3, 6), columns [1, 3); 33 is row 4, column 5.
      {"index_outside_its_window_columns",
       dense_2d,
       ((0 * 3 + 0) * 5 + 2) * 6 + 1,
       33,
       {"indices[0, 0, 2, 1] is 33 (input element 4, 5)",
        "outside that output's window [3, 6) x [1, 3)"}},
      // [1, 2, 2, 3]: rows 3, 5, 7, columns 3, 5; 31 is row 4 (between two), column 3.
      {"index_between_dilated_rows",
       dilated_2d,
       ((1 * 3 + 2) * 4 + 2) * 5 + 3,
       31,
       {"indices[1, 2, 2, 3] is 31 (input element 4, 3)",
        "outside that output's window [3, 8) step 2 x [3, 6) step 2"}},
      // The same output; 39 is row 5, column 4 (between two).
      {"index_between_dilated_columns",
       dilated_2d,
       ((1 * 3 + 2) * 4 + 2) * 5 + 3,
       39,
       {"indices[1, 2, 2, 3] is 39 (input element 5, 4)", "[3, 8) step 2 x [3, 6) step 2"}},
      // [0, 1, 1, 0, 2]: D [2, 4), H [0, 2), W [4, 6); 82 is (2, 3, 4), 97 is (3, 1, 1).
      {"index_outside_its_window_3d_rows",
       dense_3d,
       (((0 * 2 + 1) * 2 + 1) * 2 + 0) * 3 + 2,
       82,
       {"indices[0, 1, 1, 0, 2] is 82 (input element 2, 3, 4)",
        "outside that output's window [2, 4) x [0, 2) x [4, 6)"}},
      {"index_outside_its_window_3d_columns",
       dense_3d,
       (((0 * 2 + 1) * 2 + 1) * 2 + 0) * 3 + 2,
       97,
       {"indices[0, 1, 1, 0, 2] is 97 (input element 3, 1, 1)"}},
      // [0, 2, 0, 3]: rows [0, 2) (the window starts in the padding), columns [3, 5); 7 is
      // row 1, column 0.
      {"index_outside_a_window_in_the_padding_rows",
       dense_2d,
       ((0 * 3 + 2) * 5 + 0) * 6 + 3,
       7,
       {"indices[0, 2, 0, 3] is 7 (input element 1, 0)",
        "outside that output's window [0, 2) x [3, 5)"}},
      // [0, 1, 1, 0]: rows [1, 4), columns [0, 2) (the window starts in the padding); 21 is
      // row 2, column 5.
      {"index_outside_a_window_in_the_padding_columns",
       padded_2d,
       ((0 * 2 + 1) * 3 + 1) * 4 + 0,
       21,
       {"indices[0, 1, 1, 0] is 21 (input element 2, 5)",
        "outside that output's window [1, 4) x [0, 2)"}},
      // [1, 2, 0, 0]: rows 1, 3 (-1 is padding), columns 0, 2; 14 is row 2, column 0.
      {"index_between_dilated_rows_in_the_padding",
       dilated_2d,
       ((1 * 3 + 2) * 4 + 0) * 5 + 0,
       14,
       {"indices[1, 2, 0, 0] is 14 (input element 2, 0)",
        "outside that output's window [1, 4) step 2 x [0, 3) step 2"}},
      // [0, 1, 0, 0, 0]: D, H and W [0, 2) (in the padding); 49 is (1, 3, 1).
      {"index_outside_a_window_in_the_padding_3d",
       padded_3d,
       (((0 * 2 + 1) * 2 + 0) * 3 + 0) * 3 + 0,
       49,
       {"indices[0, 1, 0, 0, 0] is 49 (input element 1, 3, 1)",
        "outside that output's window [0, 2) x [0, 2) x [0, 2)"}},
      // [1, 2, 3]: positions 4, 6, 8; 5 lies between two.
      {"index_between_dilated_positions_1d",
       dilated_1d,
       (1 * 3 + 2) * 6 + 3,
       5,
       {"indices[1, 2, 3] is 5 (input element 5)", "outside that output's window [4, 9) step 2"}},
  };
  for (const Row& row : rows) {
    for (const BackendKind backend : {BackendKind::reference, BackendKind::cpu}) {
      const std::string prefix = backend == BackendKind::cpu ? "cpu_" : "";
      cases.push_back({prefix + row.name, bad_index(row.desc, row.element, row.value, backend),
                       ErrorKind::InvalidArgument, row.needles, backend});
    }
  }
}

std::vector<BadInput> bad_inputs() {
  std::vector<BadInput> cases = {
      {"kernel_larger_than_padded_input",
       desc_with([](PoolDesc& d) { d.kernel[1] = 8; }),
       ErrorKind::InvalidArgument,
       {"kernel along W (size 8)", "larger than the padded input (7 + 0 + 0 = 7)"}},
      {"pad_before_over_half_kernel",
       desc_with([](PoolDesc& d) { d.pad_before[1] = 2; }),
       ErrorKind::InvalidArgument,
       {"pad_before along W is 2", "at most half the kernel size (2 / 2 = 1)"}},
      {"pad_after_over_half_kernel",
       desc_with([](PoolDesc& d) { d.pad_after[0] = 2; }),
       ErrorKind::InvalidArgument,
       {"pad_after along H is 2", "(3 / 2 = 1)"}},
      {"negative_pad",
       desc_with([](PoolDesc& d) { d.pad_before[0] = -1; }),
       ErrorKind::InvalidArgument,
       {"pad_before along H must be >= 0, got -1"}},
      {"zero_stride",
       desc_with([](PoolDesc& d) { d.stride[1] = 0; }),
       ErrorKind::InvalidArgument,
       {"stride along W must be >= 1, got 0"}},
      {"zero_kernel",
       desc_with([](PoolDesc& d) { d.kernel[0] = 0; }),
       ErrorKind::InvalidArgument,
       {"kernel size along H must be >= 1, got 0"}},
      {"negative_input",
       desc_with([](PoolDesc& d) { d.input[1] = -4; }),
       ErrorKind::InvalidArgument,
       {"input size along W must be >= 1, got -4"}},
      {"zero_batch",
       desc_with([](PoolDesc& d) { d.batch = 0; }),
       ErrorKind::InvalidArgument,
       {"batch (N) must be >= 1, got 0"}},
      {"negative_channels",
       desc_with([](PoolDesc& d) { d.channels = -5; }),
       ErrorKind::InvalidArgument,
       {"channels (C) must be >= 1, got -5"}},
      {"batch_too_large",
       desc_with([](PoolDesc& d) { d.batch = (std::int64_t{1} << 31) + 1; }),
       ErrorKind::InvalidArgument,
       {"batch (N) must be <= 2^31, got 2147483649"}},
      {"four_spatial_dims",
       desc_with([](PoolDesc& d) { d.spatial_dims = 4; }),
       ErrorKind::InvalidArgument,
       {"spatial_dims must be 1, 2 or 3, got 4"}},
      {"i32_dtype",
       desc_with([](PoolDesc& d) { d.dtype = DType::i32; }),
       ErrorKind::InvalidArgument,
       {"dtype must be f32, f16 or bf16, got i32"}},
      {"i64_dtype",
       desc_with([](PoolDesc& d) { d.dtype = DType::i64; }),
       ErrorKind::InvalidArgument,
       {"dtype must be f32, f16 or bf16, got i64"}},
      {"unknown_mode",
       desc_with([](PoolDesc& d) { d.mode = static_cast<PoolMode>(7); }),
       ErrorKind::InvalidArgument,
       {"mode must be max, avg_include_pad or avg_exclude_pad, got 7"}},
      {"unknown_mode_name",
       [] { dnnx::parse_pool_mode("sum"); },
       ErrorKind::InvalidArgument,
       {"unknown pooling mode 'sum'", "accepted: max, avg_include_pad (avg), avg_exclude_pad"}},
      {"from_shapes_rank2",
       [] {
         PoolDesc::from_shapes({2, 3}, {3});
       },
       ErrorKind::InvalidArgument,
       {"src dims 2x3 have rank 2", "accepts rank 3, 4 or 5"}},
      {"from_shapes_kernel_count",
       [] {
         PoolDesc::from_shapes({2, 3, 8, 8}, {3, 3, 3});
       },
       ErrorKind::InvalidArgument,
       {"kernel has 3 entries (3,3,3)", "expected 1 or 2"}},
      {"from_shapes_stride_count",
       [] {
         PoolDesc::from_shapes({2, 3, 8}, {3}, {1, 2});
       },
       ErrorKind::InvalidArgument,
       {"stride has 2 entries (1,2)", "expected 1 or 1"}},
      {"dtype_mix",
       fwd_with([](Tensors& t) {
         t.src = Tensor::zeros(t.src.dims(), DType::f16, Layout::channels_first);
       }),
       ErrorKind::InvalidArgument,
       {"dtype mix: src is f16 but the desc's dtype is f32"}},
      {"rank_mismatch",
       fwd_with([](Tensors& t) {
         t.dst = Tensor::zeros({2, 3, 5}, DType::f32);
       }),
       ErrorKind::InvalidArgument,
       {"dst has rank 3 (dims 2x3x5)", "expects rank 4 (dims 2x3x5x6)"}},
      {"dst_shape_mismatch",
       fwd_with([](Tensors& t) {
         t.dst = Tensor::zeros({2, 3, 4, 6}, DType::f32);
       }),
       ErrorKind::InvalidArgument,
       {"dst dims 2x3x4x6 do not match the desc, which expects 2x3x5x6"}},
      {"layout_mismatch",
       fwd_with([](Tensors& t) {
         t.src = Tensor::zeros(t.src.dims(), DType::f32, Layout::channels_last);
       }),
       ErrorKind::InvalidArgument,
       {"layout mismatch: src strides", "are not dense nchw"}},
      {"null_src",
       fwd_with([](Tensors& t) {
         t.src = Tensor::view(nullptr, t.src.dims(), DType::f32, Layout::channels_first);
       }),
       ErrorKind::InvalidArgument,
       {"src has null data"}},
      {"dst_aliases_src",
       fwd_with([](Tensors& t) {
         t.dst = Tensor::view(t.src.data(), t.dst.dims(), DType::f32, Layout::channels_first);
       }),
       ErrorKind::InvalidArgument,
       {"dst overlaps src in memory", "cannot run in place"}},
      {"bwd_diff_src_aliases_diff_dst",
       bwd_with([](Tensors& t) {
         Tensor big = Tensor::zeros(t.diff_src.dims(), DType::f32);
         t.diff_src = big;
         t.diff_dst =
             Tensor::view(big.data(), t.diff_dst.dims(), DType::f32, Layout::channels_first);
       }),
       ErrorKind::InvalidArgument,
       {"diff_src overlaps diff_dst in memory"}},
      {"bwd_dst_shape",
       bwd_with([](Tensors& t) {
         t.dst = Tensor::zeros({2, 3, 5, 5}, DType::f32);
       }),
       ErrorKind::InvalidArgument,
       {"dst dims 2x3x5x5 do not match the desc, which expects 2x3x5x6"}},
      {"bwd_diff_dst_dtype",
       bwd_with([](Tensors& t) { t.diff_dst = Tensor::zeros(t.diff_dst.dims(), DType::bf16); }),
       ErrorKind::InvalidArgument,
       {"dtype mix: diff_dst is bf16"}},
      {"bwd_weights_direction",
       [] {
         Context context = reference_context();
         dnnx::pool_list(context, base_desc(), Direction::bwd_weights);
       },
       ErrorKind::InvalidArgument,
       {"bwd_weights"}},
      // ---- max pooling with indices
      {"indices_with_avg_mode",
       desc_with([](PoolDesc& d) {
         d.indices = true;
         d.mode = PoolMode::avg_exclude_pad;
       }),
       ErrorKind::InvalidArgument,
       {"indices is set with mode avg_exclude_pad", "argmax indices exist for mode max only"}},
      {"indices_f32_dtype",
       fwd_indices_with(
           [](IndexTensors& t) { t.indices = Tensor::zeros(t.indices.dims(), DType::f32); }),
       ErrorKind::InvalidArgument,
       {"indices dtype is f32", "accepted: i64 (PyTorch's index type) or i32"}},
      {"indices_shape_mismatch",
       bwd_indices_with([](IndexTensors& t) {
         t.indices = Tensor::zeros({2, 3, 5, 5}, DType::i64);
       }),
       ErrorKind::InvalidArgument,
       {"indices dims 2x3x5x5 do not match the desc, which expects 2x3x5x6"}},
      {"indices_layout_mismatch",
       fwd_indices_with([](IndexTensors& t) {
         t.indices = Tensor::zeros(t.indices.dims(), DType::i32, Layout::channels_last);
       }),
       ErrorKind::InvalidArgument,
       {"layout mismatch: indices strides", "are not dense nchw"}},
      {"fwd_indices_alias_dst",
       fwd_indices_with([](IndexTensors& t) {
         Tensor big = Tensor::zeros(t.indices.dims(), DType::i64);
         t.indices = big;
         t.dst = Tensor::view(big.data(), t.dst.dims(), DType::f32, Layout::channels_first);
       }),
       ErrorKind::InvalidArgument,
       {"indices overlaps dst in memory", "cannot run in place"}},
      {"bwd_diff_src_overlaps_indices",
       bwd_indices_with([](IndexTensors& t) {
         Tensor big = Tensor::zeros(t.diff_src.dims(), DType::f32);
         t.diff_src = big;
         t.indices = Tensor::view(big.data(), t.indices.dims(), DType::i64, Layout::channels_first);
       }),
       ErrorKind::InvalidArgument,
       {"diff_src overlaps indices in memory"}},
      {"old_fwd_overload_with_indices_desc",
       [] {
         const PoolDesc desc = indices_desc();
         Tensors t(desc);
         Context context = reference_context();
         dnnx::pool_fwd(context, desc, t.src, t.dst);
       },
       ErrorKind::InvalidArgument,
       {"the desc's indices is set", "call pool_fwd(context, desc, src, dst, indices)"}},
      {"old_bwd_overload_with_indices_desc",
       [] {
         const PoolDesc desc = indices_desc();
         Tensors t(desc);
         Context context = reference_context();
         dnnx::pool_bwd(context, desc, t.src, t.dst, t.diff_dst, t.diff_src);
       },
       ErrorKind::InvalidArgument,
       {"the desc's indices is set", "pool_bwd(context, desc, diff_dst, indices, diff_src)"}},
      {"indices_overload_without_indices_desc",
       [] {
         const PoolDesc desc = base_desc();
         IndexTensors t(desc);
         Context context = reference_context();
         dnnx::pool_bwd(context, desc, t.diff_dst, t.indices, t.diff_src);
       },
       ErrorKind::InvalidArgument,
       {"pool_bwd was given an indices tensor but the desc's indices is not set"}},
      {"indices_overload_fwd_without_indices_desc",
       [] {
         const PoolDesc desc = base_desc();
         IndexTensors t(desc);
         Context context = reference_context();
         dnnx::pool_fwd(context, desc, t.src, t.dst, t.indices);
       },
       ErrorKind::InvalidArgument,
       {"pool_fwd was given an indices tensor", "call pool_fwd(context, desc, src, dst)"}},
      {"index_past_the_plane",
       bwd_indices_with([](IndexTensors& t) { set_index(t, 1, 2, 3, 4, 63); }),
       ErrorKind::InvalidArgument,
       {"indices[1, 2, 3, 4] is 63", "outside the 9x7 input plane", "[0, 63)"}},
      {"negative_index",
       bwd_indices_with([](IndexTensors& t) { set_index(t, 0, 1, 0, 0, -1); }),
       ErrorKind::InvalidArgument,
       {"indices[0, 1, 0, 0] is -1", "outside the 9x7 input plane"}},
      {"index_outside_its_window",
       bwd_indices_with([](IndexTensors& t) { set_index(t, 1, 0, 2, 5, 0); }),
       ErrorKind::InvalidArgument,
       {"indices[1, 0, 2, 5] is 0 (input element 0, 0)",
        "outside that output's window [3, 6) x "
        "[5, 7)"}},
      {"cpu_index_past_the_plane",
       bwd_indices_with([](IndexTensors& t) { set_index(t, 1, 2, 4, 5, 1000); }, BackendKind::cpu),
       ErrorKind::InvalidArgument,
       {"indices[1, 2, 4, 5] is 1000", "outside the 9x7 input plane"},
       BackendKind::cpu},
      {"cpu_index_outside_its_window_rows",
       bwd_indices_with([](IndexTensors& t) { set_index(t, 0, 0, 4, 0, 0); }, BackendKind::cpu),
       ErrorKind::InvalidArgument,
       {"indices[0, 0, 4, 0] is 0 (input element 0, 0)", "outside that output's window"},
       BackendKind::cpu},
      {"unknown_fixed_id",
       [] {
         Context context = reference_context();
         context.tune().policy(dnnx::OpKind::pool, Direction::fwd) =
             dnnx::AlgoPolicy::fixed("reference:nope");
         Tensors t(base_desc());
         dnnx::pool_fwd(context, base_desc(), t.src, t.dst);
       },
       ErrorKind::InvalidArgument,
       {"algorithm id 'reference:nope'", "valid ids: reference:direct"}},
      // ---- dilation
      {"zero_dilation",
       desc_with([](PoolDesc& d) { d.dilation[0] = 0; }),
       ErrorKind::InvalidArgument,
       {"dilation along H must be >= 1, got 0"}},
      {"dilation_too_large",
       desc_with([](PoolDesc& d) { d.dilation[1] = (std::int64_t{1} << 31) + 1; }),
       ErrorKind::InvalidArgument,
       {"dilation along W must be <= 2^31, got 2147483649"}},
      {"pad_over_half_effective_kernel",
       desc_with([](PoolDesc& d) {
         d.dilation[0] = 2;
         d.pad_before[0] = 3;
       }),
       ErrorKind::InvalidArgument,
       {"pad_before along H is 3",
        "at most half the effective kernel size ((kernel 3 - 1) * dilation 2 + 1 = 5; 5 / 2 = "
        "2)"}},
      {"effective_kernel_larger_than_padded_input",
       desc_with([](PoolDesc& d) { d.dilation[1] = 7; }),
       ErrorKind::InvalidArgument,
       {"effective kernel along W ((kernel 2 - 1) * dilation 7 + 1 = 8)",
        "larger than the padded input (7 + 0 + 0 = 7)"}},
      {"window_between_input_elements",
       [] {
         PoolDesc::from_shapes({1, 1, 3}, {2}, {1}, {2}, {4}, PoolMode::max);
       },
       ErrorKind::InvalidArgument,
       {"the window of output 1 along W holds no input element",
        "positions -1 + j * dilation 4 (j < kernel 2) all lie outside the input [0, 3)"}},
      {"from_shapes_dilation_count",
       [] {
         PoolDesc::from_shapes({2, 3, 8, 8}, {3}, {1}, {0}, {1, 2, 3}, PoolMode::max);
       },
       ErrorKind::InvalidArgument,
       {"dilation has 3 entries (1,2,3)", "expected 1 or 2"}},
  };
  add_window_index_cases(cases);
  return cases;
}

class PoolErrors : public ::testing::TestWithParam<BadInput> {};

TEST_P(PoolErrors, RaisesKindNamingArgumentAndValue) { expect_raises(GetParam(), "pool"); }

INSTANTIATE_TEST_SUITE_P(Pool, PoolErrors, ::testing::ValuesIn(bad_inputs()), bad_case_name);

TEST(PoolErrorsTable, HasAtLeastFifteenCases) { EXPECT_GE(bad_inputs().size(), 15u); }

// A bad index does not stop the others of the same call from being checked: the lowest bad
// position is the one reported, on every backend.
TEST(PoolErrorsIndices, TheLowestBadPositionIsReported) {
  for (const BackendKind backend : {BackendKind::reference, BackendKind::cpu}) {
    std::string why;
    if (!backend_available(backend, &why)) continue;
    const PoolDesc desc = indices_desc();
    IndexTensors t(desc);
    set_index(t, 1, 2, 4, 5, 0);  // outside its window, late in dst
    set_index(t, 0, 1, 3, 2, 3);  // row 0 for a window of rows [5, 8): the lowest
    Context context = backend == BackendKind::reference ? reference_context() : Context(backend);
    context.set_choice_cache(std::make_shared<ChoiceCache>());
    try {
      dnnx::pool_bwd(context, desc, t.diff_dst, t.indices, t.diff_src);
      ADD_FAILURE() << "nothing thrown on " << to_string(backend);
    } catch (const dnnx::Error& error) {
      EXPECT_NE(error.message().find("indices[0, 1, 3, 2] is 3"), std::string::npos)
          << to_string(backend) << ": " << error.what();
    }
  }
}

// Errors raised inside an op carry the desc's repro line and the op name.
TEST(PoolErrorsContext, OpErrorsCarryTheRepro) {
  try {
    fwd_with([](Tensors& t) { t.dst = Tensor::zeros({2, 3, 4, 6}, DType::f32); })();
    FAIL() << "nothing thrown";
  } catch (const dnnx::Error& error) {
    EXPECT_NE(error.context().repro.find("dnnx profile pool --input 2x3x9x7"), std::string::npos)
        << error.what();
    EXPECT_NE(error.context().op.find("pool"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace dnnx::test
