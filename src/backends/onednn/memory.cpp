#include "backends/onednn/memory.hpp"

#include "core/check.hpp"

#include <cstddef>

namespace dnnx::onednn {
namespace {

using Tag = memory::format_tag;

// Format tags by [spatial dims - 1] of the user's dense layouts (Layout's doc: weights follow
// the activations, OIHW for channels_first and OHWI for channels_last).
constexpr Tag activation_tags[2][3] = {{Tag::ncw, Tag::nchw, Tag::ncdhw},
                                       {Tag::nwc, Tag::nhwc, Tag::ndhwc}};
constexpr Tag weights_tags[2][3] = {{Tag::oiw, Tag::oihw, Tag::oidhw},
                                    {Tag::owi, Tag::ohwi, Tag::odhwi}};
// Grouped weights split O into G x O/G: memory order G, O/G, ... keeps O outermost.
constexpr Tag grouped_weights_tags[2][3] = {{Tag::goiw, Tag::goihw, Tag::goidhw},
                                            {Tag::gowi, Tag::gohwi, Tag::godhwi}};

std::size_t layout_index(Layout layout) { return layout == Layout::channels_first ? 0 : 1; }

}  // namespace

memory::data_type data_type_of(DType dtype) {
  switch (dtype) {
    case DType::f32: return memory::data_type::f32;
    case DType::f16: return memory::data_type::f16;
    case DType::bf16: return memory::data_type::bf16;
    case DType::i32: return memory::data_type::s32;
    case DType::i64: break;  // oneDNN has no 64-bit integer type
  }
  detail::raise(ErrorKind::Internal,
                detail::cat("dtype ", static_cast<int>(dtype), " has no oneDNN data type"));
}

std::string isa_name(dnnl::cpu_isa isa) {
  using dnnl::cpu_isa;
  switch (isa) {
    case cpu_isa::isa_default: return "default";
    case cpu_isa::sse41: return "sse41";
    case cpu_isa::avx: return "avx";
    case cpu_isa::avx2: return "avx2";
    case cpu_isa::avx2_vnni: return "avx2_vnni";
    case cpu_isa::avx2_vnni_2: return "avx2_vnni_2";
    case cpu_isa::avx512_core: return "avx512_core";
    case cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case cpu_isa::avx512_core_fp16: return "avx512_core_fp16";
    case cpu_isa::avx512_core_amx: return "avx512_core_amx";
    case cpu_isa::avx512_core_amx_fp16: return "avx512_core_amx_fp16";
  }
  return detail::cat("isa_", static_cast<int>(isa));
}

ConvGeometry conv_geometry(const ConvDesc& desc) {
  const int n = desc.spatial_dims;
  DNNX_CHECK_ARG(n >= 1 && n <= 3, "spatial_dims must be 1, 2 or 3, got ", n);
  const auto s = static_cast<std::size_t>(n - 1);
  const std::size_t l = layout_index(desc.layout);
  const memory::data_type type = data_type_of(desc.dtype);

  ConvGeometry geometry;
  memory::dims src{desc.batch, desc.in_channels};
  memory::dims dst{desc.batch, desc.out_channels};
  memory::dims weights;
  if (desc.groups == 1) {
    weights = {desc.out_channels, desc.in_channels};
  } else {
    weights = {desc.groups, desc.out_channels / desc.groups, desc.in_channels / desc.groups};
  }
  for (int i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    src.push_back(desc.input[k]);
    dst.push_back(desc.output_size(i));
    weights.push_back(desc.kernel[k]);
    geometry.strides.push_back(desc.stride[k]);
    geometry.dilates.push_back(desc.dilation[k] - 1);
    geometry.padding_l.push_back(desc.pad_before[k]);
    geometry.padding_r.push_back(desc.pad_after[k]);
  }
  geometry.src = memory::desc(src, type, activation_tags[l][s]);
  geometry.dst = memory::desc(dst, type, activation_tags[l][s]);
  geometry.src_transposed = memory::desc(src, type, activation_tags[1 - l][s]);
  geometry.dst_transposed = memory::desc(dst, type, activation_tags[1 - l][s]);
  geometry.layout = desc.layout;
  geometry.weights = memory::desc(
      weights, type, desc.groups == 1 ? weights_tags[l][s] : grouped_weights_tags[l][s]);
  return geometry;
}

memory::desc any_layout(const memory::desc& md) {
  return memory::desc(md.get_dims(), md.get_data_type(), Tag::any);
}

bool same_layout(const memory::desc& a, const memory::desc& b) {
  if (a == b) return true;
  if (a.get_format_kind() != memory::format_kind::blocked ||
      b.get_format_kind() != memory::format_kind::blocked)
    return false;
  if (a.get_data_type() != b.get_data_type() || a.get_dims() != b.get_dims()) return false;
  if (a.get_inner_nblks() != 0 || b.get_inner_nblks() != 0) return false;
  if (a.get_submemory_offset() != b.get_submemory_offset()) return false;
  const memory::dims dims = a.get_dims();
  const memory::dims a_strides = a.get_strides();
  const memory::dims b_strides = b.get_strides();
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] != 1 && a_strides[i] != b_strides[i]) return false;
  }
  return a.get_size() == b.get_size();
}

memory::desc bias_md(const ConvDesc& desc, DType dtype) {
  memory::dims dims(static_cast<std::size_t>(desc.spatial_dims + 2), 1);
  dims[1] = desc.out_channels;
  return memory::desc(dims, data_type_of(dtype),
                      activation_tags[0][static_cast<std::size_t>(desc.spatial_dims - 1)]);
}

}  // namespace dnnx::onednn
