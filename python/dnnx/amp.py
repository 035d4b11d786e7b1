"""``dnnx.amp.GradScaler``: torch.cuda.amp.GradScaler's API (scale, unscale_, step, update,
get_scale, state_dict, ...) on dnnx's unscale and update_scale ops. The scale, the growth
tracker and found_inf stay on the device. ``step(optimizer)`` hands a dnnx.optim optimizer the
device found_inf, so a step with inf or NaN gradients is skipped on the device without the host
reading anything; for any other optimizer it reads found_inf (one synchronisation, as PyTorch's
GradScaler does) and calls ``optimizer.step()`` only when it is 0.
"""

import enum

import torch

from .optim import _Optimizer, flat, unscale, unscale_desc, update_scale

__all__ = ["GradScaler"]


class _Stage(enum.Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


class GradScaler:
    """GradScaler(init_scale=2.**16, growth_factor=2.0, backoff_factor=0.5,
    growth_interval=2000, enabled=True, *, ctx=None)."""

    def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True, *, ctx=None):
        self._enabled = enabled
        self._init_scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._init_growth_tracker = 0
        self.ctx = ctx
        self._scale = None
        self._growth_tracker = None
        self._per_optimizer = {}

    def _lazy_init(self, device):
        self._scale = torch.full((1,), self._init_scale, dtype=torch.float32, device=device)
        self._growth_tracker = torch.full((1,), self._init_growth_tracker, dtype=torch.int32,
                                          device=device)

    def _state(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer),
                                              {"stage": _Stage.READY, "found_inf": {}})

    def scale(self, outputs):
        """outputs * scale (a tensor, or the tensors of a list / tuple / iterable)."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, torch.Tensor):
            if self._scale is None:
                self._lazy_init(outputs.device)
            return outputs * self._scale.to(device=outputs.device, non_blocking=True)
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(v) for v in outputs)
        return map(self.scale, outputs)

    def unscale_(self, optimizer):
        """Divides the gradients of `optimizer`'s parameters by the scale in place, one dnnx call
        per device and dtype, and records per device whether any was inf or NaN."""
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state["stage"] is _Stage.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the "
                               "last update().")
        if state["stage"] is _Stage.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        if self._scale is None:
            raise RuntimeError("unscale_() before scale(): the scaler has no scale yet")
        buckets = {}
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is None or p.grad.numel() == 0:
                    continue
                if p.grad.is_sparse:
                    raise ValueError("dnnx.amp.GradScaler: sparse gradients are not supported")
                buckets.setdefault((p.grad.device, p.grad.dtype), []).append(
                    flat(p.grad, "grad"))
        found = state["found_inf"]
        for (device, _), grads in buckets.items():
            if device not in found:
                found[device] = torch.zeros((1,), dtype=torch.float32, device=device)
            unscale(unscale_desc(grads, from_scale=True), grads, found[device],
                    self._scale.to(device), ctx=self.ctx)
        state["stage"] = _Stage.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """unscale_(optimizer) if not done yet, then the optimizer's step unless a gradient was
        inf or NaN; returns what the step returned (None when skipped on the host)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is "
                               "enabled.")
        state = self._state(optimizer)
        if state["stage"] is _Stage.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is _Stage.READY:
            self.unscale_(optimizer)
        found = state["found_inf"]
        result = None
        if isinstance(optimizer, _Optimizer) and len(found) == 1:
            result = optimizer.step(*args, found_inf=next(iter(found.values())), **kwargs)
        elif not found or not sum(v.item() for v in found.values()):
            result = optimizer.step(*args, **kwargs)
        state["stage"] = _Stage.STEPPED
        return result

    def update(self, new_scale=None):
        """The scale for the next iteration: `new_scale` (a float or a 1-element tensor) when
        given, else backed off when any optimizer stepped saw an inf or NaN since the last
        update, grown after growth_interval clean steps (on the device)."""
        if not self._enabled:
            return
        if self._scale is None:
            return
        if new_scale is not None:
            if isinstance(new_scale, torch.Tensor):
                self._scale.copy_(new_scale.reshape(1))
            else:
                self._scale.fill_(float(new_scale))
        else:
            found = [f.to(self._scale.device) for state in self._per_optimizer.values()
                     for f in state["found_inf"].values()]
            if found:
                combined = found[0]
                for other in found[1:]:
                    combined = combined + other
                update_scale(self._scale, self._growth_tracker, combined,
                             growth_factor=self._growth_factor,
                             backoff_factor=self._backoff_factor,
                             growth_interval=self._growth_interval, ctx=self.ctx)
        self._per_optimizer = {}

    def get_scale(self):
        """The current scale as a float (reads the device: for logging, not per step)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale.item())

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = int(new_interval)

    def is_enabled(self):
        return self._enabled

    def _growth_tracker_value(self):
        return 0 if self._growth_tracker is None else int(self._growth_tracker.item())

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor,
                "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker_value()}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._scale is not None:
            self._scale.fill_(self._init_scale)
            self._growth_tracker.fill_(self._init_growth_tracker)
