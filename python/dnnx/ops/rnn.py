"""Recurrent layers as torch.nn.RNN / LSTM / GRU compute them (dnnx::rnn_fwd / fwd_training /
bwd_data / bwd_weights): stacked layers, bidirectional, batch_first, per-sequence lengths (as
pack_padded_sequence), initial and final states, the flat weights in PyTorch's _flat_weights
order."""

from .. import _dnnx
from .._arrays import arg, dtype_name, output, shape_of
from .._context import resolve
from .._errors import InvalidArgument
from .._random import generator_or_default

RnnDesc = _dnnx.RnnDesc
SavedState = _dnnx.SavedState

_CELLS = {"RNN_TANH": "rnn_tanh", "RNN_RELU": "rnn_relu", "LSTM": "lstm", "GRU": "gru"}


def desc_for(src, hidden_size, cell="lstm", num_layers=1, bias=True, batch_first=False,
             dropout=0.0, bidirectional=False, lengths=None):
    """The RnnDesc of torch.nn.RNN / LSTM / GRU(input_size, hidden_size, num_layers, bias,
    batch_first, dropout, bidirectional) on `src` ((T, N, C), or (N, T, C) with batch_first).
    `cell` is 'lstm', 'gru', 'rnn_tanh' or 'rnn_relu' (torch's mode names 'LSTM', 'RNN_TANH', ...
    too); `lengths` (or True) makes a desc with variable_lengths. dtype from src."""
    shape = shape_of(src, "src")
    if len(shape) != 3:
        raise InvalidArgument(f"rnn: src must have 3 dims (seq, batch, features; batch first with "
                              f"batch_first), got {shape}")
    seq, batch = (shape[1], shape[0]) if batch_first else (shape[0], shape[1])
    return RnnDesc(cell=_CELLS.get(cell, cell), seq_length=seq, batch=batch,
                   input_size=shape[2], hidden_size=hidden_size, layers=num_layers, bias=bias,
                   batch_first=batch_first, dropout=dropout, bidirectional=bidirectional,
                   variable_lengths=lengths is not None and lengths is not False,
                   dtype=dtype_name(src, "src"))


def lengths_array(lengths):
    """Per-sequence lengths as the op takes them: a NumPy int32 array in host memory, from a
    list, a NumPy array or a PyTorch tensor (on any device); None stays None."""
    if lengths is None:
        return None
    import numpy
    if hasattr(lengths, "detach") and hasattr(lengths, "cpu"):
        lengths = lengths.detach().cpu().numpy()
    values = numpy.asarray(lengths)
    if values.ndim != 1 or values.dtype.kind not in "iu":
        raise InvalidArgument(f"rnn: lengths must be a 1-D array of integers, got dtype "
                              f"{values.dtype} and shape {values.shape}")
    return numpy.ascontiguousarray(values, dtype=numpy.int32)


def _version(weights_version):
    """weights_version checked: an int in [0, 2**64)."""
    if isinstance(weights_version, bool) or not isinstance(weights_version, int) or \
            not 0 <= weights_version < 2**64:
        raise InvalidArgument(f"rnn: weights_version must be an int in [0, 2**64), got "
                              f"{weights_version!r}")
    return weights_version


def _states(desc, like, out):
    hy = output(out[0] if out else None, like, desc.state_dims(), desc.dtype)
    cy = (output(out[1] if out else None, like, desc.state_dims(), desc.dtype)
          if desc.cell == "lstm" else None)
    return hy, cy


def fwd(desc, src, weights, hx=None, cx=None, lengths=None, *, out=None, ctx=None,
        weights_version=0):
    """Inference: (dst, hy, cy), cy None unless the cell is lstm; a missing hx / cx is zeros.
    out= takes (dst, hy, cy). weights_version: 0, or a number changed whenever the weights are
    written, never the same for two contents at one address; with it a backend that converts
    the weights into a layout of its own converts them once per (address, number) and reuses
    them (dnnx::RnnForward::weights_version). A stale number gives results of stale weights."""
    weights_version = _version(weights_version)
    src, weights = arg(src), arg(weights)
    dst = output(out[0] if out else None, src, desc.dst_dims(), desc.dtype)
    hy, cy = _states(desc, src, out[1:] if out else None)
    _dnnx.rnn_fwd(resolve(ctx, src), desc, src, weights, arg(hx), arg(cx), lengths_array(lengths),
                  dst, hy, cy, weights_version)
    return dst, hy, cy


def fwd_training(desc, src, weights, hx=None, cx=None, lengths=None, *, generator=None,
                 out=None, ctx=None, weights_version=0):
    """Training forward: (dst, hy, cy, state), the state (a dnnx.SavedState) for bwd_data and
    then bwd_weights. Dropout between layers (desc.dropout) draws from `generator` (default:
    dnnx.default_generator, advanced past it). weights_version as for fwd."""
    weights_version = _version(weights_version)
    src, weights = arg(src), arg(weights)
    dst = output(out[0] if out else None, src, desc.dst_dims(), desc.dtype)
    hy, cy = _states(desc, src, out[1:] if out else None)
    state = SavedState()
    _dnnx.rnn_fwd_training(resolve(ctx, src), desc, generator_or_default(generator), src,
                           weights, arg(hx), arg(cx), lengths_array(lengths), dst, hy, cy, state,
                           weights_version)
    return dst, hy, cy, state


def bwd_data(desc, src, weights, dst, diff_dst, state, hx=None, cx=None, lengths=None,
             diff_hy=None, diff_cy=None, *, out=None, ctx=None, weights_version=0):
    """(diff_src, diff_hx, diff_cx) from the forward's arrays and `state`; diff_hy / diff_cy None
    are zeros; diff_cx None unless lstm. Call it before bwd_weights on the same state.
    weights_version as for fwd."""
    weights_version = _version(weights_version)
    src, diff_dst = arg(src), arg(diff_dst)
    diff_src = output(out[0] if out else None, diff_dst, desc.src_dims(), desc.dtype)
    diff_hx, diff_cx = _states(desc, diff_dst, out[1:] if out else None)
    _dnnx.rnn_bwd_data(resolve(ctx, src), desc, src, arg(weights), arg(hx), arg(cx),
                       lengths_array(lengths), arg(dst), diff_dst, arg(diff_hy), arg(diff_cy),
                       diff_src, diff_hx, diff_cx, state, weights_version)
    return diff_src, diff_hx, diff_cx


def bwd_weights(desc, src, weights, dst, state, hx=None, cx=None, lengths=None, *, out=None,
                accumulate=False, ctx=None):
    """diff_weights (flat, like weights), after bwd_data on the same state; with accumulate=True
    the gradient is added into out=."""
    src = arg(src)
    if accumulate and out is None:
        raise InvalidArgument("rnn.bwd_weights: accumulate=True adds into out=, which is missing")
    diff_weights = output(out, src, (desc.weights_count(),), desc.dtype)
    _dnnx.rnn_bwd_weights(resolve(ctx, src), desc, src, arg(weights), arg(hx), arg(cx),
                          lengths_array(lengths), arg(dst), diff_weights, accumulate, state)
    return diff_weights
