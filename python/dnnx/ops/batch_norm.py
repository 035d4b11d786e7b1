"""Batch normalization (dnnx::batch_norm_fwd / batch_norm_bwd)."""

from .. import _dnnx
from .._arrays import arg, dtype_name, layout_name, output, shape_of
from .._context import resolve

BatchNormDesc = _dnnx.BatchNormDesc


def desc_for(src, training=True, eps=1e-5, momentum=0.1, affine=True, mode="spatial"):
    """The BatchNormDesc of F.batch_norm on src (mode 'spatial': BatchNorm1d/2d/3d)."""
    return BatchNormDesc(dims=shape_of(src, "src"), mode=mode, training=training, affine=affine,
                         eps=eps, momentum=momentum, dtype=dtype_name(src, "src"),
                         layout=layout_name(src, "src"))


def fwd(desc, src, scale=None, shift=None, running_mean=None, running_var=None, *, out=None,
        ctx=None):
    """Training: (dst, saved_mean, saved_inv_std), updating running_mean / running_var in place
    when given. Inference: dst, from the running statistics. Parameters and statistics are f32
    of desc.param_dims()."""
    src, scale, shift = arg(src), arg(scale), arg(shift)
    running_mean, running_var = arg(running_mean), arg(running_var)
    dst = output(out, src, desc.dims, desc.dtype, desc.layout)
    if not desc.training:
        _dnnx.batch_norm_fwd(resolve(ctx, src), desc, src, dst, scale, shift, running_mean,
                             running_var, None, None)
        return dst
    saved_mean = output(None, src, desc.param_dims(), "f32", desc.layout)
    saved_inv_std = output(None, src, desc.param_dims(), "f32", desc.layout)
    _dnnx.batch_norm_fwd(resolve(ctx, src), desc, src, dst, scale, shift, running_mean, running_var,
                         saved_mean, saved_inv_std)
    return dst, saved_mean, saved_inv_std


def bwd(desc, src, diff_dst, scale=None, saved_mean=None, saved_inv_std=None, running_mean=None,
        running_var=None, *, out=None, ctx=None):
    """(diff_src, diff_scale, diff_shift) when desc.affine, else diff_src. Training uses
    saved_mean / saved_inv_std, inference the running statistics."""
    src, diff_dst, scale = arg(src), arg(diff_dst), arg(scale)
    diff_src = output(out, diff_dst, desc.dims, desc.dtype, desc.layout)
    diff_scale = diff_shift = None
    if desc.affine:
        diff_scale = output(None, src, desc.param_dims(), "f32", desc.layout)
        diff_shift = output(None, src, desc.param_dims(), "f32", desc.layout)
    _dnnx.batch_norm_bwd(resolve(ctx, src), desc, src, diff_dst, scale, arg(running_mean),
                         arg(running_var), arg(saved_mean), arg(saved_inv_std), diff_src,
                         diff_scale, diff_shift)
    return (diff_src, diff_scale, diff_shift) if desc.affine else diff_src
