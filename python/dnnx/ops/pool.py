"""Pooling (dnnx::pool_fwd / pool_bwd)."""

from .. import _dnnx
from .._arrays import arg, dtype_name, layout_name, output, shape_of
from .._context import resolve

PoolDesc = _dnnx.PoolDesc


def desc_for(src, kernel, stride=None, padding=0, dilation=1, mode="max", ceil_mode=False,
             indices=False):
    """The PoolDesc of F.max_pool*d / avg_pool*d on src (mode 'max', 'avg_include_pad' =
    count_include_pad=True, 'avg_exclude_pad'); stride None = the kernel."""
    desc = PoolDesc.from_shapes(shape_of(src, "src"), kernel, stride, padding, dilation, mode,
                                ceil_mode, dtype_name(src, "src"), layout_name(src, "src"))
    desc.indices = indices
    return desc


def fwd(desc, src, *, out=None, ctx=None):
    """dst, or (dst, indices) when desc.indices (indices: int64, flat within each (n, c) plane);
    out= takes the same."""
    src = arg(src)
    out_dst, out_indices = out if desc.indices and out is not None else (out, None)
    dst = output(out_dst, src, desc.dst_dims(), desc.dtype, desc.layout)
    if not desc.indices:
        _dnnx.pool_fwd(resolve(ctx, src), desc, src, dst)
        return dst
    indices = output(out_indices, src, desc.dst_dims(), "i64", desc.layout)
    _dnnx.pool_fwd(resolve(ctx, src), desc, src, dst, indices)
    return dst, indices


def bwd(desc, diff_dst, src=None, dst=None, *, indices=None, out=None, ctx=None):
    """diff_src from the forward's src and dst, or from its indices when desc.indices."""
    diff_dst = arg(diff_dst)
    diff_src = output(out, diff_dst, desc.src_dims(), desc.dtype, desc.layout)
    if desc.indices:
        _dnnx.pool_bwd_indices(resolve(ctx, diff_dst), desc, diff_dst, arg(indices), diff_src)
    else:
        _dnnx.pool_bwd(resolve(ctx, diff_dst), desc, arg(src), arg(dst), diff_dst, diff_src)
    return diff_src
