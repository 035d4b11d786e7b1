#pragma once
// How a ConvDesc reads in oneDNN terms: data types, dims, format tags of the user's tensors, and
// the convolution geometry (oneDNN counts dilation from 0, dnnx from 1).

#include <dnnx/ops/conv.hpp>
#include <dnnx/tensor.hpp>

#include <oneapi/dnnl/dnnl.hpp>

#include <string>

namespace dnnx::onednn {

using dnnl::memory;

/// The oneDNN data type of a dnnx dtype.
memory::data_type data_type_of(DType dtype);

/// "avx512_core_amx", "avx2", ... for the ISA oneDNN dispatches to.
std::string isa_name(dnnl::cpu_isa isa);

/// The memory descriptors of the user's dense tensors and the geometry of one ConvDesc.
struct ConvGeometry {
  memory::desc src;      ///< N, C, spatial in desc.layout (also diff_src)
  memory::desc weights;  ///< O, I, k (groups: G, O/G, I/G, k) in desc.layout (also diff_weights)
  memory::desc dst;      ///< N, O, output spatial in desc.layout (also diff_dst)
  memory::desc src_transposed;  ///< src in the other plain layout (channels_last <-> first)
  memory::desc dst_transposed;  ///< dst in the other plain layout
  Layout layout = Layout::channels_first;  ///< desc.layout
  memory::dims strides;
  memory::dims dilates;  ///< desc.dilation - 1
  memory::dims padding_l;
  memory::dims padding_r;
};

ConvGeometry conv_geometry(const ConvDesc& desc);

/// The same dims and data type as `md` with format_tag::any (oneDNN picks the layout).
memory::desc any_layout(const memory::desc& md);

/// True when `a` and `b` describe the same bytes: equal descriptors, or plain (unblocked)
/// layouts of equal dims and type whose strides differ only along dimensions of size 1.
bool same_layout(const memory::desc& a, const memory::desc& b);

/// Bias of the conv broadcast against dst: dims 1, O, 1... (contiguous O), `dtype`.
memory::desc bias_md(const ConvDesc& desc, DType dtype);

}  // namespace dnnx::onednn
