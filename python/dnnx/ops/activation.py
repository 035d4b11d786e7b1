"""Activations (dnnx::activation_fwd / activation_bwd)."""

from .. import _dnnx
from .._arrays import arg, dtype_name, layout_name, output, shape_of
from .._context import resolve

ActivationDesc = _dnnx.ActivationDesc


def desc_for(src, kind="relu", alpha=1.0, ceiling=6.0, saved="src_and_dst"):
    """The ActivationDesc of `kind` over src ('relu', 'tanh', 'sigmoid', 'elu', 'swish',
    'clipped_relu', 'identity')."""
    return ActivationDesc(kind=kind, alpha=alpha, ceiling=ceiling, dims=shape_of(src, "src"),
                          dtype=dtype_name(src, "src"), layout=layout_name(src, "src"),
                          saved=saved)


def fwd(desc, src, *, out=None, ctx=None):
    """dst = f(src); out may be src (in place)."""
    src = arg(src)
    dst = output(out, src, desc.dims, desc.dtype, desc.layout)
    _dnnx.activation_fwd(resolve(ctx, src), desc, src, dst)
    return dst


def bwd(desc, diff_dst, src=None, dst=None, *, out=None, ctx=None):
    """diff_src = diff_dst * f'(x), from the forward tensors desc.saved names."""
    diff_dst = arg(diff_dst)
    diff_src = output(out, diff_dst, desc.dims, desc.dtype, desc.layout)
    _dnnx.activation_bwd(resolve(ctx, diff_dst), desc, arg(src), arg(dst), diff_dst, diff_src)
    return diff_src
