"""Broadcasting tensor add (dnnx::add_fwd / add_bwd)."""

from .. import _dnnx
from .._arrays import arg, dtype_name, layout_name, output, shape_of
from .._context import resolve

AddDesc = _dnnx.AddDesc


def desc_for(src, dst, alpha=1.0, beta=1.0):
    """dst = alpha * broadcast(src) + beta * dst; dtype and layout from dst."""
    return AddDesc(src_dims=shape_of(src, "src"), dst_dims=shape_of(dst, "dst"), alpha=alpha,
                   beta=beta, dtype=dtype_name(dst, "dst"), layout=layout_name(dst, "dst"))


def fwd(desc, src, dst, *, ctx=None):
    """dst = alpha * broadcast(src) + beta * dst, in place; returns dst."""
    _dnnx.add_fwd(resolve(ctx, src), desc, arg(src), dst)
    return dst


def bwd(desc, diff_dst, *, out=None, ctx=None):
    """diff_src = alpha * diff_dst summed over the broadcast axes."""
    diff_dst = arg(diff_dst)
    diff_src = output(out, diff_dst, desc.src_dims, desc.dtype, desc.layout)
    _dnnx.add_bwd(resolve(ctx, diff_dst), desc, diff_dst, diff_src)
    return diff_src
