"""The fused forward convolution (dnnx::conv_fused_fwd)."""

from .. import _dnnx
from .._arrays import arg, output
from .._context import resolve
from . import conv

ConvFusedDesc = _dnnx.ConvFusedDesc


def desc_for(src, weights, stride=1, padding=0, dilation=1, groups=1, bias=False,
             residual=False, residual_scale=1.0, activation="relu"):
    """act(conv(src, weights) + bias + residual_scale * residual) with the convolution of
    conv.desc_for."""
    return ConvFusedDesc(conv=conv.desc_for(src, weights, stride, padding, dilation, groups),
                         bias=bias, residual=residual, residual_scale=residual_scale,
                         activation=activation)


def fwd(desc, src, weights, bias=None, residual=None, *, out=None, ctx=None):
    """dst = act(conv(src, weights) + bias + residual_scale * residual). out may be residual."""
    src, weights, bias, residual = arg(src), arg(weights), arg(bias), arg(residual)
    dst = output(out, src, desc.dst_dims(), desc.conv.dtype, desc.conv.layout)
    _dnnx.conv_fused_fwd(resolve(ctx, src), desc, src, weights, bias, residual, dst)
    return dst
