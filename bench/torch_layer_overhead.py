"""Host cost per call of each layer kind dnnx.torch.convert swaps in, next to the unconverted
PyTorch layer, on tensors so small that the computation is next to nothing: the figure is what a
call costs on the host (Python, autograd, the binding, the op layer).

    .venv/bin/python bench/torch_layer_overhead.py [--device cpu|cuda] [--backend cpu|reference]
        [--calls 500] [--repeats 15] [--dtype f32|f16] [--channels-last] [--layers conv,bn,...]

For each layer (ResNet-50's kinds: Conv2d 1x1 and 3x3, BatchNorm2d, ReLU, MaxPool2d, Linear,
CrossEntropyLoss; AdaptiveAvgPool2d and the residual add are not converted and stay PyTorch's) it
prints microseconds per call of
  no_grad  y = layer(x) under torch.no_grad() (inference)
  fwd      y = layer(x) with x requiring grad (autograd records the call, as in training)
  fwd+bwd  y = layer(x); y.backward(g)
for the torch layer and the converted one, and their ratio. Each figure is the fastest of
`repeats` rounds of `calls` calls (bench/python_overhead.py's per_call_us); on CUDA each round ends
with a synchronisation, so a round whose GPU work outlasts the host's shows as GPU time.

--device cuda runs on CUDA tensors (dnnx's cudnn backend on PyTorch's current stream, TF32 off);
--device cpu on host tensors with the default context set to --backend. --dtype f16 is for
--device cuda (PyTorch's CPU convolution has no f16). Each converted layer's output is first
checked against the PyTorch layer's.
"""

import argparse
import copy
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from python_overhead import per_call_us  # noqa: E402

import dnnx  # noqa: E402
import dnnx.torch  # noqa: E402


def layers(channels, classes):
    """(name, module, input shape, needs a target) for each layer kind."""
    return [
        ("conv", torch.nn.Conv2d(channels, channels, 1, bias=False), (1, channels, 4, 4), False),
        ("conv3x3", torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False),
         (1, channels, 4, 4), False),
        ("bn", torch.nn.BatchNorm2d(channels), (2, channels, 4, 4), False),
        ("relu", torch.nn.ReLU(), (1, channels, 4, 4), False),
        ("maxpool", torch.nn.MaxPool2d(3, 2, 1), (1, channels, 4, 4), False),
        ("linear", torch.nn.Linear(channels, classes), (2, channels), False),
        ("xent", torch.nn.CrossEntropyLoss(), (2, classes), True),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--backend", default="cpu", help="the host context's backend (--device cpu)")
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--dtype", default="f32", choices=("f32", "f16"))
    parser.add_argument("--channels-last", action="store_true")
    parser.add_argument("--layers", default="", help="comma-separated subset of the layer names")
    args = parser.parse_args()
    torch.set_num_threads(1)
    device = torch.device(args.device)
    dtype = {"f32": torch.float32, "f16": torch.float16}[args.dtype]
    if args.device == "cpu":
        dnnx.set_default_context(dnnx.Context(args.backend))
    else:  # PyTorch's f32 convolutions and matrix products in f32, as dnnx's
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    wanted = set(filter(None, args.layers.split(",")))
    sync = torch.cuda.synchronize if args.device == "cuda" else None

    print(f"per-call host cost, device {args.device}"
          f"{'' if args.device == 'cuda' else ' backend ' + args.backend}, {args.dtype}"
          f"{', channels_last' if args.channels_last else ''}, torch {torch.__version__}, "
          f"1 thread; fastest of {args.repeats} rounds of {args.calls} calls")
    print(f"  {'layer':8s} {'direction':8s} {'torch us':>9s} {'dnnx us':>9s} {'dnnx/torch':>10s}")
    for name, module, shape, targeted in layers(8, 10):
        if wanted and name not in wanted:
            continue
        torch.manual_seed(0)
        reference = module.to(device)
        if any(p.is_floating_point() for p in reference.parameters()) and name != "bn":
            reference = reference.to(dtype)
        converted = dnnx.torch.convert(copy.deepcopy(reference))
        x = torch.randn(shape, device=device, dtype=dtype if name != "xent" else torch.float32)
        if args.channels_last and x.dim() == 4:
            x = x.contiguous(memory_format=torch.channels_last)
        x.requires_grad_(True)
        target = torch.randint(0, shape[1], (shape[0],), device=device) if targeted else None
        call_args = (x, target) if targeted else (x,)
        with torch.no_grad():
            gradient = torch.ones_like(reference(*call_args))

        def forward(layer):
            def run():
                layer(*call_args)
            return run

        def inference(layer):
            def run():
                with torch.no_grad():
                    layer(*call_args)
            return run

        def training(layer):
            def run():
                layer(*call_args).backward(gradient)
            return run

        # The converted layer checks itself against the torch one once (a wrong result would make
        # the timing meaningless).
        expected, got = reference(*call_args), converted(*call_args)
        tolerance = 1e-2 if dtype == torch.float16 else 1e-4
        torch.testing.assert_close(got, expected, rtol=tolerance, atol=tolerance)

        for direction, make in (("no_grad", inference), ("fwd", forward), ("fwd+bwd", training)):
            times = per_call_us_synced([make(reference), make(converted)], args.calls,
                                       args.repeats, sync)
            print(f"  {name:8s} {direction:8s} {times[0]:9.2f} {times[1]:9.2f} "
                  f"{times[1] / times[0]:10.2f}")
        x.grad = None


def per_call_us_synced(functions, calls, repeats, sync):
    """per_call_us with a synchronisation after every `calls` calls (CUDA): at the end of each
    round, as per_call_us warms up with `calls` calls when `calls` <= 1000."""
    if sync is None:
        return per_call_us(functions, calls, repeats)
    wrapped = []
    for function in functions:
        state = {"count": 0}

        def run(function=function, state=state):
            function()
            state["count"] += 1
            if state["count"] % calls == 0:
                sync()
        wrapped.append(run)
    return per_call_us(wrapped, calls, repeats)


if __name__ == "__main__":
    main()
