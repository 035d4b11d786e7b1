"""Cross-entropy (dnnx::cross_entropy_fwd / cross_entropy_bwd)."""

from .. import _dnnx
from .._arrays import arg, dtype_name, layout_name, output, shape_of
from .._context import resolve

CrossEntropyDesc = _dnnx.CrossEntropyDesc


def desc_for(logits, labels, reduction="mean", ignore_index=-100, weights=None):
    """The CrossEntropyDesc of F.cross_entropy(logits, labels, weight=weights, ...)."""
    return CrossEntropyDesc(dims=shape_of(logits, "logits"), reduction=reduction,
                            ignore_index=ignore_index, weighted=weights is not None,
                            label_dtype=dtype_name(labels, "labels"),
                            dtype=dtype_name(logits, "logits"),
                            layout=layout_name(logits, "logits"))


def fwd(desc, logits, labels, weights=None, *, out=None, ctx=None):
    """The loss: desc.loss_dims() (shape (1,) for mean and sum)."""
    logits, labels, weights = arg(logits), arg(labels), arg(weights)
    loss = output(out, logits, desc.loss_dims(), desc.dtype)
    _dnnx.cross_entropy_fwd(resolve(ctx, logits), desc, logits, labels, weights, loss)
    return loss


def bwd(desc, logits, labels, diff_loss, weights=None, *, out=None, ctx=None):
    """diff_logits given diff_loss (the loss's dims)."""
    logits, labels, weights, diff_loss = arg(logits), arg(labels), arg(weights), arg(diff_loss)
    diff_logits = output(out, logits, desc.dims, desc.dtype, desc.layout)
    _dnnx.cross_entropy_bwd(resolve(ctx, logits), desc, logits, labels, weights, diff_loss,
                            diff_logits)
    return diff_logits
