"""Dropout (dnnx::dropout_fwd / dropout_fwd_training / dropout_bwd)."""

from .. import _dnnx
from .._arrays import arg, dtype_name, layout_name, output, shape_of
from .._context import resolve
from .._random import generator_or_default

DropoutDesc = _dnnx.DropoutDesc
SavedState = _dnnx.SavedState


def desc_for(src, p=0.5, reproducible=True):
    """The DropoutDesc of F.dropout(src, p); dtype and layout from src."""
    return DropoutDesc(dims=shape_of(src, "src"), p=p, dtype=dtype_name(src, "src"),
                       layout=layout_name(src, "src"), reproducible=reproducible)


def fwd(desc, src, *, out=None, ctx=None):
    """Inference: dst = src (a copy)."""
    src = arg(src)
    dst = output(out, src, desc.dims, desc.dtype, desc.layout)
    _dnnx.dropout_fwd(resolve(ctx, src), desc, src, dst)
    return dst


def fwd_training(desc, src, *, generator=None, out=None, ctx=None):
    """Training: (dst, state). Each element is kept with probability 1 - p and scaled by
    1 / (1 - p), the mask drawn from `generator` (default: dnnx.default_generator, advanced past
    it); `state` (a SavedState) holds the mask for bwd."""
    src = arg(src)
    dst = output(out, src, desc.dims, desc.dtype, desc.layout)
    state = SavedState()
    _dnnx.dropout_fwd_training(resolve(ctx, src), desc, generator_or_default(generator), src,
                               dst, state)
    return dst, state


def bwd(desc, diff_dst, state, *, out=None, ctx=None):
    """diff_src = diff_dst * mask / (1 - p), the mask from the `state` of fwd_training."""
    diff_dst = arg(diff_dst)
    diff_src = output(out, diff_dst, desc.dims, desc.dtype, desc.layout)
    _dnnx.dropout_bwd(resolve(ctx, diff_dst), desc, diff_dst, diff_src, state)
    return diff_src
