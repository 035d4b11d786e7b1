"""dnnx's PyTorch ops as torch.library custom ops (PyTorch >= 2.4), so that torch.compile keeps
them as opaque nodes of its graph instead of breaking the graph at each: ``torch.ops.dnnx.conv``,
``linear``, ``batch_norm``, ``pool``, ``activation``, ``softmax``, ``cross_entropy`` and ``rnn``
(nn.RNN / LSTM / GRU), each with a backward op (``conv_backward``, ...), a fake implementation
that gives the output's shape, dtype and strides from dnnx's own desc (no data is read), and its
autograd formula.

dnnx.torch's modules and functions call them while torch.compile traces (torch.compiler
.is_compiling()) and run their autograd functions otherwise; both compute through the same code
(dnnx.torch's <op>_setup / <op>_fwd / <op>_bwd). A custom op's arguments are tensors, numbers and
strings only, so a layer is named by a key (``layer``: see layer_key) through which the op finds
the module's own selection options and records what ran for dnnx.torch.report; "" is no layer
(the current context's options). Dropout is not among them: its mask lives in a dnnx.SavedState,
which is no tensor, so under torch.compile it runs as its autograd function (a graph break).

Note [compiled rnn backward]
The rnn op's backward directions read the SavedState its training forward filled (cuDNN's reserve
space, the cpu backend's oneDNN workspaces), which is no tensor either and whose size depends on
the candidate the selection picks at run time, so no fake implementation could give it a shape.
``rnn_backward`` therefore runs the training forward again (same desc, inputs, weights and layer
options: the same choice, and every rnn forward candidate is deterministic, so the same dst) and
then bwd_data and bwd_weights on that state: one more forward per backward than the eager path,
the price of an opaque node. The op takes no dropout (dnnx.torch applies a module's dropout
between per-layer calls, as its own op), so the recomputation draws nothing. The weights reach
the op flat (the module's parameters concatenated in _flat_weights order by the traced caller,
whose torch.cat hands each parameter its part of the flat gradient).
"""

import weakref
from typing import List, Optional, Tuple

import torch

from . import torch as _dt
from ._arrays import empty_like

AVAILABLE = hasattr(torch, "library") and hasattr(torch.library, "custom_op")

_layers = weakref.WeakValueDictionary()


def layer_key(module):
    """The key naming `module` to the custom ops, made (and registered) on first use; a module
    that carries another module's key (a deep copy) gets its own."""
    key = module.__dict__.get("_dnnx_key")
    if key is None or _layers.get(key) not in (None, module):
        key = f"{type(module).__name__}@{id(module):x}"
        module.__dict__["_dnnx_key"] = key
    _layers[key] = module
    return key


def _layer(key):
    """(the layer's TuneOptions or None, the layer or None) of a key."""
    module = _layers.get(key) if key else None
    if module is None:
        return None, None
    return module.__dict__.get("_dnnx_tune"), module


def _if_wanted(tensor, wanted):
    """A backward op's output as autograd takes it: None for a gradient it was not asked for."""
    return tensor if wanted else None


def _tensor_or_empty(tensor, like):
    """A backward op returns tensors only: an empty one stands for a gradient not computed."""
    return like.new_empty(0) if tensor is None else tensor


def _register():
    Tensor = torch.Tensor
    ops = {}

    # ---- convolution ------------------------------------------------------------------------
    @torch.library.custom_op("dnnx::conv", mutates_args=())
    def conv(src: Tensor, weight: Tensor, bias: Optional[Tensor], stride: List[int],
             padding: List[int], dilation: List[int], groups: int, layer: str) -> Tensor:
        src, weight, desc, _ = _dt._conv_setup(src, weight, stride, padding, dilation, groups)
        return _dt._conv_fwd(desc, src, weight, bias, *_layer(layer))

    @conv.register_fake
    def _(src, weight, bias, stride, padding, dilation, groups, layer):
        src, _, desc, _ = _dt._conv_setup(src, weight, stride, padding, dilation, groups)
        return empty_like(src, desc.dst_dims(), desc.dtype, desc.layout)

    @torch.library.custom_op("dnnx::conv_backward", mutates_args=())
    def conv_backward(diff_dst: Tensor, src: Tensor, weight: Tensor, stride: List[int],
                      padding: List[int], dilation: List[int], groups: int, need_src: bool,
                      need_weight: bool, has_bias: bool, layer: str) -> Tuple[Tensor, Tensor,
                                                                              Tensor]:
        src, weight, desc, memory_format = _dt._conv_setup(src, weight, stride, padding,
                                                           dilation, groups)
        grads = _dt._conv_bwd(desc, memory_format, diff_dst, src, weight, need_src, need_weight,
                              has_bias, *_layer(layer))
        return tuple(_tensor_or_empty(g, diff_dst) for g in grads)

    @conv_backward.register_fake
    def _(diff_dst, src, weight, stride, padding, dilation, groups, need_src, need_weight,
          has_bias, layer):
        src, weight, _, _ = _dt._conv_setup(src, weight, stride, padding, dilation, groups)
        return (torch.empty_like(src) if need_src else diff_dst.new_empty(0),
                torch.empty_like(weight) if need_weight else diff_dst.new_empty(0),
                diff_dst.new_empty(weight.shape[0]) if need_weight and has_bias
                else diff_dst.new_empty(0))

    def conv_setup_context(ctx, inputs, output):
        src, weight, bias, stride, padding, dilation, groups, layer = inputs
        ctx.save_for_backward(src, weight)
        ctx.args = (stride, padding, dilation, groups)
        ctx.has_bias, ctx.layer = bias is not None, layer

    def conv_grad(ctx, diff_dst):
        src, weight = ctx.saved_tensors
        needs = ctx.needs_input_grad
        need_weight = needs[1] or (ctx.has_bias and needs[2])
        diff_src, diff_weight, diff_bias = torch.ops.dnnx.conv_backward(
            diff_dst, src, weight, *ctx.args, needs[0], need_weight, ctx.has_bias, ctx.layer)
        return (_if_wanted(diff_src, needs[0]), _if_wanted(diff_weight, need_weight),
                _if_wanted(diff_bias, need_weight and ctx.has_bias), None, None, None, None,
                None)

    conv.register_autograd(conv_grad, setup_context=conv_setup_context)
    ops["conv"] = conv

    # ---- linear -----------------------------------------------------------------------------
    @torch.library.custom_op("dnnx::linear", mutates_args=())
    def linear(src: Tensor, weight: Tensor, bias: Optional[Tensor], layer: str) -> Tensor:
        rows, weight, desc = _dt._linear_setup(src, weight, bias is not None)
        return _dt._linear_fwd(desc, rows, weight, bias, src.shape, *_layer(layer))

    @linear.register_fake
    def _(src, weight, bias, layer):
        return src.new_empty((*src.shape[:-1], weight.shape[0]))

    @torch.library.custom_op("dnnx::linear_backward", mutates_args=())
    def linear_backward(diff_dst: Tensor, src: Tensor, weight: Tensor, need_src: bool,
                        need_weight: bool, has_bias: bool, layer: str) -> Tuple[Tensor, Tensor,
                                                                                Tensor]:
        rows, weight, desc = _dt._linear_setup(src, weight, has_bias)
        grads = _dt._linear_bwd(desc, diff_dst, rows, weight, src.shape, need_src, need_weight,
                                *_layer(layer))
        return tuple(_tensor_or_empty(g, diff_dst) for g in grads)

    @linear_backward.register_fake
    def _(diff_dst, src, weight, need_src, need_weight, has_bias, layer):
        return (src.new_empty(src.shape) if need_src else diff_dst.new_empty(0),
                weight.new_empty(weight.shape) if need_weight else diff_dst.new_empty(0),
                diff_dst.new_empty(weight.shape[0]) if need_weight and has_bias
                else diff_dst.new_empty(0))

    def linear_setup_context(ctx, inputs, output):
        src, weight, bias, layer = inputs
        ctx.save_for_backward(src, weight)
        ctx.has_bias, ctx.layer = bias is not None, layer

    def linear_grad(ctx, diff_dst):
        src, weight = ctx.saved_tensors
        needs = ctx.needs_input_grad
        need_weight = needs[1] or (ctx.has_bias and needs[2])
        diff_src, diff_weight, diff_bias = torch.ops.dnnx.linear_backward(
            diff_dst, src, weight, needs[0], need_weight, ctx.has_bias, ctx.layer)
        return (_if_wanted(diff_src, needs[0]), _if_wanted(diff_weight, need_weight),
                _if_wanted(diff_bias, need_weight and ctx.has_bias), None)

    linear.register_autograd(linear_grad, setup_context=linear_setup_context)
    ops["linear"] = linear

    # ---- batch-norm -------------------------------------------------------------------------
    # Functional: PyTorch registers no autograd formula for an op that mutates its inputs, so the
    # op updates copies of the running statistics and returns them (empty when it updates
    # none); batch_norm() below copies them into the buffers.
    @torch.library.custom_op("dnnx::batch_norm", mutates_args=())
    def batch_norm_op(src: Tensor, weight: Optional[Tensor], bias: Optional[Tensor],
                      running_mean: Optional[Tensor], running_var: Optional[Tensor],
                      training: bool, momentum: float, eps: float,
                      layer: str) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        src, desc, _ = _dt._batch_norm_setup(src, weight, training, momentum, eps)
        updates = training and running_mean is not None
        if updates:
            running_mean, running_var = running_mean.clone(), running_var.clone()
        dst, mean, inv_std = _dt._batch_norm_fwd(desc, src, weight, bias, running_mean,
                                                 running_var, *_layer(layer))
        def none():  # outputs must not alias one another
            return src.new_empty(0, dtype=torch.float32)

        return (dst, none() if mean is None else mean, none() if inv_std is None else inv_std,
                running_mean if updates else none(), running_var if updates else none())

    @batch_norm_op.register_fake
    def _(src, weight, bias, running_mean, running_var, training, momentum, eps, layer):
        src, desc, _ = _dt._batch_norm_setup(src, weight, training, momentum, eps)
        channels = src.shape[1] if training else 0
        updated = channels if running_mean is not None else 0
        return (empty_like(src, desc.dims, desc.dtype, desc.layout),
                src.new_empty(channels, dtype=torch.float32),
                src.new_empty(channels, dtype=torch.float32),
                src.new_empty(updated, dtype=torch.float32),
                src.new_empty(updated, dtype=torch.float32))

    @torch.library.custom_op("dnnx::batch_norm_backward", mutates_args=())
    def batch_norm_backward(diff_dst: Tensor, src: Tensor, weight: Optional[Tensor],
                            mean: Tensor, inv_std: Tensor, running_mean: Optional[Tensor],
                            running_var: Optional[Tensor], training: bool, momentum: float,
                            eps: float, layer: str) -> Tuple[Tensor, Tensor, Tensor]:
        src, desc, memory_format = _dt._batch_norm_setup(src, weight, training, momentum, eps)
        grads = _dt._batch_norm_bwd(desc, memory_format, diff_dst, src, weight,
                                    mean if training else None, inv_std if training else None,
                                    None if training else running_mean,
                                    None if training else running_var, *_layer(layer))
        return tuple(_tensor_or_empty(g, diff_dst) for g in grads)

    @batch_norm_backward.register_fake
    def _(diff_dst, src, weight, mean, inv_std, running_mean, running_var, training, momentum,
          eps, layer):
        src, desc, _ = _dt._batch_norm_setup(src, weight, training, momentum, eps)
        affine = weight is not None
        return (empty_like(src, desc.dims, desc.dtype, desc.layout),
                torch.empty_like(weight) if affine else diff_dst.new_empty(0),
                torch.empty_like(weight) if affine else diff_dst.new_empty(0))

    def batch_norm_setup_context(ctx, inputs, output):
        src, weight, bias, running_mean, running_var, training, momentum, eps, layer = inputs
        _, mean, inv_std, _, _ = output
        # Inference backward reads the running statistics as they were at the forward.
        running = (None, None) if training else (running_mean.clone(), running_var.clone())
        ctx.save_for_backward(src, weight, mean, inv_std, *running)
        ctx.args = (training, momentum, eps, layer)

    def batch_norm_grad(ctx, diff_dst, *_statistics):
        src, weight, mean, inv_std, running_mean, running_var = ctx.saved_tensors
        diff_src, diff_weight, diff_bias = torch.ops.dnnx.batch_norm_backward(
            diff_dst, src, weight, mean, inv_std, running_mean, running_var, *ctx.args)
        affine = weight is not None
        return (diff_src, diff_weight if affine else None, diff_bias if affine else None, None,
                None, None, None, None, None)

    batch_norm_op.register_autograd(batch_norm_grad, setup_context=batch_norm_setup_context)

    def batch_norm(src, weight, bias, running_mean, running_var, training, momentum, eps,
                   layer):
        dst, _, _, new_mean, new_var = torch.ops.dnnx.batch_norm(
            src, weight, bias, running_mean, running_var, training, momentum, eps, layer)
        if training and running_mean is not None:
            with torch.no_grad():
                running_mean.copy_(new_mean)
                running_var.copy_(new_var)
        return dst

    ops["batch_norm"] = batch_norm

    # ---- pooling, activations, softmax (one input, one output) --------------------------------
    @torch.library.custom_op("dnnx::pool", mutates_args=())
    def pool(src: Tensor, kernel: List[int], stride: List[int], padding: List[int],
             dilation: List[int], ceil_mode: bool, mode: str, layer: str) -> Tensor:
        src, desc, _ = _dt._pool_setup(src, kernel, stride, padding, dilation, ceil_mode, mode)
        return _dt._pool_fwd(desc, src, *_layer(layer))

    @pool.register_fake
    def _(src, kernel, stride, padding, dilation, ceil_mode, mode, layer):
        src, desc, _ = _dt._pool_setup(src, kernel, stride, padding, dilation, ceil_mode, mode)
        return empty_like(src, desc.dst_dims(), desc.dtype, desc.layout)

    @torch.library.custom_op("dnnx::pool_backward", mutates_args=())
    def pool_backward(diff_dst: Tensor, src: Tensor, dst: Tensor, kernel: List[int],
                      stride: List[int], padding: List[int], dilation: List[int],
                      ceil_mode: bool, mode: str, layer: str) -> Tensor:
        src, desc, memory_format = _dt._pool_setup(src, kernel, stride, padding, dilation,
                                                   ceil_mode, mode)
        return _dt._pool_bwd(desc, memory_format, diff_dst, src, dst, *_layer(layer))

    @pool_backward.register_fake
    def _(diff_dst, src, dst, kernel, stride, padding, dilation, ceil_mode, mode, layer):
        src, desc, _ = _dt._pool_setup(src, kernel, stride, padding, dilation, ceil_mode, mode)
        return empty_like(src, desc.src_dims(), desc.dtype, desc.layout)

    def pool_setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0], output)
        ctx.args = inputs[1:]

    def pool_grad(ctx, diff_dst):
        src, dst = ctx.saved_tensors
        return (torch.ops.dnnx.pool_backward(diff_dst, src, dst, *ctx.args),
                None, None, None, None, None, None, None)

    pool.register_autograd(pool_grad, setup_context=pool_setup_context)
    ops["pool"] = pool

    @torch.library.custom_op("dnnx::activation", mutates_args=())
    def activation(src: Tensor, kind: str, alpha: float, ceiling: float, layer: str) -> Tensor:
        src, desc, _ = _dt._activation_setup(src, kind, alpha, ceiling)
        return _dt._activation_fwd(desc, src, *_layer(layer))

    @activation.register_fake
    def _(src, kind, alpha, ceiling, layer):
        src, desc, _ = _dt._activation_setup(src, kind, alpha, ceiling)
        return empty_like(src, desc.dims, desc.dtype, desc.layout)

    @torch.library.custom_op("dnnx::activation_backward", mutates_args=())
    def activation_backward(diff_dst: Tensor, src: Tensor, dst: Tensor, kind: str, alpha: float,
                            ceiling: float, layer: str) -> Tensor:
        src, desc, memory_format = _dt._activation_setup(src, kind, alpha, ceiling)
        return _dt._activation_bwd(desc, memory_format, diff_dst, src, dst, *_layer(layer))

    @activation_backward.register_fake
    def _(diff_dst, src, dst, kind, alpha, ceiling, layer):
        src, desc, _ = _dt._activation_setup(src, kind, alpha, ceiling)
        return empty_like(src, desc.dims, desc.dtype, desc.layout)

    def activation_setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0], output)
        ctx.args = inputs[1:]

    def activation_grad(ctx, diff_dst):
        src, dst = ctx.saved_tensors
        return (torch.ops.dnnx.activation_backward(diff_dst, src, dst, *ctx.args),
                None, None, None, None)

    activation.register_autograd(activation_grad, setup_context=activation_setup_context)
    ops["activation"] = activation

    @torch.library.custom_op("dnnx::softmax", mutates_args=())
    def softmax(src: Tensor, log: bool, layer: str) -> Tensor:
        src, desc, _ = _dt._softmax_setup(src, log)
        return _dt._softmax_fwd(desc, src, *_layer(layer))

    @softmax.register_fake
    def _(src, log, layer):
        src, desc, _ = _dt._softmax_setup(src, log)
        return empty_like(src, desc.dims, desc.dtype, desc.layout)

    @torch.library.custom_op("dnnx::softmax_backward", mutates_args=())
    def softmax_backward(diff_dst: Tensor, dst: Tensor, log: bool, layer: str) -> Tensor:
        dst, desc, memory_format = _dt._softmax_setup(dst, log)
        return _dt._softmax_bwd(desc, memory_format, diff_dst, dst, *_layer(layer))

    @softmax_backward.register_fake
    def _(diff_dst, dst, log, layer):
        dst, desc, _ = _dt._softmax_setup(dst, log)
        return empty_like(dst, desc.dims, desc.dtype, desc.layout)

    def softmax_setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)
        ctx.args = inputs[1:]

    def softmax_grad(ctx, diff_dst):
        dst, = ctx.saved_tensors
        return torch.ops.dnnx.softmax_backward(diff_dst, dst, *ctx.args), None, None

    softmax.register_autograd(softmax_grad, setup_context=softmax_setup_context)
    ops["softmax"] = softmax

    # ---- cross-entropy ----------------------------------------------------------------------
    @torch.library.custom_op("dnnx::cross_entropy", mutates_args=())
    def cross_entropy(logits: Tensor, labels: Tensor, weight: Optional[Tensor],
                      ignore_index: int, reduction: str, layer: str) -> Tensor:
        logits, labels, weight, desc = _dt._cross_entropy_setup(logits, labels, weight,
                                                                ignore_index, reduction)
        return _dt._cross_entropy_fwd(desc, logits, labels, weight, *_layer(layer))

    @cross_entropy.register_fake
    def _(logits, labels, weight, ignore_index, reduction, layer):
        logits, labels, weight, desc = _dt._cross_entropy_setup(logits, labels, weight,
                                                                ignore_index, reduction)
        if reduction != "none":
            return logits.new_empty(())
        return empty_like(logits, desc.loss_dims(), desc.dtype)

    @torch.library.custom_op("dnnx::cross_entropy_backward", mutates_args=())
    def cross_entropy_backward(diff_loss: Tensor, logits: Tensor, labels: Tensor,
                               weight: Optional[Tensor], ignore_index: int, reduction: str,
                               layer: str) -> Tensor:
        logits, labels, weight, desc = _dt._cross_entropy_setup(logits, labels, weight,
                                                                ignore_index, reduction)
        return _dt._cross_entropy_bwd(desc, diff_loss, logits, labels, weight, *_layer(layer))

    @cross_entropy_backward.register_fake
    def _(diff_loss, logits, labels, weight, ignore_index, reduction, layer):
        logits, _, _, desc = _dt._cross_entropy_setup(logits, labels, weight, ignore_index,
                                                      reduction)
        return empty_like(logits, desc.dims, desc.dtype, desc.layout)

    def cross_entropy_setup_context(ctx, inputs, output):
        logits, labels, weight, ignore_index, reduction, layer = inputs
        ctx.save_for_backward(logits, labels, weight)
        ctx.args = (ignore_index, reduction, layer)

    def cross_entropy_grad(ctx, diff_loss):
        logits, labels, weight = ctx.saved_tensors
        return (torch.ops.dnnx.cross_entropy_backward(diff_loss, logits, labels, weight,
                                                      *ctx.args),
                None, None, None, None, None)

    cross_entropy.register_autograd(cross_entropy_grad,
                                    setup_context=cross_entropy_setup_context)
    ops["cross_entropy"] = cross_entropy

    # ---- recurrent layers (Note [compiled rnn backward]) --------------------------------------
    @torch.library.custom_op("dnnx::rnn", mutates_args=())
    def rnn(src: Tensor, h0: Optional[Tensor], c0: Optional[Tensor], lengths: Optional[Tensor],
            weights: Tensor, mode: str, hidden_size: int, num_layers: int, bias: bool,
            batch_first: bool, bidirectional: bool, training: bool,
            layer: str) -> Tuple[Tensor, Tensor, Tensor]:
        src, h0, c0, desc = _dt._rnn_setup(src, h0, c0, mode, hidden_size, num_layers, bias,
                                           batch_first, bidirectional, lengths)
        dst, hy, cy, _, _ = _dt._rnn_fwd(desc, src, h0, c0, lengths, weights.contiguous(),
                                         training, *_layer(layer))
        return dst, hy, _tensor_or_empty(cy, dst)

    @rnn.register_fake
    def _(src, h0, c0, lengths, weights, mode, hidden_size, num_layers, bias, batch_first,
          bidirectional, training, layer):
        _, _, _, desc = _dt._rnn_setup(src, h0, c0, mode, hidden_size, num_layers, bias,
                                       batch_first, bidirectional, lengths)
        return (empty_like(src, desc.dst_dims(), desc.dtype),
                empty_like(src, desc.state_dims(), desc.dtype),
                empty_like(src, desc.state_dims(), desc.dtype) if desc.cell == "lstm"
                else src.new_empty(0))

    @torch.library.custom_op("dnnx::rnn_backward", mutates_args=())
    def rnn_backward(diff_dst: Tensor, diff_hy: Optional[Tensor], diff_cy: Optional[Tensor],
                     src: Tensor, h0: Optional[Tensor], c0: Optional[Tensor],
                     lengths: Optional[Tensor], weights: Tensor, mode: str, hidden_size: int,
                     num_layers: int, bias: bool, batch_first: bool, bidirectional: bool,
                     layer: str) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        src, h0, c0, desc = _dt._rnn_setup(src, h0, c0, mode, hidden_size, num_layers, bias,
                                           batch_first, bidirectional, lengths)
        flat = weights.contiguous()
        tune, module = _layer(layer)
        dst, _, _, state, context = _dt._rnn_fwd(desc, src, h0, c0, lengths, flat, True, tune,
                                                 module)
        diff_src, diff_hx, diff_cx, diff_flat = _dt._rnn_bwd(
            desc, context, src, h0, c0, lengths, flat, dst, state, diff_dst, diff_hy,
            diff_cy if desc.cell == "lstm" else None, module)
        return (diff_src, _tensor_or_empty(diff_hx if h0 is not None else None, diff_dst),
                _tensor_or_empty(diff_cx if c0 is not None else None, diff_dst), diff_flat)

    @rnn_backward.register_fake
    def _(diff_dst, diff_hy, diff_cy, src, h0, c0, lengths, weights, mode, hidden_size,
          num_layers, bias, batch_first, bidirectional, layer):
        return (src.new_empty(src.shape),
                h0.new_empty(h0.shape) if h0 is not None else diff_dst.new_empty(0),
                c0.new_empty(c0.shape) if c0 is not None else diff_dst.new_empty(0),
                weights.new_empty(weights.shape))

    def rnn_setup_context(ctx, inputs, output):
        src, h0, c0, lengths, weights, *args = inputs
        ctx.save_for_backward(src, h0, c0, lengths, weights)
        ctx.args = (*args[:-2], args[-1])  # mode .. bidirectional, layer (not training)

    def rnn_grad(ctx, diff_dst, diff_hy, diff_cy):
        src, h0, c0, lengths, weights = ctx.saved_tensors
        # diff_cy of a cell other than lstm (its empty third output) is dropped by the op.
        diff_src, diff_hx, diff_cx, diff_flat = torch.ops.dnnx.rnn_backward(
            diff_dst, diff_hy, diff_cy, src, h0, c0, lengths, weights, *ctx.args)
        return (diff_src, diff_hx if h0 is not None else None,
                diff_cx if c0 is not None else None, None, diff_flat, None, None, None, None,
                None, None, None, None)

    rnn.register_autograd(rnn_grad, setup_context=rnn_setup_context)
    ops["rnn"] = rnn
    return ops


OPS = _register() if AVAILABLE else {}
