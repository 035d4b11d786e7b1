"""torch.nn.init's initialisers on dnnx's fill op (include/dnnx/init.hpp): the same names,
arguments, defaults and formulas, in place on the caller's tensor (any framework, any device; no
copy), drawing from a dnnx.Generator (``generator=``, default dnnx.default_generator) so that
the same generator state gives the same bits on every backend. Each returns its tensor. Bad
arguments raise dnnx.InvalidArgument (a ValueError) where PyTorch raises ValueError.

Not provided: eye_, dirac_, orthogonal_ and sparse_ (no dnnx op computes them).
"""

from . import _dnnx
from ._arrays import arg, shape_of
from ._context import resolve
from ._random import generator_or_default

__all__ = ["calculate_gain", "calculate_fan_in_and_fan_out", "uniform_", "normal_",
           "trunc_normal_", "constant_", "zeros_", "ones_", "xavier_uniform_", "xavier_normal_",
           "kaiming_uniform_", "kaiming_normal_"]


def calculate_gain(nonlinearity, param=None):
    """torch.nn.init.calculate_gain."""
    return _dnnx.init_calculate_gain(nonlinearity, None if param is None else float(param))


def calculate_fan_in_and_fan_out(tensor):
    """(fan_in, fan_out) of a weight tensor (torch.nn.init._calculate_fan_in_and_fan_out)."""
    return _dnnx.init_calculate_fans(shape_of(tensor, "tensor"))


def uniform_(tensor, a=0.0, b=1.0, *, generator=None, ctx=None):
    """U(a, b)."""
    view = arg(tensor)
    _dnnx.init_uniform(resolve(ctx, view), generator_or_default(generator), view, a, b)
    return tensor


def normal_(tensor, mean=0.0, std=1.0, *, generator=None, ctx=None):
    """N(mean, std^2)."""
    view = arg(tensor)
    _dnnx.init_normal(resolve(ctx, view), generator_or_default(generator), view, mean, std)
    return tensor


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, *, generator=None, ctx=None):
    """N(mean, std^2) restricted to [a, b]."""
    view = arg(tensor)
    _dnnx.init_trunc_normal(resolve(ctx, view), generator_or_default(generator), view, mean, std,
                            a, b)
    return tensor


def constant_(tensor, val, *, ctx=None):
    """Every element `val`."""
    view = arg(tensor)
    _dnnx.init_constant(resolve(ctx, view), view, val)
    return tensor


def zeros_(tensor, *, ctx=None):
    return constant_(tensor, 0.0, ctx=ctx)


def ones_(tensor, *, ctx=None):
    return constant_(tensor, 1.0, ctx=ctx)


def xavier_uniform_(tensor, gain=1.0, *, generator=None, ctx=None):
    """U(-a, a), a = gain sqrt(6 / (fan_in + fan_out))."""
    view = arg(tensor)
    _dnnx.init_xavier(resolve(ctx, view), generator_or_default(generator), view, gain, True)
    return tensor


def xavier_normal_(tensor, gain=1.0, *, generator=None, ctx=None):
    """N(0, std^2), std = gain sqrt(2 / (fan_in + fan_out))."""
    view = arg(tensor)
    _dnnx.init_xavier(resolve(ctx, view), generator_or_default(generator), view, gain, False)
    return tensor


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", *, generator=None,
                     ctx=None):
    """U(-bound, bound), bound = gain sqrt(3 / fan) (He et al.); a tensor with no elements is
    left alone."""
    view = arg(tensor)
    _dnnx.init_kaiming(resolve(ctx, view), generator_or_default(generator), view, a, mode,
                       nonlinearity, True)
    return tensor


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", *, generator=None,
                    ctx=None):
    """N(0, std^2), std = gain / sqrt(fan); a tensor with no elements is left alone."""
    view = arg(tensor)
    _dnnx.init_kaiming(resolve(ctx, view), generator_or_default(generator), view, a, mode,
                       nonlinearity, False)
    return tensor


def kaiming_bound(dims, a=0, mode="fan_in", nonlinearity="leaky_relu", uniform=True):
    """The bound of kaiming_uniform_ (uniform) or the std of kaiming_normal_ on `dims`."""
    return _dnnx.init_kaiming_bound(tuple(dims), a, mode, nonlinearity, uniform)


def xavier_bound(dims, gain=1.0, uniform=True):
    """The bound of xavier_uniform_ (uniform) or the std of xavier_normal_ on `dims`."""
    return _dnnx.init_xavier_bound(tuple(dims), gain, uniform)
