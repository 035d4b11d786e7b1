"""Convolution (dnnx::conv_fwd / conv_bwd_data / conv_bwd_weights / conv_bias_*)."""

from .. import _dnnx
from .._arrays import arg, dtype_name, layout_name, output, shape_of
from .._context import resolve

ConvDesc = _dnnx.ConvDesc


def desc_for(src, weights, stride=1, padding=0, dilation=1, groups=1):
    """The ConvDesc of F.conv1d/2d/3d(src, weights, stride=, padding=, dilation=, groups=): dtype
    and layout from src. `padding` is symmetric; set pad_before / pad_after for asymmetric."""
    return ConvDesc.from_shapes(shape_of(src, "src"), shape_of(weights, "weights"), stride,
                                padding, dilation, groups, dtype_name(src, "src"),
                                layout_name(src, "src"))


def fwd(desc, src, weights, bias=None, *, out=None, ctx=None):
    """dst = conv(src, weights) (+ bias per channel)."""
    src, weights, bias = arg(src), arg(weights), arg(bias)
    dst = output(out, src, desc.dst_dims(), desc.dtype, desc.layout)
    _dnnx.conv_fwd(resolve(ctx, src), desc, src, weights, dst, bias)
    return dst


def bwd_data(desc, diff_dst, weights, *, out=None, ctx=None):
    """diff_src: the gradient w.r.t. src given diff_dst."""
    diff_dst, weights = arg(diff_dst), arg(weights)
    diff_src = output(out, diff_dst, desc.src_dims(), desc.dtype, desc.layout)
    _dnnx.conv_bwd_data(resolve(ctx, diff_dst), desc, diff_dst, weights, diff_src)
    return diff_src


def bwd_weights(desc, src, diff_dst, *, bias=False, out=None, ctx=None):
    """diff_weights, or (diff_weights, diff_bias) with bias=True; out= takes the same."""
    src, diff_dst = arg(src), arg(diff_dst)
    out_weights, out_bias = (out if bias and out is not None else (out, None))
    diff_weights = output(out_weights, src, desc.weights_dims(), desc.dtype, desc.layout)
    diff_bias = output(out_bias, src, desc.bias_dims(), desc.dtype) if bias else None
    _dnnx.conv_bwd_weights(resolve(ctx, src), desc, src, diff_dst, diff_weights, diff_bias)
    return (diff_weights, diff_bias) if bias else diff_weights


def bias_fwd(desc, bias, dst, *, ctx=None):
    """dst += bias per channel, in place; returns dst."""
    _dnnx.conv_bias_fwd(resolve(ctx, bias), desc, arg(bias), dst)
    return dst


def bias_bwd(desc, diff_dst, *, out=None, ctx=None):
    """diff_bias = sum of diff_dst over N and the spatial positions."""
    diff_dst = arg(diff_dst)
    diff_bias = output(out, diff_dst, desc.bias_dims(), desc.dtype)
    _dnnx.conv_bias_bwd(resolve(ctx, diff_dst), desc, diff_dst, diff_bias)
    return diff_bias
