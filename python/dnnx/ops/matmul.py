"""Matrix multiply and linear layers (dnnx::matmul_fwd / fwd_training / bwd_data / bwd_weights),
with an optional activation ('relu', 'gelu_tanh') applied to the result."""

from .. import _dnnx
from .._arrays import arg, dtype_name, output, shape_of
from .._errors import InvalidArgument
from .._context import resolve

MatmulDesc = _dnnx.MatmulDesc


def desc_for(a, b, transpose_a=False, transpose_b=False, bias=False, alpha=1.0, beta=0.0,
             activation="none"):
    """The MatmulDesc of op(a) @ op(b) for a (m, k) or (batch, m, k) and b (k, n) or
    (batch, k, n); a 2-D operand beside a batched one is shared by every product, as torch.matmul
    broadcasts it (transposes swap the last two dims)."""
    a_shape, b_shape = shape_of(a, "a"), shape_of(b, "b")
    if len(a_shape) not in (2, 3) or len(b_shape) not in (2, 3):
        raise InvalidArgument(f"matmul: a and b must have 2 or 3 dims, got a {a_shape} and "
                              f"b {b_shape}")
    if len(a_shape) == 3 and len(b_shape) == 3 and a_shape[0] != b_shape[0]:
        raise InvalidArgument(f"matmul: a {a_shape} and b {b_shape} have different batches")
    batch = a_shape[0] if len(a_shape) == 3 else b_shape[0] if len(b_shape) == 3 else 1
    m, k = a_shape[-2:][::-1] if transpose_a else a_shape[-2:]
    k_b, n = b_shape[-2:][::-1] if transpose_b else b_shape[-2:]
    return MatmulDesc(batch=batch, m=m, n=n, k=k, transpose_a=transpose_a,
                      transpose_b=transpose_b, broadcast_b=len(b_shape) == 2 and batch > 1,
                      broadcast_a=len(a_shape) == 2 and batch > 1, bias=bias, alpha=alpha,
                      beta=beta, dtype=dtype_name(a, "a"), activation=activation)


def linear_desc(src, weight, bias=None, activation="none"):
    """The MatmulDesc of F.linear(src, weight, bias) (followed by `activation`): src (rows, in),
    weight (out, in); `bias` is the bias tensor, None, or whether there is one."""
    rows, in_features = shape_of(src, "src")[-2:] if len(shape_of(src, "src")) >= 2 else (1, 0)
    has_bias = bias if isinstance(bias, bool) else bias is not None
    desc = MatmulDesc.linear(rows, in_features, shape_of(weight, "weight")[0], has_bias,
                             dtype_name(src, "src"))
    desc.activation = activation
    return desc


def fwd(desc, a, b, bias=None, *, out=None, ctx=None):
    """dst = alpha * op(a) op(b) + beta * out (+ bias); beta != 0 reads out."""
    a, b, bias = arg(a), arg(b), arg(bias)
    dst = output(out, a, desc.dst_dims(), desc.dtype)
    _dnnx.matmul_fwd(resolve(ctx, a), desc, a, b, bias, dst)
    return dst


def fwd_training(desc, a, b, bias=None, *, out=None, ctx=None):
    """The training forward of a desc with an activation: (dst, state), the state (a
    dnnx.SavedState) holding what the activation's derivative needs for bwd_data and
    bwd_weights."""
    a, b, bias = arg(a), arg(b), arg(bias)
    dst = output(out, a, desc.dst_dims(), desc.dtype)
    state = _dnnx.SavedState()
    _dnnx.matmul_fwd_training(resolve(ctx, a), desc, a, b, bias, dst, state)
    return dst, state


def bwd_data(desc, diff_dst, b, *, state=None, out=None, ctx=None):
    """diff_a = alpha * diff_dst op(b)^T (+ beta * out), stored as a is; with the `state` of
    fwd_training, diff_dst * act'(pre) in place of diff_dst."""
    diff_dst, b = arg(diff_dst), arg(b)
    diff_a = output(out, diff_dst, desc.a_dims(), desc.dtype)
    _dnnx.matmul_bwd_data(resolve(ctx, diff_dst), desc, diff_dst, b, diff_a, state)
    return diff_a


def bwd_weights(desc, a, diff_dst, *, state=None, out=None, ctx=None):
    """diff_b, or (diff_b, diff_bias) when desc.bias; out= takes the same; with the `state` of
    fwd_training, through the activation's derivative."""
    a, diff_dst = arg(a), arg(diff_dst)
    out_b, out_bias = out if desc.bias and out is not None else (out, None)
    diff_b = output(out_b, a, desc.b_dims(), desc.dtype)
    diff_bias = output(out_bias, a, desc.bias_dims(), desc.dtype) if desc.bias else None
    _dnnx.matmul_bwd_weights(resolve(ctx, a), desc, a, diff_dst, diff_b, diff_bias, state)
    return (diff_b, diff_bias) if desc.bias else diff_b
