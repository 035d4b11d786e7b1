"""The multi-tensor optimizer ops (dnnx::sgd_step, adam_step, unscale, update_scale): each call
updates every tensor of its lists at once. Tensors are dense row-major (a desc's shapes are
theirs); step, grad_scale, found_inf and the loss-scaler's scalars are f32 arrays of shape (1,)
(growth_tracker int32) on the same device. dnnx.optim and dnnx.amp build PyTorch's optimizer
and GradScaler APIs on them."""

from .. import _dnnx
from .._arrays import arg, dtype_name, shape_of
from .._context import resolve

SgdDesc = _dnnx.SgdDesc
AdamDesc = _dnnx.AdamDesc
UnscaleDesc = _dnnx.UnscaleDesc
UpdateScaleDesc = _dnnx.UpdateScaleDesc


def _shapes_dtype(params, name):
    params = list(params)
    shapes = [shape_of(p, f"{name}[{i}]") for i, p in enumerate(params)]
    dtype = dtype_name(params[0], f"{name}[0]") if params else "f32"
    return shapes, dtype


def sgd_desc(params, momentum=False, nesterov=False, maximize=False, master_weights=False,
             grad_scale=False, found_inf=False):
    """The SgdDesc of a step over `params` (their shapes; dtype from the first)."""
    shapes, dtype = _shapes_dtype(params, "params")
    return SgdDesc(shapes=shapes, dtype=dtype, momentum=momentum, nesterov=nesterov,
                   maximize=maximize, master_weights=master_weights, grad_scale=grad_scale,
                   found_inf=found_inf)


def adam_desc(params, amsgrad=False, decoupled_weight_decay=False, maximize=False,
              master_weights=False, grad_scale=False, found_inf=False):
    """The AdamDesc of a step over `params` (AdamW with decoupled_weight_decay)."""
    shapes, dtype = _shapes_dtype(params, "params")
    return AdamDesc(shapes=shapes, dtype=dtype, amsgrad=amsgrad,
                    decoupled_weight_decay=decoupled_weight_decay, maximize=maximize,
                    master_weights=master_weights, grad_scale=grad_scale, found_inf=found_inf)


def unscale_desc(grads, reset_found_inf=False, from_scale=False):
    """The UnscaleDesc of unscaling `grads`."""
    shapes, dtype = _shapes_dtype(grads, "grads")
    return UnscaleDesc(shapes=shapes, dtype=dtype, reset_found_inf=reset_found_inf,
                       from_scale=from_scale)


def _args(arrays):
    return [arg(a) for a in arrays]


def sgd(desc, params, grads, step, *, lr, momentum=0.0, dampening=0.0, weight_decay=0.0,
        master=(), momentum_buffers=(), grad_scale=None, found_inf=None, ctx=None):
    """One SGD step over every parameter, in place (params, master, momentum_buffers, step)."""
    params = _args(params)
    first = params[0] if params else arg(step)
    _dnnx.sgd_step(resolve(ctx, first), desc, lr, momentum, dampening, weight_decay, params,
                   _args(grads), _args(master), _args(momentum_buffers), arg(step),
                   arg(grad_scale), arg(found_inf))


def adam(desc, params, grads, exp_avg, exp_avg_sq, step, *, lr=1e-3, betas=(0.9, 0.999),
         eps=1e-8, weight_decay=0.0, master=(), max_exp_avg_sq=(), grad_scale=None,
         found_inf=None, ctx=None):
    """One Adam (AdamW with desc.decoupled_weight_decay) step over every parameter, in place."""
    params = _args(params)
    first = params[0] if params else arg(step)
    beta1, beta2 = betas
    _dnnx.adam_step(resolve(ctx, first), desc, lr, beta1, beta2, eps, weight_decay, params,
                    _args(grads), _args(master), _args(exp_avg), _args(exp_avg_sq),
                    _args(max_exp_avg_sq), arg(step), arg(grad_scale), arg(found_inf))


def unscale(desc, grads, found_inf, inv_scale, *, ctx=None):
    """grads *= inv_scale (1 / inv_scale with desc.from_scale) in place; found_inf = 1 when a
    gradient holds inf or NaN (torch._amp_foreach_non_finite_check_and_unscale_)."""
    found_inf = arg(found_inf)
    _dnnx.unscale(resolve(ctx, found_inf), desc, _args(grads), found_inf, arg(inv_scale))


def update_scale(scale, growth_tracker, found_inf, *, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, ctx=None):
    """torch._amp_update_scale_: scale and growth_tracker updated in place from found_inf."""
    scale = arg(scale)
    _dnnx.update_scale(resolve(ctx, scale), UpdateScaleDesc(), growth_factor, backoff_factor,
                       growth_interval, scale, arg(growth_tracker), arg(found_inf))
