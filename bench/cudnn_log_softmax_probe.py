#!/usr/bin/env python3
"""How accurately cuDNN's legacy log-softmax handles large logits (Note [cuDNN log-softmax] in
src/backends/cudnn/softmax.cpp), next to PyTorch's log_softmax and cuDNN's ACCURATE softmax.

    python3 bench/cudnn_log_softmax_probe.py [--libdir DIR]

Calls cudnnSoftmaxForward through ctypes on PyTorch's CUDA tensors, for logits clustered within 4
of a center (1e4, 1e5, -1e5) in the shapes dnnx hands to cuDNN (N x C in mode CHANNEL, channel
mode with spatial positions, instance mode), and prints the largest error against float64 in f32
ulps: log-softmax relative to max(1, |y|), softmax relative to |y|. A log-softmax that subtracts
max + log(sum) as one rounded value shows thousands of ulps (half an ulp of 1e4 is 4.9e-4, 4096
f32 ulps of 1). cuDNN comes from --libdir, else from the nvidia-cudnn wheel PyTorch uses.
"""

import argparse
import ctypes
import glob
import os
import sys

import torch

FLOAT, HALF, BFLOAT16 = 0, 2, 9
FAST, ACCURATE, LOG = 0, 1, 2
INSTANCE, CHANNEL = 0, 1
ULP = 2.0 ** -23


def load_cudnn(libdir):
    if libdir is None:
        import nvidia.cudnn  # the wheel PyTorch's CUDA build depends on
        libdir = os.path.join(list(nvidia.cudnn.__path__)[0], "lib")
    # cuDNN 9 loads its sub-libraries by name: load them globally first.
    for path in sorted(glob.glob(os.path.join(libdir, "libcudnn*.so*"))):
        try:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            pass
    main = glob.glob(os.path.join(libdir, "libcudnn.so*"))
    if not main:
        sys.exit(f"no libcudnn.so in {libdir}")
    return ctypes.CDLL(main[0])


class Cudnn:
    def __init__(self, lib):
        self.lib = lib
        self.handle = ctypes.c_void_p()
        self.check(lib.cudnnCreate(ctypes.byref(self.handle)), "cudnnCreate")

    @staticmethod
    def check(status, what):
        if status != 0:
            raise RuntimeError(f"{what} returned cuDNN status {status}")

    def softmax(self, x, algo, mode, shape4):
        """cudnnSoftmaxForward on contiguous x seen as the packed NCHW tensor shape4."""
        dtype = {torch.float32: FLOAT, torch.float16: HALF, torch.bfloat16: BFLOAT16}[x.dtype]
        descriptor = ctypes.c_void_p()
        self.check(self.lib.cudnnCreateTensorDescriptor(ctypes.byref(descriptor)), "descriptor")
        self.check(self.lib.cudnnSetTensor4dDescriptor(descriptor, 0, dtype, *shape4), "4d")
        y = torch.empty_like(x)
        alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
        torch.cuda.synchronize()  # cuDNN runs on the legacy default stream
        self.check(self.lib.cudnnSoftmaxForward(
            self.handle, algo, mode, ctypes.byref(alpha), descriptor,
            ctypes.c_void_p(x.data_ptr()), ctypes.byref(beta), descriptor,
            ctypes.c_void_p(y.data_ptr())), "cudnnSoftmaxForward")
        torch.cuda.synchronize()
        self.lib.cudnnDestroyTensorDescriptor(descriptor)
        return y


def grouped(fn, instance):
    return (lambda v: fn(v.flatten(1), 1).view_as(v)) if instance else (lambda v: fn(v, 1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--libdir", help="folder holding libcudnn.so.9 and its sub-libraries")
    args = parser.parse_args()
    cudnn = Cudnn(load_cudnn(args.libdir))
    print(f"cuDNN {cudnn.lib.cudnnGetVersion()}, torch {torch.__version__}, "
          f"{torch.cuda.get_device_name()}")
    print(f"{'logits':>14} {'shape':>16} {'mode':>8} | errors in f32 ulps: "
          f"{'cuDNN LOG':>10} {'torch log':>10} {'cuDNN ACCURATE':>15}")
    generator = torch.Generator(device="cuda").manual_seed(0)
    shapes = (((4, 100, 1, 1), CHANNEL), ((64, 1000, 1, 1), CHANNEL), ((2, 21, 8, 8), CHANNEL),
              ((2, 21, 8, 8), INSTANCE))
    for center in (1e4, 1e5, -1e5):
        for shape, mode in shapes:
            noise = torch.rand(shape, device="cuda", generator=generator) * 8 - 4
            x = (center + noise).contiguous()
            instance = mode == INSTANCE
            exact_log = grouped(torch.log_softmax, instance)(x.double())
            exact = grouped(torch.softmax, instance)(x.double())
            log_scale = exact_log.abs().clamp(min=1)

            def worst(y, want, scale):
                return ((y.double() - want).abs() / scale).max().item() / ULP

            log_cudnn = worst(cudnn.softmax(x, LOG, mode, shape), exact_log, log_scale)
            log_torch = worst(grouped(torch.log_softmax, instance)(x), exact_log, log_scale)
            accurate = worst(cudnn.softmax(x, ACCURATE, mode, shape), exact,
                             exact.abs().clamp(min=1e-30))
            print(f"{center:>14g} {'x'.join(map(str, shape)):>16} "
                  f"{'instance' if instance else 'channel':>8} | {'':19}"
                  f"{log_cudnn:>10.1f} {log_torch:>10.1f} {accurate:>15.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
