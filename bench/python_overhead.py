"""Host overhead per call of a small op through Python: a tiny convolution through
dnnx.conv.fwd next to PyTorch's F.conv2d on the same tensors, in the same run.

    .venv/bin/python bench/python_overhead.py [--calls 2000] [--repeats 25]
        [--backend reference] [--shape 1x1x1x1] [--kernel 1]

By default a convolution of one element on the reference backend, which computes next to
nothing (as bench/dispatch_bench.cpp's, whose BM_op_layer is the C++ op layer's own share), so
the figure is what the call costs on the host: Python, the binding, the op layer.

Prints the per-call time in microseconds of each variant, the fastest of `repeats` rounds of
`calls` calls: the public call as a user writes it (desc built once, result allocated per call), the
same with out= and ctx= given, the bare C++ binding (dnnx._dnnx.conv_fwd: the floor the Python
layer adds to), and F.conv2d. The desc is built once, as a layer holds it.
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import dnnx
from dnnx import _dnnx


def per_call_us(functions, calls, repeats):
    """The fastest of `repeats` loops of `calls` calls of each function, in microseconds per
    call; the variants take turns within each round, so they meet the same machine load. The
    minimum is the cost without interference from other processes (timeit's advice)."""
    for function in functions:
        for _ in range(min(calls, 1000)):
            function()
    best = [float("inf")] * len(functions)
    for _ in range(repeats):
        for index, function in enumerate(functions):
            start = time.perf_counter()
            for _ in range(calls):
                function()
            best[index] = min(best[index], (time.perf_counter() - start) / calls * 1e6)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=25)
    parser.add_argument("--backend", default="reference")
    parser.add_argument("--shape", default="1x1x1x1", help="src N x C x H x W")
    parser.add_argument("--kernel", type=int, default=1, help="square kernel size (odd)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    n, c, h, w = (int(v) for v in args.shape.split("x"))
    x = torch.randn(n, c, h, w)
    k = args.kernel
    weight = torch.randn(c, c, k, k)
    ctx = dnnx.Context(args.backend)
    dnnx.set_default_context(ctx)
    desc = dnnx.conv.desc_for(x, weight, stride=1, padding=k // 2)
    out = dnnx.conv.fwd(desc, x, weight)
    torch.testing.assert_close(out, F.conv2d(x, weight, padding=k // 2), rtol=1e-4, atol=1e-4)

    rows = [
        ("dnnx.conv.fwd(desc, x, w)", lambda: dnnx.conv.fwd(desc, x, weight)),
        ("dnnx.conv.fwd(desc, x, w, out=, ctx=)",
         lambda: dnnx.conv.fwd(desc, x, weight, out=out, ctx=ctx)),
        ("_dnnx.conv_fwd (binding alone)", lambda: _dnnx.conv_fwd(ctx, desc, x, weight, out, None)),
        ("F.conv2d(x, w, padding=k // 2)", lambda: F.conv2d(x, weight, padding=k // 2)),
    ]
    print(f"tiny conv {args.shape}, {k}x{k}, pad {k // 2}, f32, backend {ctx.backend} "
          f"({dnnx.select(desc, 'fwd', ctx=ctx).id}), torch {torch.__version__}, 1 thread; "
          f"fastest of {args.repeats} rounds of {args.calls} calls")
    times = per_call_us([function for _, function in rows], args.calls, args.repeats)
    for (name, _), us in zip(rows, times):
        print(f"  {name:42s} {us:7.2f} us/call")


if __name__ == "__main__":
    main()
