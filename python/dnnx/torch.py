"""dnnx for PyTorch models: autograd functions and drop-in modules that run convolutions, linear
layers, batch-norm, pooling, activations, dropout, softmax, cross-entropy and recurrent layers
(RNN, LSTM, GRU) through dnnx, each direction selected under its own policy.

    import dnnx.torch
    dnnx.torch.convert(model)                         # swaps nn.Conv*d, nn.Linear, ... in place
    dnnx.torch.algo(model.conv1).fwd = "exhaustive"   # per layer and direction
    dnnx.torch.algo(model.conv1).bwd_weights = "fixed:<id>"
    loss = model(x).sum(); loss.backward()
    print(dnnx.torch.report(model))                   # chosen id, time, workspace per direction

Converted modules keep their class's parameters, buffers, hooks and state_dict keys (convert
changes the class of each module in place, as cudnn.convert does), so optimizers and `.to()` keep
working. On a CUDA tensor an op runs on a cudnn context of the tensor's device queued on
PyTorch's current stream (torch.cuda.current_stream()), so it is ordered with the surrounding
PyTorch work without any synchronisation. On the host it runs on the current dnnx context.

The autograd path is what PyTorch 1.13 (Debian's) offers; with PyTorch >= 2.4 the ops are also
torch.library custom ops (torch.ops.dnnx.*, dnnx/_torch_library.py), which torch.compile traces
(Note [eager and compiled calls]).
"""

import itertools
import os
import threading

import torch

from . import _dnnx
from . import _arrays
from . import _random
from . import _context as _context_module
from ._context import _current, current, resolve
from ._errors import InvalidArgument
from .ops import activation as _activation
from .ops import batch_norm as _batch_norm
from .ops import conv as _conv
from .ops import cross_entropy as _cross_entropy
from .ops import dropout as _dropout
from .ops import matmul as _matmul
from .ops import pool as _pool
from .ops import rnn as _rnn
from .ops import softmax as _softmax

def _device_context(tensor):
    """The context a call on `tensor` runs on before any per-layer options: the current context
    (with dnnx.Context(...) blocks) or the default one of the tensor's device, on PyTorch's
    current stream for CUDA tensors (dnnx._context.resolve)."""
    return resolve(None, tensor)


_tuned_copies = {}


def _layer_context(tensor, tune):
    """The device's context with a layer's own TuneOptions, if it has any: a copy, kept for the
    next call while the options and the choice cache stay those it was made with (Note [contexts
    on the caller's stream] in _context.py)."""
    context = _device_context(tensor)
    if tune is None:
        return context
    key = (id(context), id(tune))
    kept = _tuned_copies.get(key)
    if kept is not None and kept[0] is context and kept[1] is tune and kept[2].tune == tune and \
            kept[2].choice_cache is context.choice_cache:
        return kept[2]
    copy = context.copy()
    copy.tune = tune
    if len(_tuned_copies) >= 1024:
        _tuned_copies.clear()
    _tuned_copies[key] = (context, tune, copy)
    return copy


def _dense_format(tensor):
    """The memory format `tensor` is dense in (channels_last ones where it is not contiguous),
    or None."""
    if tensor.is_contiguous():
        return torch.contiguous_format
    if tensor.dim() == 4 and tensor.is_contiguous(memory_format=torch.channels_last):
        return torch.channels_last
    if tensor.dim() == 5 and tensor.is_contiguous(memory_format=torch.channels_last_3d):
        return torch.channels_last_3d
    return None


def _dense(tensor):
    """`tensor` dense in the layout its strides suggest, and the memory format that is."""
    memory_format = _dense_format(tensor)
    if memory_format is not None:
        return tensor, memory_format
    return tensor.contiguous(), torch.contiguous_format


# Note [kept descs]
# A layer called again on an input of the same metadata builds the same desc: desc_for reads the
# input's shape, strides (its layout), dtype and the layer's settings, never its values or its
# device. Building one from Python costs several microseconds (reading the tensors' attributes,
# the desc's constructor), a large part of a small call's host time, so each op keeps the descs
# it built keyed by exactly what they were built from: the shapes, strides and dtypes of the
# tensors, and every other argument of its desc_for. A change of any of them is another key, so
# a kept desc is never stale; arguments that cannot be a key (a list of strides) build the desc
# each call. A kept entry also holds whether the tensors were already dense in the op's layout
# (a key includes their strides), so that the call skips _dense. The tables are bounded.
_KEPT_LIMIT = 1024


def _kept(table, key):
    """The entry kept in `table` for `key`; None when there is none or `key` cannot be one."""
    try:
        return table.get(key)
    except TypeError:  # an unhashable argument (a list)
        return None


def _keep_entry(table, key, entry):
    try:
        if len(table) >= _KEPT_LIMIT:
            table.clear()
        table[key] = entry
    except TypeError:
        pass
    return entry


def _dense_setup(table, src, settings, make_desc):
    """`src` dense in the layout its strides suggest, make_desc(that tensor), and the memory
    format: the desc kept in `table` under src's shape, strides, dtype and `settings` (Note [kept
    descs])."""
    key = (src.shape, src.stride(), src.dtype, settings)
    kept = _kept(table, key)
    if kept is None:
        dense, memory_format = _dense(src)
        desc = make_desc(dense)
        _keep_entry(table, key, (desc, memory_format, dense is src))
        return dense, desc, memory_format
    desc, memory_format, src_dense = kept
    if not src_dense:
        src = src.contiguous(memory_format=memory_format)
    return src, desc, memory_format


_MEMORY_FORMATS = {("nhwc", 4): torch.channels_last, ("nhwc", 5): torch.channels_last_3d}
_TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
                 "i32": torch.int32, "i64": torch.int64}


def _empty(like, dims, layout="nchw", dtype=None):
    """A new dense tensor of `dims` on `like`'s device, in `layout` ('nhwc': channels_last),
    of `like`'s dtype or the dnnx dtype `dtype`: the cheapest torch calls for it (the same tensor
    dnnx._arrays.empty_like makes)."""
    torch_dtype = like.dtype if dtype is None else _TORCH_DTYPES[dtype]
    if layout == "nhwc":
        memory_format = _MEMORY_FORMATS.get((layout, len(dims)))
        if memory_format is not None:
            return torch.empty(dims, dtype=torch_dtype, device=like.device,
                               memory_format=memory_format)
        return _arrays.empty_like(like, dims, dtype or _arrays.dtype_name(like), layout)
    return like.new_empty(dims, dtype=torch_dtype)


def _keep(fctx, desc, tune, layer, memory_format):
    """What a backward needs besides its saved tensors."""
    fctx.desc, fctx.tune, fctx.layer, fctx.memory_format = desc, tune, layer, memory_format
    _keep_block(fctx)


# Note [the forward's block in the backward]
# A call picks the context of the enclosing `with ctx:` block, a context variable of the thread
# that runs it. PyTorch runs the backward of CUDA tensors on an autograd thread of the device,
# where no block is open: the backward would run on the device's default context, with its
# policies, not the block's (a `with ctx.tuning(fwd="exhaustive", bwd_data="exhaustive", ...)`
# around a training step would search the forward only). So each autograd function keeps the
# forward's block and thread, and its backward runs under that block when it runs on another
# thread that has no block of its own. A backward on the forward's thread (on the host, autograd
# runs it on the caller's) sees the blocks of that thread, as any call does.
def _keep_block(fctx):
    fctx.block = (_current.get(), threading.get_ident())


def _under_forward_block(backward):
    """`backward` of an autograd function, run under the forward's block (Note [the forward's
    block in the backward])."""
    def run(fctx, *grads):
        block, thread = fctx.block
        if block is None or thread == threading.get_ident() or _current.get() is not None:
            return backward(fctx, *grads)
        token = _current.set(block)
        try:
            return backward(fctx, *grads)
        finally:
            _current.reset(token)
    run.__doc__ = backward.__doc__
    return run


def _gradient(fctx, diff_dst):
    """diff_dst in the forward's layout, and the context its backward runs on."""
    diff_dst = diff_dst.contiguous(memory_format=fctx.memory_format)
    return diff_dst, _layer_context(diff_dst, fctx.tune)


def _record(layer, direction, desc, context):
    """Keeps what `layer`'s `direction` ran, for report()."""
    if layer is not None:
        calls = layer.__dict__.get("_dnnx_calls")
        if calls is None:
            calls = layer.__dict__["_dnnx_calls"] = {}
        calls[direction] = (desc, context)


# Each op's computation, shared by its autograd function (the eager path) and its torch.library
# custom ops (torch.compile, dnnx/_torch_library.py): <op>_setup makes the inputs dense and builds
# the desc, <op>_fwd and <op>_bwd run the directions on the context of the inputs' device with the
# layer's options, and record what ran for report().


_conv_descs = {}


def _conv_setup(src, weight, stride, padding, dilation, groups):
    key = (src.shape, src.stride(), src.dtype, weight.shape, weight.stride(), weight.dtype, stride,
           padding, dilation, groups)
    kept = _kept(_conv_descs, key)
    if kept is None:  # Note [kept descs]
        dense, memory_format = _dense(src)
        dense_weight = weight.contiguous(memory_format=memory_format)
        desc = _conv.desc_for(dense, dense_weight, stride, padding, dilation, groups)
        _keep_entry(_conv_descs, key, (desc, memory_format, dense is src, dense_weight is weight))
        return dense, dense_weight, desc, memory_format
    desc, memory_format, src_dense, weight_dense = kept
    if not src_dense:
        src = src.contiguous(memory_format=memory_format)
    if not weight_dense:
        weight = weight.contiguous(memory_format=memory_format)
    return src, weight, desc, memory_format


def _conv_fwd(desc, src, weight, bias, tune, layer):
    context = _layer_context(src, tune)
    dst = _empty(src, desc.dst_dims(), desc.layout)
    _dnnx.conv_fwd(context, desc, src, weight, dst, None if bias is None else bias.contiguous())
    _record(layer, "fwd", desc, context)
    return dst


def _conv_bwd(desc, memory_format, diff_dst, src, weight, need_src, need_weight, has_bias, tune,
              layer):
    diff_dst = diff_dst.contiguous(memory_format=memory_format)
    context = _layer_context(diff_dst, tune)
    diff_src = diff_weight = diff_bias = None
    layout = desc.layout
    if need_src:
        diff_src = _empty(diff_dst, desc.src_dims(), layout)
        _dnnx.conv_bwd_data(context, desc, diff_dst, weight, diff_src)
        _record(layer, "bwd_data", desc, context)
    if need_weight:
        diff_weight = _empty(src, desc.weights_dims(), layout)
        if has_bias:
            diff_bias = _empty(src, desc.bias_dims())
        _dnnx.conv_bwd_weights(context, desc, src, diff_dst, diff_weight, diff_bias)
        _record(layer, "bwd_weights", desc, context)
    return diff_src, diff_weight, diff_bias


class ConvFunction(torch.autograd.Function):
    """F.conv1d/2d/3d through dnnx: fwd, bwd_data and bwd_weights (with the bias gradient)."""

    @staticmethod
    def forward(fctx, src, weight, bias, stride, padding, dilation, groups, tune, layer):
        src, weight, desc, memory_format = _conv_setup(src, weight, stride, padding, dilation,
                                                       groups)
        dst = _conv_fwd(desc, src, weight, bias, tune, layer)
        fctx.save_for_backward(src, weight)
        _keep(fctx, desc, tune, layer, memory_format)
        fctx.has_bias = bias is not None
        return dst

    @staticmethod
    @_under_forward_block
    def backward(fctx, diff_dst):
        src, weight = fctx.saved_tensors
        needs = fctx.needs_input_grad
        grads = _conv_bwd(fctx.desc, fctx.memory_format, diff_dst, src, weight, needs[0],
                          needs[1] or needs[2], fctx.has_bias, fctx.tune, fctx.layer)
        return (*grads, None, None, None, None, None, None)


_linear_descs = {}


def _linear_setup(src, weight, has_bias):
    rows = src.reshape(-1, src.shape[-1]).contiguous()
    key = (rows.shape, rows.dtype, weight.shape, has_bias)
    desc = _kept(_linear_descs, key)
    if desc is None:  # Note [kept descs]
        desc = _keep_entry(_linear_descs, key, _matmul.linear_desc(rows, weight, has_bias))
    return rows, weight.contiguous(), desc


def _linear_fwd(desc, rows, weight, bias, shape, tune, layer):
    context = _layer_context(rows, tune)
    dst = _empty(rows, desc.dst_dims())
    _dnnx.matmul_fwd(context, desc, rows, weight, None if bias is None else bias.contiguous(),
                     dst)
    _record(layer, "fwd", desc, context)
    return dst.reshape(*shape[:-1], weight.shape[0])


def _linear_bwd(desc, diff_dst, rows, weight, shape, need_src, need_weight, tune, layer):
    diff_dst = diff_dst.reshape(-1, weight.shape[0]).contiguous()
    context = _layer_context(diff_dst, tune)
    diff_src = diff_weight = diff_bias = None
    if need_src:
        diff_src = _empty(diff_dst, desc.a_dims())
        _dnnx.matmul_bwd_data(context, desc, diff_dst, weight, diff_src, None)
        diff_src = diff_src.reshape(shape)
        _record(layer, "bwd_data", desc, context)
    if need_weight:
        diff_weight = _empty(rows, desc.b_dims())
        if desc.bias:
            diff_bias = _empty(rows, desc.bias_dims())
        _dnnx.matmul_bwd_weights(context, desc, rows, diff_dst, diff_weight, diff_bias, None)
        _record(layer, "bwd_weights", desc, context)
    return diff_src, diff_weight, diff_bias


class LinearFunction(torch.autograd.Function):
    """F.linear through dnnx's matmul: src (..., in) x weight (out, in)^T + bias."""

    @staticmethod
    def forward(fctx, src, weight, bias, tune, layer):
        rows, weight, desc = _linear_setup(src, weight, bias is not None)
        dst = _linear_fwd(desc, rows, weight, bias, src.shape, tune, layer)
        fctx.save_for_backward(rows, weight)
        fctx.desc, fctx.tune, fctx.layer, fctx.shape = desc, tune, layer, src.shape
        _keep_block(fctx)
        return dst

    @staticmethod
    @_under_forward_block
    def backward(fctx, diff_dst):
        rows, weight = fctx.saved_tensors
        needs = fctx.needs_input_grad
        grads = _linear_bwd(fctx.desc, diff_dst, rows, weight, fctx.shape, needs[0],
                            needs[1] or needs[2], fctx.tune, fctx.layer)
        return (*grads, None, None)


_batch_norm_descs = {}


def _batch_norm_setup(src, weight, training, momentum, eps):
    affine = weight is not None
    return _dense_setup(_batch_norm_descs, src, (training, momentum, eps, affine),
                        lambda dense: _batch_norm.desc_for(dense, training=training, eps=eps,
                                                           momentum=momentum, affine=affine))


def _batch_norm_fwd(desc, src, weight, bias, running_mean, running_var, tune, layer):
    """(dst, saved mean, saved inverse std); the saved statistics are None in inference."""
    context = _layer_context(src, tune)
    layout = desc.layout
    dims = desc.dims
    dst = _empty(src, dims, layout)
    if desc.training:
        param_dims = desc.param_dims()
        mean = _empty(src, param_dims, layout, "f32")
        inv_std = _empty(src, param_dims, layout, "f32")
    else:
        mean = inv_std = None
    _dnnx.batch_norm_fwd(context, desc, src, dst, weight, bias, running_mean, running_var, mean,
                         inv_std)
    _record(layer, "fwd", desc, context)
    return dst, mean, inv_std


def _batch_norm_bwd(desc, memory_format, diff_dst, src, weight, mean, inv_std, running_mean,
                    running_var, tune, layer):
    diff_dst = diff_dst.contiguous(memory_format=memory_format)
    context = _layer_context(diff_dst, tune)
    layout = desc.layout
    diff_src = _empty(diff_dst, desc.dims, layout)
    diff_scale = diff_shift = None
    if desc.affine:
        param_dims = desc.param_dims()
        diff_scale = _empty(src, param_dims, layout, "f32")
        diff_shift = _empty(src, param_dims, layout, "f32")
    _dnnx.batch_norm_bwd(context, desc, src, diff_dst, weight, running_mean, running_var, mean,
                         inv_std, diff_src, diff_scale, diff_shift)
    _record(layer, "bwd_data", desc, context)
    return diff_src, diff_scale, diff_shift


class BatchNormFunction(torch.autograd.Function):
    """F.batch_norm through dnnx: training (batch statistics, running ones updated in place) or
    inference, and the backward of either."""

    @staticmethod
    def forward(fctx, src, weight, bias, running_mean, running_var, training, momentum, eps,
                tune, layer):
        src, desc, memory_format = _batch_norm_setup(src, weight, training, momentum, eps)
        dst, mean, inv_std = _batch_norm_fwd(desc, src, weight, bias, running_mean, running_var,
                                             tune, layer)
        fctx.save_for_backward(src, weight, mean, inv_std)
        # Inference backward reads the running statistics as they are now.
        fctx.running = (None, None) if training else (running_mean.clone(), running_var.clone())
        _keep(fctx, desc, tune, layer, memory_format)
        return dst

    @staticmethod
    @_under_forward_block
    def backward(fctx, diff_dst):
        src, weight, mean, inv_std = fctx.saved_tensors
        grads = _batch_norm_bwd(fctx.desc, fctx.memory_format, diff_dst, src, weight, mean,
                                inv_std, *fctx.running, fctx.tune, fctx.layer)
        return (*grads, None, None, None, None, None, None, None)


_pool_descs = {}


def _pool_setup(src, kernel, stride, padding, dilation, ceil_mode, mode):
    return _dense_setup(_pool_descs, src, (kernel, stride, padding, dilation, ceil_mode, mode),
                        lambda dense: _pool.desc_for(dense, kernel, stride, padding, dilation,
                                                     mode, ceil_mode))


def _pool_fwd(desc, src, tune, layer):
    context = _layer_context(src, tune)
    dst = _empty(src, desc.dst_dims(), desc.layout)
    _dnnx.pool_fwd(context, desc, src, dst)
    _record(layer, "fwd", desc, context)
    return dst


def _pool_bwd(desc, memory_format, diff_dst, src, dst, tune, layer):
    diff_dst = diff_dst.contiguous(memory_format=memory_format)
    context = _layer_context(diff_dst, tune)
    diff_src = _empty(diff_dst, desc.src_dims(), desc.layout)
    _dnnx.pool_bwd(context, desc, src, dst, diff_dst, diff_src)
    _record(layer, "bwd_data", desc, context)
    return diff_src


class PoolFunction(torch.autograd.Function):
    """Max and average pooling through dnnx (mode 'max', 'avg_include_pad', 'avg_exclude_pad')."""

    @staticmethod
    def forward(fctx, src, kernel, stride, padding, dilation, ceil_mode, mode, tune, layer):
        src, desc, memory_format = _pool_setup(src, kernel, stride, padding, dilation, ceil_mode,
                                               mode)
        dst = _pool_fwd(desc, src, tune, layer)
        fctx.save_for_backward(src, dst)
        _keep(fctx, desc, tune, layer, memory_format)
        return dst

    @staticmethod
    @_under_forward_block
    def backward(fctx, diff_dst):
        src, dst = fctx.saved_tensors
        diff_src = _pool_bwd(fctx.desc, fctx.memory_format, diff_dst, src, dst, fctx.tune,
                             fctx.layer)
        return diff_src, None, None, None, None, None, None, None, None


_activation_descs = {}


def _activation_setup(src, kind, alpha, ceiling):
    return _dense_setup(_activation_descs, src, (kind, alpha, ceiling),
                        lambda dense: _activation.desc_for(dense, kind, alpha=alpha,
                                                           ceiling=ceiling))


def _activation_fwd(desc, src, tune, layer):
    context = _layer_context(src, tune)
    dst = _empty(src, desc.dims, desc.layout)
    _dnnx.activation_fwd(context, desc, src, dst)
    _record(layer, "fwd", desc, context)
    return dst


def _activation_bwd(desc, memory_format, diff_dst, src, dst, tune, layer):
    diff_dst = diff_dst.contiguous(memory_format=memory_format)
    context = _layer_context(diff_dst, tune)
    diff_src = _empty(diff_dst, desc.dims, desc.layout)
    _dnnx.activation_bwd(context, desc, src, dst, diff_dst, diff_src)
    _record(layer, "bwd_data", desc, context)
    return diff_src


def _activation_in_place_setup(src, kind, alpha, ceiling):
    return _dense_setup(_activation_descs, src, (kind, alpha, ceiling, "dst"),
                        lambda dense: _activation.desc_for(dense, kind, alpha=alpha,
                                                           ceiling=ceiling, saved="dst"))


def _in_place_allowed(src):
    """Whether an in-place activation writes over `src` (Note [in-place activations] in
    python/src/torch_ext/module.cpp): not a view, a leaf that requires grad, or an inference
    tensor outside inference mode, and dense in its layout."""
    if src._is_view() or src.numel() == 0 or (src.requires_grad and src.is_leaf):
        return False
    if src.is_inference() and not torch.is_inference_mode_enabled():
        return False
    return _dense_format(src) is not None


class ActivationInPlaceFunction(torch.autograd.Function):
    """An activation whose backward can read its output alone ('relu', 'clipped_relu', 'elu'
    with alpha >= 0), written over its input as PyTorch's in-place ops (mark_dirty: the version
    moves, the history is this node's)."""

    @staticmethod
    def forward(fctx, src, kind, alpha, ceiling, tune, layer):
        src, desc, memory_format = _activation_in_place_setup(src, kind, alpha, ceiling)
        context = _layer_context(src, tune)
        _dnnx.activation_fwd(context, desc, src, src)
        _record(layer, "fwd", desc, context)
        fctx.mark_dirty(src)
        fctx.save_for_backward(src)
        _keep(fctx, desc, tune, layer, memory_format)
        return src

    @staticmethod
    @_under_forward_block
    def backward(fctx, diff_dst):
        dst, = fctx.saved_tensors
        diff_src = _activation_bwd(fctx.desc, fctx.memory_format, diff_dst, None, dst, fctx.tune,
                                   fctx.layer)
        return diff_src, None, None, None, None, None


class ActivationFunction(torch.autograd.Function):
    """An elementwise activation through dnnx ('relu', 'tanh', 'sigmoid', 'elu', 'swish',
    'clipped_relu'); the backward reads the forward's input and output."""

    @staticmethod
    def forward(fctx, src, kind, alpha, ceiling, tune, layer):
        src, desc, memory_format = _activation_setup(src, kind, alpha, ceiling)
        dst = _activation_fwd(desc, src, tune, layer)
        fctx.save_for_backward(src, dst)
        _keep(fctx, desc, tune, layer, memory_format)
        return dst

    @staticmethod
    @_under_forward_block
    def backward(fctx, diff_dst):
        src, dst = fctx.saved_tensors
        diff_src = _activation_bwd(fctx.desc, fctx.memory_format, diff_dst, src, dst, fctx.tune,
                                   fctx.layer)
        return diff_src, None, None, None, None, None


_softmax_descs = {}


def _softmax_setup(src, log):
    return _dense_setup(_softmax_descs, src, log,
                        lambda dense: _softmax.desc_for(dense, mode="channel", log=log))


def _softmax_fwd(desc, src, tune, layer):
    context = _layer_context(src, tune)
    dst = _empty(src, desc.dims, desc.layout)
    _dnnx.softmax_fwd(context, desc, src, dst)
    _record(layer, "fwd", desc, context)
    return dst


def _softmax_bwd(desc, memory_format, diff_dst, dst, tune, layer):
    diff_dst = diff_dst.contiguous(memory_format=memory_format)
    context = _layer_context(diff_dst, tune)
    diff_src = _empty(diff_dst, desc.dims, desc.layout)
    _dnnx.softmax_bwd(context, desc, dst, diff_dst, diff_src)
    _record(layer, "bwd_data", desc, context)
    return diff_src


class SoftmaxFunction(torch.autograd.Function):
    """Softmax or log-softmax over dim 1 through dnnx (channel mode)."""

    @staticmethod
    def forward(fctx, src, log, tune, layer):
        src, desc, memory_format = _softmax_setup(src, log)
        dst = _softmax_fwd(desc, src, tune, layer)
        fctx.save_for_backward(dst)
        _keep(fctx, desc, tune, layer, memory_format)
        return dst

    @staticmethod
    @_under_forward_block
    def backward(fctx, diff_dst):
        dst, = fctx.saved_tensors
        diff_src = _softmax_bwd(fctx.desc, fctx.memory_format, diff_dst, dst, fctx.tune,
                                fctx.layer)
        return diff_src, None, None, None


_cross_entropy_descs = {}


def _cross_entropy_setup(logits, labels, weight, ignore_index, reduction):
    if labels.is_floating_point():
        raise InvalidArgument("cross_entropy: dnnx takes class-index targets (int32/int64), "
                              "not class probabilities")
    logits, _ = _dense(logits)
    labels = labels.contiguous()
    weight = None if weight is None else weight.contiguous()
    key = (logits.shape, logits.stride(), logits.dtype, labels.shape, labels.dtype,
           weight is None, reduction, ignore_index)
    desc = _kept(_cross_entropy_descs, key)
    if desc is None:  # Note [kept descs]
        desc = _keep_entry(_cross_entropy_descs, key, _cross_entropy.desc_for(
            logits, labels, reduction, ignore_index, weight))
    return logits, labels, weight, desc


def _cross_entropy_fwd(desc, logits, labels, weight, tune, layer):
    context = _layer_context(logits, tune)
    loss = _empty(logits, desc.loss_dims(), dtype=desc.dtype)
    _dnnx.cross_entropy_fwd(context, desc, logits, labels, weight, loss)
    _record(layer, "fwd", desc, context)
    return loss if desc.reduction == "none" else loss.reshape(())


def _cross_entropy_bwd(desc, diff_loss, logits, labels, weight, tune, layer):
    diff_loss = diff_loss.reshape(desc.loss_dims()).contiguous()
    context = _layer_context(logits, tune)
    diff_logits = _empty(logits, desc.dims, desc.layout)
    _dnnx.cross_entropy_bwd(context, desc, logits, labels, weight, diff_loss, diff_logits)
    _record(layer, "bwd_data", desc, context)
    return diff_logits


class CrossEntropyFunction(torch.autograd.Function):
    """F.cross_entropy with class-index targets through dnnx (weights, ignore_index, reduction);
    the gradient flows to the logits."""

    @staticmethod
    def forward(fctx, logits, labels, weight, ignore_index, reduction, tune, layer):
        logits, labels, weight, desc = _cross_entropy_setup(logits, labels, weight, ignore_index,
                                                            reduction)
        loss = _cross_entropy_fwd(desc, logits, labels, weight, tune, layer)
        fctx.save_for_backward(logits, labels, weight)
        fctx.desc, fctx.tune, fctx.layer = desc, tune, layer
        _keep_block(fctx)
        return loss

    @staticmethod
    @_under_forward_block
    def backward(fctx, diff_loss):
        logits, labels, weight = fctx.saved_tensors
        diff_logits = _cross_entropy_bwd(fctx.desc, diff_loss, logits, labels, weight, fctx.tune,
                                         fctx.layer)
        return diff_logits, None, None, None, None, None, None


class DropoutFunction(torch.autograd.Function):
    """F.dropout(training=True) through dnnx: the mask is drawn from a dnnx.Generator (not from
    PyTorch's generator) and kept as the forward's SavedState for the backward."""

    @staticmethod
    def forward(fctx, src, p, generator, tune, layer):
        src, memory_format = _dense(src)
        context = _layer_context(src, tune)
        desc = _dropout.desc_for(src, p)
        dst, state = _dropout.fwd_training(desc, src, generator=generator, ctx=context)
        _record(layer, "fwd_training", desc, context)
        fctx.state = state
        _keep(fctx, desc, tune, layer, memory_format)
        return dst

    @staticmethod
    @_under_forward_block
    def backward(fctx, diff_dst):
        diff_dst, context = _gradient(fctx, diff_dst)
        diff_src = _dropout.bwd(fctx.desc, diff_dst, fctx.state, ctx=context)
        _record(fctx.layer, "bwd", fctx.desc, context)
        return diff_src, None, None, None, None


def _rnn_setup(src, h0, c0, mode, hidden_size, num_layers, bias, batch_first, bidirectional,
               lengths):
    """(src, h0, c0) dense and the desc of one rnn call (dropout 0: _run_rnn applies the
    module's between layers)."""
    desc = _rnn.desc_for(src, hidden_size, mode, num_layers, bias, batch_first, 0.0,
                         bidirectional, lengths)
    return (src.contiguous(), None if h0 is None else h0.contiguous(),
            None if c0 is None else c0.contiguous(), desc)


def _rnn_fwd(desc, src, h0, c0, lengths, flat, training, tune, layer, version=0):
    """(dst, hy, cy, state, context): fwd_training and its SavedState when `training`, else fwd
    (state None); cy None but for LSTM. `version`: the flat weights' weights_version."""
    context = _layer_context(src, tune)
    if training:
        dst, hy, cy, state = _rnn.fwd_training(desc, src, flat, h0, c0, lengths, ctx=context,
                                               weights_version=version)
        _record(layer, "fwd_training", desc, context)
    else:
        dst, hy, cy = _rnn.fwd(desc, src, flat, h0, c0, lengths, ctx=context,
                               weights_version=version)
        state = None
        _record(layer, "fwd", desc, context)
    return dst, hy, cy, state, context


def _rnn_bwd(desc, context, src, h0, c0, lengths, flat, dst, state, diff_dst, diff_hy, diff_cy,
             layer, version=0):
    """(diff_src, diff_hx, diff_cx, diff_flat) on the training forward's state, on its context
    (the state is its backend's, and on a GPU autograd runs a backward on the stream of its
    forward). diff_hy / diff_cy None count as zeros. `version` as for _rnn_fwd."""
    diff_src, diff_hx, diff_cx = _rnn.bwd_data(
        desc, src, flat, dst, diff_dst.contiguous(), state, h0, c0, lengths,
        None if diff_hy is None else diff_hy.contiguous(),
        None if diff_cy is None else diff_cy.contiguous(), ctx=context, weights_version=version)
    _record(layer, "bwd_data", desc, context)
    diff_flat = _rnn.bwd_weights(desc, src, flat, dst, state, h0, c0, lengths, ctx=context)
    _record(layer, "bwd_weights", desc, context)
    return diff_src, diff_hx, diff_cx, diff_flat


# Note [recurrent weights cache]
# The rnn op takes the weights as one flat tensor; a module holds them as separate parameters.
# Concatenating them on every call is a copy of every weight, and the backends convert the flat
# tensor into their own layouts again (Note [rnn weights version] in src/ops/rnn.cpp) unless told
# it did not change. So the flat tensor is kept per module (and per part: one per layer when the
# layers run one at a time), with a weights_version from a process-wide counter, and built anew
# when the parameters changed: another Parameter object, another data_ptr (.to(), .cuda()),
# another _version (every in-place write through autograd's view of the tensor: optimizer
# steps, torch.nn.init, load_state_dict, copy_ under no_grad), or another dtype (autocast).
# The cache holds the Parameter objects themselves, so a freed parameter's memory cannot come
# back as a "same" key. What it cannot see are writes that bypass the version counter (through
# .data, or from another framework sharing the memory): dnnx.torch.weights_changed(module)
# drops the module's cache after such writes. Tensors made under torch.inference_mode keep no
# version counter: those calls concatenate every time (version 0), as do compiled calls and
# calls captured into a CUDA graph (whose replays must copy the weights as they are then). A
# module's pickled state leaves the cache out. Where the parameters already lie back to back in
# one storage, in order (as torch's flatten_parameters leaves a CUDA RNN's), the flat tensor is a
# view of that memory and nothing is copied; otherwise it is one more copy of the module's weights
# (in the autocast dtype under autocast) for as long as the module lives. The training forward
# saves the flat tensor and the weights for its backward as autograd saves tensors, so a
# parameter written in place between the two is an error there, as for torch's own RNN, not a
# silent mix of old and new weights.
_weights_versions = itertools.count(1)


def weights_changed(module):
    """Forget the flat weights dnnx.torch keeps for `module` and its submodules (Note [recurrent
    weights cache]): call it after writing recurrent weights in a way their version counter does
    not see (through .data, or from another framework sharing their memory)."""
    for child in module.modules():
        child.__dict__.pop("_dnnx_flat_weights", None)


def _storage_of(tensor):
    return tensor.untyped_storage() if hasattr(tensor, "untyped_storage") else tensor.storage()


def _back_to_back(weights):
    """`weights` as one flat view when they lie back to back, in order, in one storage, else
    None (Note [recurrent weights cache])."""
    first = weights[0]
    base = _storage_of(first).data_ptr()
    at, total = first.data_ptr(), 0
    for weight in weights:
        if weight.dtype != first.dtype or not weight.is_contiguous() or \
                weight.data_ptr() != at or _storage_of(weight).data_ptr() != base:
            return None
        at += weight.numel() * weight.element_size()
        total += weight.numel()
    return first.detach().as_strided((total,), (1,))


def _flat_weights(module, part, parameters, weights):
    """(flat, weights_version) of `weights` (the `parameters`, cast as the call needs them) for
    the rnn op, kept on `module` under `part` while the parameters stay the same."""
    try:
        state = tuple((p.data_ptr(), p._version) for p in parameters) + (weights[0].dtype,)
    except RuntimeError:  # inference tensors keep no version counter
        state = None
    if weights[0].is_cuda and torch.cuda.is_current_stream_capturing():
        state = None  # a replayed graph must redo the copy: its weights change between replays
    cache = module.__dict__.setdefault("_dnnx_flat_weights", {})
    kept = cache.get(part)
    if state is not None and kept is not None and kept["state"] == state and \
            len(kept["parameters"]) == len(parameters) and \
            all(a is b for a, b in zip(kept["parameters"], parameters)):
        return kept["flat"], kept["version"]
    with torch.no_grad():
        flat = _back_to_back(weights)
        if flat is None:
            flat = torch.cat([weight.reshape(-1) for weight in weights])
    if state is None:
        cache.pop(part, None)
        return flat, 0
    version = next(_weights_versions)
    cache[part] = {"parameters": tuple(parameters), "state": state, "flat": flat,
                   "version": version}
    return flat, version


class RnnFunction(torch.autograd.Function):
    """nn.RNN / LSTM / GRU through dnnx's rnn op: one call for the whole stack (or one layer of
    it, see _run_rnn), fwd or fwd_training, then bwd_data and bwd_weights. Outputs (dst, hy)
    and cy for LSTM. `flat` is (the flat weights, their weights_version): the module's
    parameters concatenated in _flat_weights order (Note [recurrent weights cache]); their
    gradient is handed back split per parameter. The backward runs on the forward's context
    (its SavedState is that backend's)."""

    @staticmethod
    def forward(fctx, src, h0, c0, lengths, desc, training, tune, layer, flat, *weights):
        src = src.contiguous()
        h0 = None if h0 is None else h0.contiguous()
        c0 = None if c0 is None else c0.contiguous()
        flat, version = flat
        dst, hy, cy, state, context = _rnn_fwd(desc, src, h0, c0, lengths, flat, training, tune,
                                               layer, version)
        if training:
            fctx.save_for_backward(src, h0, c0, dst, flat, *weights)
            fctx.version, fctx.state, fctx.lengths = version, state, lengths
            fctx.shapes = [weight.shape for weight in weights]
            fctx.desc, fctx.context, fctx.layer = desc, context, layer
        return (dst, hy) if cy is None else (dst, hy, cy)

    @staticmethod
    def backward(fctx, diff_dst, diff_hy, diff_cy=None):
        src, h0, c0, dst, flat = fctx.saved_tensors[:5]
        diff_src, diff_hx, diff_cx, diff_flat = _rnn_bwd(
            fctx.desc, fctx.context, src, h0, c0, fctx.lengths, flat, dst, fctx.state,
            diff_dst, diff_hy, diff_cy, fctx.layer, fctx.version)
        diff_weights, offset = [], 0
        for shape in fctx.shapes:
            count = shape.numel()
            diff_weights.append(diff_flat[offset:offset + count].view(shape))
            offset += count
        return (diff_src, None if h0 is None else diff_hx, None if c0 is None else diff_cx,
                None, None, None, None, None, None, *diff_weights)


# Note [eager and compiled calls]: every call goes through one _run_<op> below. Eagerly it applies
# the op's autograd function, which keeps Python objects (the desc, the layer) for its backward.
# While torch.compile traces (PyTorch >= 2.4) it calls the op's torch.library custom op
# (dnnx/_torch_library.py) instead, which the compiled graph keeps as one opaque node; a layer
# reaches it as its key and a call with its own `tune` (no layer) runs eagerly (a graph break).
# Under torch.autocast the inputs are cast first as autocast casts them for PyTorch's own ops:
# convolutions and linear layers to the autocast dtype, softmax and cross-entropy to f32.

try:
    _is_compiling = torch.compiler.is_compiling
except AttributeError:  # PyTorch < 2.3: nothing compiles
    def _is_compiling():
        return False


def _compiled(tune, layer):
    """The layer's key for the custom ops when this call is being compiled, else None."""
    if not (_library.AVAILABLE and _is_compiling()):
        return None
    if layer is not None:
        return getattr(layer, "_dnnx_key", "")
    return "" if tune is None else None


if hasattr(torch, "get_autocast_dtype"):  # PyTorch >= 2.4
    def _autocast_state(kind):
        """(whether autocast is on for device type `kind`, its dtype)."""
        return torch.is_autocast_enabled(kind), torch.get_autocast_dtype(kind)
else:
    def _autocast_state(kind):
        """(whether autocast is on for device type `kind`, its dtype)."""
        if kind == "cuda":
            return torch.is_autocast_enabled(), torch.get_autocast_gpu_dtype()
        return torch.is_autocast_cpu_enabled(), torch.get_autocast_cpu_dtype()


def _autocast(lower, *tensors):
    """`tensors` as autocast hands them to PyTorch's own op: floating-point ones but f64 (which
    autocast leaves as they are) in the autocast dtype (lower=True, as for convolutions) or in f32
    (lower=False, as for softmax)."""
    kind = tensors[0].device.type
    if kind not in ("cuda", "cpu"):
        return tensors
    enabled, dtype = _autocast_state(kind)
    if not enabled:
        return tensors
    target = dtype if lower else torch.float32
    return tuple(t.to(target) if t is not None and t.is_floating_point()
                 and t.dtype not in (target, torch.float64) else t for t in tensors)


def _autograd_records(*tensors):
    """Whether autograd records a call on `tensors`: grad mode on and one of them requires grad.
    A call it does not record runs the op's directions without the autograd function (Note
    [calls autograd does not record])."""
    if not torch.is_grad_enabled():
        return False
    for tensor in tensors:
        if tensor is not None and tensor.requires_grad:
            return True
    return False


# Note [calls autograd does not record]
# torch.autograd.Function.apply costs several microseconds of host time (the Function object,
# its context, the graph node), as much as the op itself for a small layer. Under torch.no_grad()
# or on tensors none of which requires grad (inference, an evaluation loop) autograd records
# nothing and the result is the forward's alone: those calls run the op's setup and forward
# directly, with the same desc, context and choice report as under the function.


def _ints(value, rank, name):
    """A per-dimension list of `rank` ints from an int or a sequence."""
    if isinstance(value, int):
        return [value] * rank
    value = [int(v) for v in value]
    if len(value) == 1:
        return value * rank
    if len(value) != rank:
        raise InvalidArgument(f"{name}: {len(value)} values for {rank} spatial dimensions")
    return value


def _run_conv(src, weight, bias, stride, padding, dilation, groups, tune, layer):
    src, weight, bias = _autocast(True, src, weight, bias)
    key = _compiled(tune, layer)
    if key is not None:
        rank = src.dim() - 2
        return _library.OPS["conv"](src, weight, bias, _ints(stride, rank, "stride"),
                                    _ints(padding, rank, "padding"),
                                    _ints(dilation, rank, "dilation"), groups, key)
    if not _autograd_records(src, weight, bias):  # Note [calls autograd does not record]
        src, weight, desc, _ = _conv_setup(src, weight, stride, padding, dilation, groups)
        return _conv_fwd(desc, src, weight, bias, tune, layer)
    return ConvFunction.apply(src, weight, bias, stride, padding, dilation, groups, tune, layer)


def _run_linear(src, weight, bias, tune, layer):
    src, weight, bias = _autocast(True, src, weight, bias)
    key = _compiled(tune, layer)
    if key is not None:
        return _library.OPS["linear"](src, weight, bias, key)
    if not _autograd_records(src, weight, bias):  # Note [calls autograd does not record]
        rows, weight, desc = _linear_setup(src, weight, bias is not None)
        return _linear_fwd(desc, rows, weight, bias, src.shape, tune, layer)
    return LinearFunction.apply(src, weight, bias, tune, layer)


def _run_batch_norm(src, weight, bias, running_mean, running_var, training, momentum, eps, tune,
                    layer):
    key = _compiled(tune, layer)
    if key is not None:
        return _library.OPS["batch_norm"](src, weight, bias, running_mean, running_var, training,
                                          momentum, eps, key)
    if not _autograd_records(src, weight, bias):  # Note [calls autograd does not record]
        src, desc, _ = _batch_norm_setup(src, weight, training, momentum, eps)
        return _batch_norm_fwd(desc, src, weight, bias, running_mean, running_var, tune,
                               layer)[0]
    return BatchNormFunction.apply(src, weight, bias, running_mean, running_var, training,
                                   momentum, eps, tune, layer)


def _run_pool(src, kernel, stride, padding, dilation, ceil_mode, mode, tune, layer):
    key = _compiled(tune, layer)
    if key is not None:
        rank = src.dim() - 2
        kernel = _ints(kernel, rank, "kernel")
        stride = kernel if stride is None or stride == [] else _ints(stride, rank, "stride")
        return _library.OPS["pool"](src, kernel, stride, _ints(padding, rank, "padding"),
                                    _ints(dilation, rank, "dilation"), ceil_mode, mode, key)
    if not _autograd_records(src):  # Note [calls autograd does not record]
        src, desc, _ = _pool_setup(src, kernel, stride, padding, dilation, ceil_mode, mode)
        return _pool_fwd(desc, src, tune, layer)
    return PoolFunction.apply(src, kernel, stride, padding, dilation, ceil_mode, mode, tune,
                              layer)


def _run_activation(src, kind, alpha, ceiling, tune, layer, in_place=False):
    """`in_place`: write over `src` where _in_place_allowed, when autograd records the call (its
    mark_dirty moves the version, which a write autograd does not see would not)."""
    key = _compiled(tune, layer)
    if key is not None:
        return _library.OPS["activation"](src, kind, float(alpha), float(ceiling), key)
    if not _autograd_records(src):  # Note [calls autograd does not record]
        src, desc, _ = _activation_setup(src, kind, alpha, ceiling)
        return _activation_fwd(desc, src, tune, layer)
    if in_place and _in_place_allowed(src):
        return ActivationInPlaceFunction.apply(src, kind, alpha, ceiling, tune, layer)
    return ActivationFunction.apply(src, kind, alpha, ceiling, tune, layer)


def _run_softmax(src, log, tune, layer):
    src, = _autocast(False, src)
    key = _compiled(tune, layer)
    if key is not None:
        return _library.OPS["softmax"](src, log, key)
    if not _autograd_records(src):  # Note [calls autograd does not record]
        src, desc, _ = _softmax_setup(src, log)
        return _softmax_fwd(desc, src, tune, layer)
    return SoftmaxFunction.apply(src, log, tune, layer)


def _run_cross_entropy(logits, labels, weight, ignore_index, reduction, tune, layer):
    logits, weight = _autocast(False, logits, weight)
    key = _compiled(tune, layer)
    if key is not None:
        return _library.OPS["cross_entropy"](logits, labels, weight, ignore_index, reduction,
                                             key)
    if not _autograd_records(logits, weight):  # Note [calls autograd does not record]
        logits, labels, weight, desc = _cross_entropy_setup(logits, labels, weight, ignore_index,
                                                            reduction)
        return _cross_entropy_fwd(desc, logits, labels, weight, tune, layer)
    return CrossEntropyFunction.apply(logits, labels, weight, ignore_index, reduction, tune,
                                      layer)


def conv(src, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, tune=None):
    """F.conv1d/2d/3d through dnnx (autograd: every direction through dnnx). `tune`: a
    dnnx.TuneOptions for this call (default: the context's)."""
    cpp = _cpp_function("conv")
    if cpp is not None:
        out = cpp.conv(src, weight, bias, tune, (stride, padding, dilation, groups))
        if out is not None:
            return out
    return _run_conv(src, weight, bias, stride, padding, dilation, groups, tune, None)


def linear(src, weight, bias=None, tune=None):
    """F.linear through dnnx."""
    cpp = _cpp_function("linear")
    if cpp is not None:
        out = cpp.linear(src, weight, bias, tune)
        if out is not None:
            return out
    return _run_linear(src, weight, bias, tune, None)


def batch_norm(src, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5, tune=None):
    """F.batch_norm through dnnx (argument order as PyTorch's)."""
    cpp = _cpp_function("batch_norm")
    if cpp is not None:
        out = cpp.batch_norm(src, weight, bias, running_mean, running_var, tune,
                             (training, momentum, eps))
        if out is not None:
            return out
    return _run_batch_norm(src, weight, bias, running_mean, running_var, training, momentum, eps,
                           tune, None)


def pool(src, kernel, stride=None, padding=0, dilation=1, ceil_mode=False, mode="max",
         tune=None):
    """F.max_pool*d (mode 'max') and F.avg_pool*d ('avg_include_pad': count_include_pad=True,
    'avg_exclude_pad') through dnnx."""
    cpp = _cpp_function("pool")
    if cpp is not None:
        out = cpp.pool(src, tune, (kernel, stride, padding, dilation, ceil_mode, mode))
        if out is not None:
            return out
    return _run_pool(src, kernel, stride, padding, dilation, ceil_mode, mode, tune, None)


def activation(src, kind="relu", alpha=1.0, ceiling=6.0, tune=None):
    """An activation through dnnx: 'relu', 'tanh', 'sigmoid', 'elu' (alpha), 'swish' (F.silu),
    'clipped_relu' (F.hardtanh(x, 0, ceiling))."""
    cpp = _cpp_function("activation")
    if cpp is not None:
        out = cpp.activation(src, tune, (kind, alpha, ceiling))
        if out is not None:
            return out
    return _run_activation(src, kind, alpha, ceiling, tune, None)


def dropout(src, p=0.5, training=True, generator=None, tune=None):
    """F.dropout through dnnx: the input itself when not training or p is 0, as F.dropout; the
    mask from `generator` (default: dnnx.default_generator)."""
    if not training or p == 0.0:
        return src
    cpp = _cpp_function("dropout")
    if cpp is not None:
        out = cpp.dropout(src, float(p), _random.generator_or_default(generator), tune)
        if out is not None:
            return out
    return DropoutFunction.apply(src, p, generator, tune, None)


def softmax(src, log=False, tune=None):
    """F.softmax(src, dim=1) (F.log_softmax with log=True) through dnnx."""
    cpp = _cpp_function("softmax")
    if cpp is not None:
        out = cpp.softmax(src, tune, bool(log))
        if out is not None:
            return out
    return _run_softmax(src, log, tune, None)


def cross_entropy(logits, labels, weight=None, ignore_index=-100, reduction="mean", tune=None):
    """F.cross_entropy with class-index labels through dnnx."""
    cpp = _cpp_function("cross_entropy")
    if cpp is not None:
        out = cpp.cross_entropy(logits, labels, weight, tune, (ignore_index, reduction))
        if out is not None:
            return out
    return _run_cross_entropy(logits, labels, weight, ignore_index, reduction, tune, None)


# Note [layers in C++] (python/src/torch_ext/module.cpp): a converted layer's eager call runs
# through dnnx._torch_ext when it was built against the PyTorch this process imported, unless
# DNNX_TORCH_EXT=0: the same desc, context and choices as the autograd functions above, without
# their Python. A call it declines (returns None) and every call while torch.compile traces go
# the Python way. CPP_LAYERS says whether it is in use, CPP_LAYERS_WHY why not.
def _load_cpp_layers():
    if os.environ.get("DNNX_TORCH_EXT", "1") == "0":
        return None, "DNNX_TORCH_EXT=0"
    try:
        from ._torch_ext_info import TORCH_VERSION
    except ImportError:
        return None, "dnnx._torch_ext was not built (python/CMakeLists.txt says why)"
    if TORCH_VERSION != torch.__version__:
        return None, (f"dnnx._torch_ext was built against PyTorch {TORCH_VERSION}, this process "
                      f"runs {torch.__version__}")
    try:
        from . import _torch_ext
    except ImportError as error:
        return None, f"dnnx._torch_ext did not load: {error}"
    _torch_ext.set_hooks(_layer_context, _current, _context_module, {
        "conv": lambda src, weight, settings: _conv.desc_for(src, weight, *settings),
        "batch_norm": lambda src, settings, affine: _batch_norm.desc_for(
            src, training=settings[0], momentum=settings[1], eps=settings[2], affine=affine),
        "pool": lambda src, settings: _pool.desc_for(src, settings[0], settings[1], settings[2],
                                                     settings[3], settings[5], settings[4]),
        "linear": lambda rows, weight, settings, has_bias: _matmul.linear_desc(rows, weight,
                                                                              has_bias),
        "softmax": lambda src, log: _softmax.desc_for(src, mode="channel", log=log),
        "cross_entropy": lambda logits, labels, weight, settings: _cross_entropy.desc_for(
            logits, labels, settings[1], settings[0], weight),
        "dropout": lambda src, p: _dropout.desc_for(src, p),
        "activation": lambda src, settings: _activation.desc_for(
            src, settings[0], alpha=settings[1], ceiling=settings[2],
            saved="dst" if len(settings) > 3 and settings[3] else "src_and_dst"),
    })
    return _torch_ext, None


_cpp, CPP_LAYERS_WHY = _load_cpp_layers()
CPP_LAYERS = _cpp is not None


_cpp_functions = {}


def _cpp_function(op):
    """The dnnx._torch_ext.Layer the functional calls of `op` share (dnnx.torch.conv, ...), or
    None when the call goes the Python way. It keeps more descs than a module's: its calls come
    from every layer of a network."""
    if _cpp is None or _is_compiling():
        return None
    layer = _cpp_functions.get(op)
    if layer is None:
        layer = _cpp_functions[op] = _cpp.Layer(op, keep=64)
    return layer


def _cpp_layer(module, op):
    """The module's dnnx._torch_ext.Layer (made on first use), or None when the call goes the
    Python way (no C++ layers, or torch.compile tracing)."""
    if _cpp is None or _is_compiling():
        return None
    layer = module.__dict__.get("_dnnx_cpp")
    if layer is None:
        layer = module.__dict__["_dnnx_cpp"] = _cpp.Layer(op)
    return layer


class _ConvMixin:
    def forward(self, input):
        cpp = _cpp_layer(self, "conv")
        if cpp is not None:
            out = cpp.conv(input, self.weight, self.bias, self.__dict__.get("_dnnx_tune"),
                           (self.stride, self.padding, self.dilation, self.groups))
            if out is not None:
                return out
        return _run_conv(input, self.weight, self.bias, self.stride, self.padding,
                         self.dilation, self.groups, _tune_of(self), self)


class Conv1d(_ConvMixin, torch.nn.Conv1d):
    """nn.Conv1d through dnnx (zero padding mode, numeric padding)."""


class Conv2d(_ConvMixin, torch.nn.Conv2d):
    """nn.Conv2d through dnnx (zero padding mode, numeric padding)."""


class Conv3d(_ConvMixin, torch.nn.Conv3d):
    """nn.Conv3d through dnnx (zero padding mode, numeric padding)."""


class Linear(torch.nn.Linear):
    """nn.Linear through dnnx's matmul."""

    def forward(self, input):
        cpp = _cpp_layer(self, "linear")
        if cpp is not None:
            out = cpp.linear(input, self.weight, self.bias, self.__dict__.get("_dnnx_tune"))
            if out is not None:
                return out
        return _run_linear(input, self.weight, self.bias, _tune_of(self), self)


class _BatchNormMixin:
    def forward(self, input):
        self._check_input_dim(input)
        momentum = self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
        training = self.training or self.running_mean is None
        track = not self.training or self.track_running_stats
        cpp = _cpp_layer(self, "batch_norm")
        if cpp is not None:
            out = cpp.batch_norm(input, self.weight, self.bias,
                                 self.running_mean if track else None,
                                 self.running_var if track else None,
                                 self.__dict__.get("_dnnx_tune"), (training, momentum, self.eps))
            if out is not None:
                return out
        return _run_batch_norm(input, self.weight, self.bias,
                               self.running_mean if track else None,
                               self.running_var if track else None, training, momentum, self.eps,
                               _tune_of(self), self)


class BatchNorm1d(_BatchNormMixin, torch.nn.BatchNorm1d):
    """nn.BatchNorm1d through dnnx (a momentum, not the cumulative average)."""


class BatchNorm2d(_BatchNormMixin, torch.nn.BatchNorm2d):
    """nn.BatchNorm2d through dnnx (a momentum, not the cumulative average)."""


class BatchNorm3d(_BatchNormMixin, torch.nn.BatchNorm3d):
    """nn.BatchNorm3d through dnnx (a momentum, not the cumulative average)."""


def _tune_of(module):
    return module.__dict__.get("_dnnx_tune")


class _PoolMixin:
    def forward(self, input):
        if isinstance(self, torch.nn.modules.pooling._MaxPoolNd):
            mode, dilation = "max", self.dilation
        else:
            mode = "avg_include_pad" if self.count_include_pad else "avg_exclude_pad"
            dilation = 1
        cpp = _cpp_layer(self, "pool")
        if cpp is not None:
            out = cpp.pool(input, self.__dict__.get("_dnnx_tune"),
                           (self.kernel_size, self.stride, self.padding, dilation, self.ceil_mode,
                            mode))
            if out is not None:
                return out
        return _run_pool(input, self.kernel_size, self.stride, self.padding, dilation,
                         self.ceil_mode, mode, _tune_of(self), self)


class MaxPool1d(_PoolMixin, torch.nn.MaxPool1d):
    """nn.MaxPool1d through dnnx (without return_indices)."""


class MaxPool2d(_PoolMixin, torch.nn.MaxPool2d):
    """nn.MaxPool2d through dnnx (without return_indices)."""


class MaxPool3d(_PoolMixin, torch.nn.MaxPool3d):
    """nn.MaxPool3d through dnnx (without return_indices)."""


class AvgPool1d(_PoolMixin, torch.nn.AvgPool1d):
    """nn.AvgPool1d through dnnx."""


class AvgPool2d(_PoolMixin, torch.nn.AvgPool2d):
    """nn.AvgPool2d through dnnx (without divisor_override)."""


def _adaptive_window(input, output_size, spatial):
    """The kernel (also the stride) of the plain pooling that an adaptive pooling to
    `output_size` over `input` is, or None: a batched input each of whose `spatial` sizes is a
    multiple of the output's (None in output_size keeps the input's size). Then every window has
    that size and the windows tile the input; otherwise adaptive windows differ in size."""
    if input.dim() != spatial + 2:
        return None
    sizes = tuple(output_size) if isinstance(output_size, (tuple, list)) \
        else (output_size,) * spatial
    kernel = []
    for have, want in zip(input.shape[2:], sizes):
        want = have if want is None else want
        if want <= 0 or have % want:
            return None
        kernel.append(have // want)
    return tuple(kernel)


class _AdaptivePoolMixin:
    """Adaptive pooling through dnnx where it is a plain pooling (_adaptive_window: the global
    pool that ends a classifier, any output size dividing the input's); PyTorch's own module
    otherwise (unbatched inputs, windows of different sizes, which dnnx's pooling has not)."""

    def forward(self, input):
        kernel = _adaptive_window(input, self.output_size, self._spatial)
        if kernel is None:
            return super().forward(input)
        mode = "max" if isinstance(self, torch.nn.modules.pooling._AdaptiveMaxPoolNd) \
            else "avg_exclude_pad"
        cpp = _cpp_layer(self, "pool")
        if cpp is not None:
            out = cpp.pool(input, self.__dict__.get("_dnnx_tune"),
                           (kernel, kernel, 0, 1, False, mode))
            if out is not None:
                return out
        return _run_pool(input, kernel, kernel, 0, 1, False, mode, _tune_of(self), self)


class AdaptiveAvgPool1d(_AdaptivePoolMixin, torch.nn.AdaptiveAvgPool1d):
    """nn.AdaptiveAvgPool1d through dnnx where the output size divides the input's."""
    _spatial = 1


class AdaptiveAvgPool2d(_AdaptivePoolMixin, torch.nn.AdaptiveAvgPool2d):
    """nn.AdaptiveAvgPool2d through dnnx where the output size divides the input's."""
    _spatial = 2


class AdaptiveAvgPool3d(_AdaptivePoolMixin, torch.nn.AdaptiveAvgPool3d):
    """nn.AdaptiveAvgPool3d through dnnx where the output size divides the input's."""
    _spatial = 3


class AdaptiveMaxPool1d(_AdaptivePoolMixin, torch.nn.AdaptiveMaxPool1d):
    """nn.AdaptiveMaxPool1d through dnnx where the output size divides the input's (without
    return_indices)."""
    _spatial = 1


class AdaptiveMaxPool2d(_AdaptivePoolMixin, torch.nn.AdaptiveMaxPool2d):
    """nn.AdaptiveMaxPool2d through dnnx where the output size divides the input's (without
    return_indices)."""
    _spatial = 2


class AdaptiveMaxPool3d(_AdaptivePoolMixin, torch.nn.AdaptiveMaxPool3d):
    """nn.AdaptiveMaxPool3d through dnnx where the output size divides the input's (without
    return_indices)."""
    _spatial = 3


class AvgPool3d(_PoolMixin, torch.nn.AvgPool3d):
    """nn.AvgPool3d through dnnx (without divisor_override)."""


def _activation_module(name, kind, doc, base, options=None):
    """A drop-in activation: `options(module)` gives its (alpha, ceiling) where they are not the
    defaults (1.0, 6.0). With `inplace` it writes over its input where PyTorch's in-place op
    would and the backward can read the output alone (Note [in-place activations] in
    python/src/torch_ext/module.cpp), in C++ and on the Python path alike."""
    defaults = (kind, 1.0, 6.0)
    defaults_in_place = defaults + (True,)

    def forward(self, input):
        settings = defaults if options is None else (kind, *options(self))
        in_place = bool(self.__dict__.get("inplace")) and (
            kind in ("relu", "clipped_relu") or (kind == "elu" and settings[1] >= 0))
        cpp = _cpp_layer(self, "activation")
        if cpp is not None:
            in_place_settings = None
            if in_place:
                in_place_settings = defaults_in_place if options is None else settings + (True,)
            out = cpp.activation(input, self.__dict__.get("_dnnx_tune"), settings,
                                 in_place_settings)
            if out is not None:
                return out
        return _run_activation(input, kind, settings[1], settings[2], _tune_of(self), self,
                               in_place)

    return type(name, (base,), {"forward": forward, "__doc__": doc})


ReLU = _activation_module("ReLU", "relu", "nn.ReLU through dnnx (in place with `inplace`).",
                          torch.nn.ReLU)
ReLU6 = _activation_module("ReLU6", "clipped_relu", "nn.ReLU6 through dnnx (in place with "
                           "`inplace`).", torch.nn.ReLU6)
Tanh = _activation_module("Tanh", "tanh", "nn.Tanh through dnnx.", torch.nn.Tanh)
Sigmoid = _activation_module("Sigmoid", "sigmoid", "nn.Sigmoid through dnnx.", torch.nn.Sigmoid)
SiLU = _activation_module("SiLU", "swish", "nn.SiLU through dnnx (out of place).", torch.nn.SiLU)
ELU = _activation_module("ELU", "elu", "nn.ELU through dnnx (in place with `inplace` and alpha "
                         ">= 0).", torch.nn.ELU,
                         lambda module: (module.alpha, 6.0))


class Dropout(torch.nn.Dropout):
    """nn.Dropout through dnnx (out of place, also when `inplace`): in eval mode, or with p 0, the
    input itself. The mask comes from dnnx.default_generator (dnnx.manual_seed seeds it), or from
    the module's `generator` attribute when set to a dnnx.Generator."""

    def forward(self, input):
        if not self.training or self.p == 0.0:
            return input
        generator = getattr(self, "generator", None)
        cpp = _cpp_layer(self, "dropout")
        if cpp is not None:
            out = cpp.dropout(input, float(self.p), _random.generator_or_default(generator),
                              self.__dict__.get("_dnnx_tune"))
            if out is not None:
                return out
        return DropoutFunction.apply(input, self.p, generator, _tune_of(self), self)


def _run_rnn_stack(module, src, h0, c0, lengths, weights, parameters, part, layers, batch_first):
    """(output, h_n, c_n) of `layers` stacked layers of `module` from one rnn call; `weights`
    are `parameters` as the call takes them (autocast), `part` names the call's weights in the
    module's cache (Note [recurrent weights cache])."""
    training = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (src, h0, c0, *weights))
    tune = _tune_of(module)
    key = _compiled(tune, module)
    if key is not None:  # Note [eager and compiled calls]; the weights' gradient splits by cat's
        flat = torch.cat([weight.reshape(-1) for weight in weights])
        dst, hy, cy = _library.OPS["rnn"](src, h0, c0, lengths, flat, module.mode,
                                          module.hidden_size, layers, module.bias, batch_first,
                                          module.bidirectional, training, key)
        return dst, hy, (cy if module.mode == "LSTM" else None)
    desc = _rnn.desc_for(src, module.hidden_size, module.mode, layers, module.bias, batch_first,
                         0.0, module.bidirectional, lengths)
    flat = _flat_weights(module, part, parameters, weights)
    outputs = RnnFunction.apply(src, h0, c0, lengths, desc, training, tune, module, flat,
                                *weights)
    return outputs if len(outputs) == 3 else (*outputs, None)


def _pack_like(padded, packed):
    """The PackedSequence of padded (T, N, C) outputs with `packed`'s batch sizes and order."""
    batch_sizes = packed.batch_sizes
    if packed.sorted_indices is not None:
        padded = padded.index_select(1, packed.sorted_indices.to(padded.device))
    steps = torch.arange(padded.shape[1]).unsqueeze(0) < batch_sizes.unsqueeze(1)
    data = padded[: batch_sizes.shape[0]][steps.to(padded.device)]
    return torch.nn.utils.rnn.PackedSequence(data, batch_sizes, packed.sorted_indices,
                                             packed.unsorted_indices)


def _run_rnn(module, input, hx):
    """torch.nn.RNNBase.forward through dnnx: a tensor (batched or not) or a PackedSequence,
    hx (h_0, or (h_0, c_0) for LSTM, in the input's batch order), returning (output, h_n) or
    (output, (h_n, c_n)) as PyTorch does."""
    packed = isinstance(input, torch.nn.utils.rnn.PackedSequence)
    lstm = module.mode == "LSTM"
    lengths = None
    unbatched = False
    if packed:
        src, lengths = torch.nn.utils.rnn.pad_packed_sequence(input, batch_first=False)
    else:
        src = input
        if src.dim() == 2:  # unbatched (seq, features): a batch of one, sequence-major
            unbatched = True
            src = src.unsqueeze(1)
    batch_first = module.batch_first and not packed and not unbatched
    if src.dim() != 3 or src.shape[2] != module.input_size:
        shape = tuple((input.data if packed else input).shape)
        raise InvalidArgument(f"{type(module).__name__}: input of shape {shape} must have 2 or 3 "
                              f"dims and input_size = {module.input_size} features in the last")
    h0, c0 = (hx if lstm else (hx, None)) if hx is not None else (None, None)
    if unbatched:
        h0 = None if h0 is None else h0.unsqueeze(1)
        c0 = None if c0 is None else c0.unsqueeze(1)
    parameters = [getattr(module, name) for name in module._flat_weights_names]
    # Under autocast, in the autocast dtype (cuDNN's RNN is one of autocast's lower-precision ops).
    src, h0, c0, *weights = _autocast(True, src, h0, c0, *parameters)
    layers, directions = module.num_layers, 2 if module.bidirectional else 1
    if module.training and module.dropout > 0 and layers > 1:
        # As nn::RNNBase (Note [rnn module dropout] in src/nn/rnn.cpp): one layer at a time,
        # dnnx's dropout between them, the same masks on every backend.
        per_layer = len(weights) // layers
        layer_input, h_n, c_n = src, [], []
        for layer in range(layers):
            rows = slice(layer * directions, (layer + 1) * directions)
            mine = slice(layer * per_layer, (layer + 1) * per_layer)
            out, h, c = _run_rnn_stack(
                module, layer_input, None if h0 is None else h0[rows],
                None if c0 is None else c0[rows], lengths, weights[mine], parameters[mine], layer,
                1, batch_first)
            h_n.append(h)
            c_n.append(c)
            layer_input = out if layer + 1 == layers else DropoutFunction.apply(
                out, module.dropout, getattr(module, "generator", None), _tune_of(module), None)
        output, h_n = layer_input, torch.cat(h_n)
        c_n = torch.cat(c_n) if lstm else None
    else:
        output, h_n, c_n = _run_rnn_stack(module, src, h0, c0, lengths, weights, parameters,
                                          "all", layers, batch_first)
    if packed:
        output = _pack_like(output, input)
    elif unbatched:
        output, h_n = output.squeeze(1), h_n.squeeze(1)
        c_n = None if c_n is None else c_n.squeeze(1)
    return output, ((h_n, c_n) if lstm else h_n)


class _RnnMixin:
    def forward(self, input, hx=None):
        return _run_rnn(self, input, hx)


class RNN(_RnnMixin, torch.nn.RNN):
    """nn.RNN (tanh or relu) through dnnx's rnn op. Dropout between layers draws from
    dnnx.default_generator (or the module's `generator` attribute)."""


class LSTM(_RnnMixin, torch.nn.LSTM):
    """nn.LSTM through dnnx's rnn op (no proj_size). Dropout as RNN's."""


class GRU(_RnnMixin, torch.nn.GRU):
    """nn.GRU through dnnx's rnn op. Dropout as RNN's."""


class Softmax(torch.nn.Softmax):
    """nn.Softmax(dim=1) through dnnx."""

    def forward(self, input):
        cpp = _cpp_layer(self, "softmax")
        if cpp is not None:
            out = cpp.softmax(input, self.__dict__.get("_dnnx_tune"), False)
            if out is not None:
                return out
        return _run_softmax(input, False, _tune_of(self), self)


class LogSoftmax(torch.nn.LogSoftmax):
    """nn.LogSoftmax(dim=1) through dnnx."""

    def forward(self, input):
        cpp = _cpp_layer(self, "softmax")
        if cpp is not None:
            out = cpp.softmax(input, self.__dict__.get("_dnnx_tune"), True)
            if out is not None:
                return out
        return _run_softmax(input, True, _tune_of(self), self)


class CrossEntropyLoss(torch.nn.CrossEntropyLoss):
    """nn.CrossEntropyLoss with class-index targets through dnnx (no label smoothing)."""

    def forward(self, input, target):
        cpp = _cpp_layer(self, "cross_entropy")
        if cpp is not None:
            out = cpp.cross_entropy(input, target, self.weight, self.__dict__.get("_dnnx_tune"),
                                    (self.ignore_index, self.reduction))
            if out is not None:
                return out
        return _run_cross_entropy(input, target, self.weight, self.ignore_index, self.reduction,
                                  _tune_of(self), self)


_CONVERTED = {
    torch.nn.Conv1d: Conv1d, torch.nn.Conv2d: Conv2d, torch.nn.Conv3d: Conv3d,
    torch.nn.Linear: Linear,
    torch.nn.BatchNorm1d: BatchNorm1d, torch.nn.BatchNorm2d: BatchNorm2d,
    torch.nn.BatchNorm3d: BatchNorm3d,
    torch.nn.MaxPool1d: MaxPool1d, torch.nn.MaxPool2d: MaxPool2d, torch.nn.MaxPool3d: MaxPool3d,
    torch.nn.AvgPool1d: AvgPool1d, torch.nn.AvgPool2d: AvgPool2d, torch.nn.AvgPool3d: AvgPool3d,
    torch.nn.AdaptiveAvgPool1d: AdaptiveAvgPool1d, torch.nn.AdaptiveAvgPool2d: AdaptiveAvgPool2d,
    torch.nn.AdaptiveAvgPool3d: AdaptiveAvgPool3d, torch.nn.AdaptiveMaxPool1d: AdaptiveMaxPool1d,
    torch.nn.AdaptiveMaxPool2d: AdaptiveMaxPool2d, torch.nn.AdaptiveMaxPool3d: AdaptiveMaxPool3d,
    torch.nn.ReLU: ReLU, torch.nn.ReLU6: ReLU6, torch.nn.Tanh: Tanh, torch.nn.Sigmoid: Sigmoid,
    torch.nn.SiLU: SiLU, torch.nn.ELU: ELU, torch.nn.Dropout: Dropout,
    torch.nn.Softmax: Softmax, torch.nn.LogSoftmax: LogSoftmax,
    torch.nn.CrossEntropyLoss: CrossEntropyLoss,
    torch.nn.RNN: RNN, torch.nn.LSTM: LSTM, torch.nn.GRU: GRU,
}
# Which op's policies a converted module's directions are.
_OPS = {Conv1d: "conv", Conv2d: "conv", Conv3d: "conv", Linear: "matmul",
        BatchNorm1d: "bnorm", BatchNorm2d: "bnorm", BatchNorm3d: "bnorm",
        MaxPool1d: "pool", MaxPool2d: "pool", MaxPool3d: "pool", AvgPool1d: "pool",
        AvgPool2d: "pool", AvgPool3d: "pool", AdaptiveAvgPool1d: "pool",
        AdaptiveAvgPool2d: "pool", AdaptiveAvgPool3d: "pool", AdaptiveMaxPool1d: "pool",
        AdaptiveMaxPool2d: "pool", AdaptiveMaxPool3d: "pool", ReLU: "act", ReLU6: "act", Tanh: "act",
        Sigmoid: "act", SiLU: "act", ELU: "act", Dropout: "dropout", Softmax: "softmax", LogSoftmax: "softmax",
        CrossEntropyLoss: "xent", RNN: "rnn", LSTM: "rnn", GRU: "rnn"}


def _getstate(module):
    """A drop-in's state for copy.deepcopy and pickle: its __dict__ without what belongs to this
    process's calls, the record of what ran (its contexts), its C++ layer (Note [layers in C++])
    and the kept flat weights (Note [recurrent weights cache]); the layer's own options
    (_dnnx_tune) go with it."""
    for cls in type(module).__mro__[1:]:  # the base's own first (RNNBase drops its weakrefs)
        if "__getstate__" in cls.__dict__:
            state = dict(cls.__dict__["__getstate__"](module))
            break
    else:
        state = module.__dict__.copy()
    state.pop("_dnnx_calls", None)
    state.pop("_dnnx_cpp", None)
    state.pop("_dnnx_flat_weights", None)
    return state


for _dropin in _OPS:
    _dropin.__getstate__ = _getstate


def why_not_converted(module):
    """Why convert() leaves `module` as it is, or None when it converts it."""
    if type(module) not in _CONVERTED:
        return f"{type(module).__name__} has no dnnx counterpart"
    if isinstance(module, torch.nn.modules.conv._ConvNd):
        if module.padding_mode != "zeros":
            return f"padding_mode '{module.padding_mode}' (dnnx pads with zeros)"
        if isinstance(module.padding, str):
            return f"padding '{module.padding}' (dnnx takes numeric padding)"
    if isinstance(module, torch.nn.modules.batchnorm._BatchNorm) and module.momentum is None:
        return "momentum None (the cumulative average; dnnx updates with a momentum)"
    if isinstance(module, (torch.nn.modules.pooling._MaxPoolNd,
                           torch.nn.modules.pooling._AdaptiveMaxPoolNd)) and module.return_indices:
        return "return_indices (the module returns a tuple)"
    if isinstance(module, (torch.nn.AvgPool2d, torch.nn.AvgPool3d)) and \
            module.divisor_override is not None:
        return "divisor_override"
    if isinstance(module, (torch.nn.Softmax, torch.nn.LogSoftmax)) and module.dim != 1:
        return f"dim {module.dim} (dnnx normalises over dim 1, the channels)"
    if isinstance(module, torch.nn.CrossEntropyLoss) and \
            getattr(module, "label_smoothing", 0.0) != 0.0:
        return "label_smoothing"
    if isinstance(module, torch.nn.LSTM) and module.proj_size != 0:
        return f"proj_size {module.proj_size} (dnnx's LSTM has no projections)"
    return None


# Note [compiling recurrent layers]
# Dynamo breaks the graph at every module that is an nn.RNN, nn.LSTM or nn.GRU unless
# torch._dynamo.config.allow_rnn is set (off by default: it then traces into the module's forward
# instead). The drop-ins subclass those modules, so without the switch a compiled model runs its
# converted recurrent layers eagerly, through their autograd function, between two graphs. The
# switch is global: convert() sets it when the model holds a converted recurrent layer (one it
# swapped in, or one an earlier convert() did), unless told not to
# (compile_recurrent=False), and with it PyTorch's own recurrent modules of any model are traced
# too rather than left out of the graph.


def convert(model, exclude=None, compile_recurrent=True):
    """Swaps, in place, every nn.Conv1d/2d/3d, nn.Linear, nn.BatchNorm1d/2d/3d,
    nn.MaxPool1d/2d/3d, nn.AvgPool1d/2d/3d, nn.AdaptiveAvgPool1d/2d/3d, nn.AdaptiveMaxPool1d/2d/3d
    (through dnnx where the output size divides the input's), nn.ReLU, ReLU6, Tanh, Sigmoid, SiLU, ELU, nn.Dropout,
    nn.Softmax, nn.LogSoftmax, nn.CrossEntropyLoss, nn.RNN, nn.LSTM and nn.GRU of `model`
    (itself included) for its dnnx counterpart, unless exclude(module) is true or the module uses
    something dnnx does not do (why_not_converted). Parameters, buffers, hooks and state_dict stay
    the same objects. When the model then holds a dnnx recurrent layer and torch.compile exists,
    sets torch._dynamo.config.allow_rnn so that compiled graphs keep it as one node, unless
    `compile_recurrent` is false (Note [compiling recurrent layers]). Returns `model`."""
    for module in model.modules():
        if exclude is not None and exclude(module):
            continue
        if why_not_converted(module) is None:
            module.__class__ = _CONVERTED[type(module)]
            if _library.AVAILABLE:
                _library.layer_key(module)
    if compile_recurrent and _library.AVAILABLE and \
            any(isinstance(module, _RnnMixin) for module in model.modules()):
        from torch import _dynamo  # loaded by torch.compile anyway; not at import time
        _dynamo.config.allow_rnn = True
    return model


_DIRECTIONS = ("fwd", "bwd", "bwd_data", "bwd_weights", "fwd_training")


class LayerAlgo:
    """A converted layer's selection options: its directions' policies (fwd, bwd_data,
    bwd_weights for convolutions and linear layers; fwd and bwd for the others) and every
    TuneOptions field (workspace_limit, deterministic, ...)."""

    def __init__(self, module, op):
        object.__setattr__(self, "_tune", module.__dict__["_dnnx_tune"])
        object.__setattr__(self, "_policies", getattr(module.__dict__["_dnnx_tune"], op))

    def __getattr__(self, name):
        if name in _DIRECTIONS:
            return getattr(self._policies, name)
        return getattr(self._tune, name)

    def __setattr__(self, name, value):
        if name in _DIRECTIONS:  # the op's own (OpPolicies names those it lacks)
            setattr(self._policies, name, value)
        elif hasattr(self._tune, name):
            setattr(self._tune, name, value)
        else:
            raise InvalidArgument(f"no selection option '{name}' for a {self._policies.op} layer; "
                                  f"directions: {', '.join(self._policies.directions)}")

    def __repr__(self):
        return f"LayerAlgo({self._policies!r}, {self._tune!r})"


def algo(module):
    """The selection options of a converted layer (created from the current context's on first
    use): ``dnnx.torch.algo(layer).fwd = "fixed:<id>"``."""
    op = _OPS.get(type(module))
    if op is None:
        raise InvalidArgument(f"algo: {type(module).__name__} is not a dnnx layer; convert the "
                              "model first (dnnx.torch.convert)")
    if "_dnnx_tune" not in module.__dict__:
        module.__dict__["_dnnx_tune"] = current().tune.copy()
    return LayerAlgo(module, op)


def _calls(module):
    """direction -> (desc, context) of the latest call of each direction of a converted layer:
    what its C++ layer ran (Note [layers in C++]) over what its Python path ran."""
    calls = dict(module.__dict__.get("_dnnx_calls", {}))
    cpp = module.__dict__.get("_dnnx_cpp")
    if cpp is not None:
        calls.update(cpp.calls())
    return calls


def report(model):
    """One line per converted layer and direction that ran: the chosen id, its time (when a policy
    timed it), workspace, the speedup over the heuristic's choice where both were timed, and under
    min_energy / energy_delay the chosen candidate's energy per call, or why it was not measured."""
    lines = []
    for name, module in model.named_modules():
        for direction, (desc, context) in _calls(module).items():
            choice = _dnnx.select(context, desc, direction)
            time = f"{choice.time_ms:.3f} ms" if choice.time_ms is not None else "not timed"
            line = (f"{name or '(model)'} {type(module).__name__} {direction}: {choice.id} "
                    f"[{choice.policy}] {time}, workspace {choice.workspace} B")
            heuristic = next((row[0] for row in _dnnx.algos(context, desc, direction)
                              if row[1] == "supported"), None)
            timed = {row[0]: row[3] for row in choice.timings if row[3] is not None}
            if choice.time_ms and heuristic in timed and heuristic != choice.id:
                line += f", {timed[heuristic] / choice.time_ms:.2f}x over heuristic {heuristic}"
            if choice.energy_j is not None:
                line += f", {choice.energy_j * 1e3:.4f} mJ/call"
            elif choice.energy_meter:
                line += f", energy not measured: {choice.energy_meter}"
            lines.append(line)
    return "\n".join(lines)


from . import _torch_library as _library  # noqa: E402  (it builds on the functions above)
