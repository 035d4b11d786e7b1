"""Every candidate of a depthwise convolution's bwd_weights in f16 channels_last, timed by
dnnx.profile on the cudnn backend: dnnx's own depthwise kernels (cudnn:kernel:depthwise:*)
against cuDNN's fastest candidate, on the odd-size and MobileNetV2 / EfficientNet-B0 depthwise
layers of bench/shapes. Needs a CUDA GPU.

    python bench/depthwise_profile.py

One line per layer: the kernels' times (ms; a kernel without a time was abandoned, probed too
slow or not supported), cuDNN's fastest candidate and its time, and the candidate an exhaustive
search would choose (the profile's `chosen`).
"""

import torch

import dnnx

# name, batch, channels, height, width, kernel, stride, padding
LAYERS = [
    ("odd_sizes dw.prime.3x3", 32, 97, 41, 41, 3, 1, 1),
    ("odd_sizes dw.prime.5x5.s2", 32, 53, 57, 57, 5, 2, 2),
    ("mobilenetv2 b1.dw", 128, 32, 112, 112, 3, 1, 1),
    ("mobilenetv2 b3.dw", 128, 144, 56, 56, 3, 1, 1),
    ("mobilenetv2 b5.dw", 128, 192, 28, 28, 3, 1, 1),
    ("mobilenetv2 b12.dw", 128, 576, 14, 14, 3, 1, 1),
    ("efficientnet_b0 s5.dw5", 128, 480, 14, 14, 5, 1, 2),
]


def main():
    ctx = dnnx.Context(backend="cudnn")
    for name, n, c, h, w, k, stride, pad in LAYERS:
        x = torch.randn(n, c, h, w, device="cuda", dtype=torch.float16).contiguous(
            memory_format=torch.channels_last)
        weights = torch.randn(c, 1, k, k, device="cuda", dtype=torch.float16).contiguous(
            memory_format=torch.channels_last)
        desc = dnnx.conv.desc_for(x, weights, stride=stride, padding=pad, groups=c)
        profile = dnnx.profile(desc, "bwd_weights", ctx=ctx)
        timed = [row for row in profile if row.time is not None]
        ours = {row.id.rsplit(":", 1)[-1]: round(row.time, 4) for row in timed
                if row.id.startswith("cudnn:kernel:depthwise:")}
        best = next((row for row in timed if not row.id.startswith("cudnn:kernel:")), None)
        best_text = f"{best.id} {best.time:.4f}" if best is not None else "(none timed)"
        print(f"{name}: dnnx kernels {ours}; cuDNN's fastest {best_text}; "
              f"chosen {profile.chosen}", flush=True)


if __name__ == "__main__":
    main()
