"""PyTorch-style optimizers on dnnx's multi-tensor ops: ``dnnx.optim.SGD``, ``Adam`` and
``AdamW`` are torch.optim.Optimizer subclasses (param groups, state, state_dict, zero_grad as
PyTorch has them) whose ``step()`` runs one dnnx call per param group (per device and dtype
within a group) over every parameter with a gradient. The state lives in torch tensors:
``momentum_buffer``; ``exp_avg``, ``exp_avg_sq``, ``max_exp_avg_sq`` (f32, as the parameter is
laid out); ``step`` (an f32 tensor of shape (1,), one shared by the parameters of a call: the
count lives on the device, so a step that dnnx.amp.GradScaler skips for an inf changes nothing
without the host reading anything); with ``master_weights=True``, ``master`` (an f32 copy of an
f16 / bf16 parameter, made from it on the first step: the op updates the copy and writes it
rounded to the parameter, so small updates accumulate instead of vanishing in f16).

The op-level calls (dnnx.ops.optim) are here too: ``sgd``, ``adam``, ``unscale``,
``update_scale`` and their desc builders.
"""

import torch

from ._errors import InvalidArgument
from .ops.optim import (AdamDesc, SgdDesc, UnscaleDesc, UpdateScaleDesc, adam,  # noqa: F401
                        adam_desc, sgd, sgd_desc, unscale, unscale_desc, update_scale)

__all__ = ["SGD", "Adam", "AdamW", "sgd", "adam", "unscale", "update_scale"]


def flat(tensor, name):
    """A 1-d view of a dense tensor in its memory order (what an elementwise multi-tensor op
    needs: a channels_last parameter and its gradient run as they lie)."""
    if tensor.is_contiguous():
        return tensor.view(-1)
    order = sorted(range(tensor.dim()), key=lambda d: (-tensor.stride(d), -tensor.size(d)))
    permuted = tensor.permute(order)
    if permuted.is_contiguous():
        return permuted.reshape(-1)
    raise InvalidArgument(f"{name}: not dense (shape {tuple(tensor.shape)}, strides "
                          f"{tuple(tensor.stride())}); make it contiguous")


def grouped(params, name="params"):
    """The parameters with a gradient, by (device, dtype), in order."""
    buckets = {}
    for index, p in enumerate(params):
        if p.grad is None:
            continue
        if p.grad.is_sparse:
            raise InvalidArgument(f"{name}[{index}]: sparse gradients are not supported")
        if p.grad.stride() != p.stride() and p.dim() > 0 and p.numel() > 1:
            raise InvalidArgument(
                f"{name}[{index}]: the gradient's strides {tuple(p.grad.stride())} differ from "
                f"the parameter's {tuple(p.stride())}")
        if p.numel() == 0:
            continue
        buckets.setdefault((p.device, p.dtype), []).append(p)
    return buckets


class _Optimizer(torch.optim.Optimizer):
    """The shared part: param groups, buckets, the shared step tensor, the desc cache."""

    def __init__(self, params, defaults, ctx=None, master_weights=False):
        super().__init__(params, defaults)
        self.ctx = ctx
        self.master_weights = bool(master_weights)
        self._descs = {}

    def _state(self, p, group):
        state = self.state[p]
        if not state:
            for name in self._state_names(group):
                state[name] = torch.zeros_like(p, dtype=torch.float32,
                                               memory_format=torch.preserve_format)
            if self._has_master(p):
                state["master"] = p.detach().to(torch.float32, memory_format=torch.preserve_format)
        return state

    def _has_master(self, p):
        """Whether `p` is stepped through an f32 master copy (f16 / bf16 with master_weights)."""
        return self.master_weights and p.dtype in (torch.float16, torch.bfloat16)

    def _masters(self, params, states):
        if not self._has_master(params[0]):
            return [], False
        return [flat(s["master"], "master") for s in states], True

    def _step_tensor(self, params):
        step = None
        for p in params:
            step = self.state[p].get("step")
            if step is not None:
                break
        if step is None:
            step = torch.zeros((1,), dtype=torch.float32, device=params[0].device)
        for p in params:
            self.state[p]["step"] = step
        return step

    def _desc(self, build, params, flags):
        shapes = tuple(p.numel() for p in params)
        key = (shapes, params[0].dtype, flags)
        desc = self._descs.get(key)
        if desc is None:
            desc = build([flat(p, "params") for p in params], *flags)
            self._descs[key] = desc
        return desc

    @torch.no_grad()
    def step(self, closure=None, *, grad_scale=None, found_inf=None):
        """One step over every param group; `grad_scale` divides the gradients and a nonzero
        `found_inf` skips the step on the device (f32 tensors of shape (1,) on the parameters'
        device: dnnx.amp.GradScaler passes them)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for (device, _), params in grouped(group["params"]).items():
                self._step(group, params, _on(grad_scale, device), _on(found_inf, device))
        return loss


def _on(scalar, device):
    if scalar is None or scalar.device == device:
        return scalar
    return scalar.to(device)


class SGD(_Optimizer):
    """torch.optim.SGD(params, lr, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
    maximize=False) on dnnx's sgd op. The first step of a group (step count 1) sets the momentum
    buffers to the gradients, as PyTorch's first step does."""

    def __init__(self, params, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                 *, maximize=False, master_weights=False, ctx=None):
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize)
        super().__init__(params, defaults, ctx, master_weights)

    def _state_names(self, group):
        return ("momentum_buffer",) if group["momentum"] != 0 else ()

    def _step(self, group, params, grad_scale, found_inf):
        has_momentum = group["momentum"] != 0
        states = [self._state(p, group) for p in params]
        master, has_master = self._masters(params, states)
        flags = (has_momentum, group["nesterov"], group["maximize"], has_master,
                 grad_scale is not None, found_inf is not None)
        desc = self._desc(sgd_desc, params, flags)
        buffers = [flat(s["momentum_buffer"], "momentum_buffer") for s in states] \
            if has_momentum else []
        sgd(desc, [flat(p, "params") for p in params], [flat(p.grad, "grads") for p in params],
            self._step_tensor(params), lr=group["lr"], momentum=group["momentum"],
            dampening=group["dampening"], weight_decay=group["weight_decay"],
            master=master, momentum_buffers=buffers, grad_scale=grad_scale,
            found_inf=found_inf, ctx=self.ctx)


class Adam(_Optimizer):
    """torch.optim.Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
    amsgrad=False, *, maximize=False) on dnnx's adam op; master_weights=True steps f16 / bf16
    parameters through f32 master copies."""

    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 amsgrad=False, *, maximize=False, master_weights=False, ctx=None):
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize)
        super().__init__(params, defaults, ctx, master_weights)

    def _state_names(self, group):
        names = ("exp_avg", "exp_avg_sq")
        return names + ("max_exp_avg_sq",) if group["amsgrad"] else names

    def _step(self, group, params, grad_scale, found_inf):
        states = [self._state(p, group) for p in params]
        master, has_master = self._masters(params, states)
        flags = (group["amsgrad"], self._decoupled, group["maximize"], has_master,
                 grad_scale is not None, found_inf is not None)
        desc = self._desc(adam_desc, params, flags)

        def of(name):
            return [flat(s[name], name) for s in states]

        adam(desc, [flat(p, "params") for p in params], [flat(p.grad, "grads") for p in params],
             of("exp_avg"), of("exp_avg_sq"), self._step_tensor(params), master=master,
             lr=group["lr"],
             betas=group["betas"], eps=group["eps"], weight_decay=group["weight_decay"],
             max_exp_avg_sq=of("max_exp_avg_sq") if group["amsgrad"] else [],
             grad_scale=grad_scale, found_inf=found_inf, ctx=self.ctx)


class AdamW(Adam):
    """torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
    amsgrad=False, *, maximize=False): Adam with decoupled weight decay."""

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, master_weights=False, ctx=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         master_weights=master_weights, ctx=ctx)
