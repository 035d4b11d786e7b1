"""Softmax and log-softmax (dnnx::softmax_fwd / softmax_bwd)."""

from .. import _dnnx
from .._arrays import arg, dtype_name, layout_name, output, shape_of
from .._context import resolve

SoftmaxDesc = _dnnx.SoftmaxDesc


def desc_for(src, mode="channel", log=False):
    """Softmax over the channels (dim 1, mode 'channel') or each whole sample ('instance')."""
    return SoftmaxDesc(dims=shape_of(src, "src"), mode=mode, log=log,
                       dtype=dtype_name(src, "src"), layout=layout_name(src, "src"))


def fwd(desc, src, *, out=None, ctx=None):
    """dst = softmax(src) (or log-softmax); out may be src (in place)."""
    src = arg(src)
    dst = output(out, src, desc.dims, desc.dtype, desc.layout)
    _dnnx.softmax_fwd(resolve(ctx, src), desc, src, dst)
    return dst


def bwd(desc, dst, diff_dst, *, out=None, ctx=None):
    """diff_src from the forward's output dst and diff_dst."""
    dst, diff_dst = arg(dst), arg(diff_dst)
    diff_src = output(out, diff_dst, desc.dims, desc.dtype, desc.layout)
    _dnnx.softmax_bwd(resolve(ctx, dst), desc, dst, diff_dst, diff_src)
    return diff_src
