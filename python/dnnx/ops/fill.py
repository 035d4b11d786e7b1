"""Filling a tensor in place with a constant or seeded random values (dnnx::fill_fwd)."""

from .. import _dnnx
from .._arrays import arg, dtype_name, layout_name, shape_of
from .._context import resolve
from .._random import generator_or_default

FillDesc = _dnnx.FillDesc


def desc_for(tensor, distribution="uniform"):
    """The FillDesc of filling `tensor` (its dims, dtype and dense layout) with `distribution`
    ('constant', 'uniform', 'normal' or 'trunc_normal')."""
    return FillDesc(dims=shape_of(tensor, "dst"), dtype=dtype_name(tensor, "dst"),
                    layout=layout_name(tensor, "dst"), distribution=distribution)


def fwd(desc, dst, *, value=0.0, low=0.0, high=1.0, mean=0.0, std=1.0, a=-2.0, b=2.0,
        generator=None, ctx=None):
    """Fills dst in place with desc.distribution (the parameters it does not use are ignored),
    drawing from `generator` (default: dnnx.default_generator), which advances past the values
    drawn; returns dst."""
    dst_arg = arg(dst)
    _dnnx.fill_fwd(resolve(ctx, dst_arg), desc, generator_or_default(generator), dst_arg, value,
                   low, high, mean, std, a, b)
    return dst


def constant(tensor, value, *, ctx=None):
    """Every element of `tensor` becomes `value`, in place; returns tensor."""
    return fwd(desc_for(tensor, "constant"), tensor, value=value, ctx=ctx)


def uniform(tensor, low=0.0, high=1.0, *, generator=None, ctx=None):
    """U(low, high) in place; returns tensor."""
    return fwd(desc_for(tensor, "uniform"), tensor, low=low, high=high, generator=generator,
               ctx=ctx)


def normal(tensor, mean=0.0, std=1.0, *, generator=None, ctx=None):
    """N(mean, std^2) in place; returns tensor."""
    return fwd(desc_for(tensor, "normal"), tensor, mean=mean, std=std, generator=generator,
               ctx=ctx)


def trunc_normal(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, *, generator=None, ctx=None):
    """N(mean, std^2) restricted to [a, b] in place (torch.nn.init.trunc_normal_); returns
    tensor."""
    return fwd(desc_for(tensor, "trunc_normal"), tensor, mean=mean, std=std, a=a, b=b,
               generator=generator, ctx=ctx)
