"""safetensors files move both ways between dnnx and Python's `safetensors` package.

dnnx writes (safetensors_harness write) -> safetensors.torch.load_file reads the same values, and
re-saving them with Python's writer gives the very same bytes (the layout of Note [safetensors
layout]); Python writes every dtype -> dnnx reads the same values and bytes. Exit status 77 (a skip)
when safetensors or torch is not importable.
"""

import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file
except ImportError as error:
    print(f"skip: {error} (the project venv gets safetensors from python/requirements.txt)")
    sys.exit(77)

harness = sys.argv[1]
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message)


def counting(shape, dtype):
    n = int(np.prod(shape)) if shape else 1
    if dtype.is_floating_point:
        values = torch.arange(n, dtype=torch.float64) * 0.5 - 3.0
    else:
        values = torch.arange(n, dtype=torch.int64) - 5
    return values.reshape(shape).to(dtype)


with tempfile.TemporaryDirectory() as folder:
    # dnnx -> Python
    ours = os.path.join(folder, "dnnx.safetensors")
    subprocess.run([harness, "write", ours], check=True)
    loaded = load_file(ours)
    expected = {
        "conv.weight": counting([4, 3, 3, 3], torch.float32),
        "conv.bias": counting([4], torch.float32),
        "half": counting([2, 5], torch.float16),
        "brain": counting([3, 2, 2], torch.bfloat16),
        "labels": counting([9], torch.int32),
        "bn.num_batches_tracked": counting([], torch.int64),
        "nothing": counting([0, 4], torch.float32),
    }
    check(sorted(loaded) == sorted(expected), f"names {sorted(loaded)}")
    for name, want in expected.items():
        got = loaded.get(name)
        check(got is not None and got.dtype == want.dtype and list(got.shape) == list(want.shape)
              and torch.equal(got, want), f"dnnx -> python: {name} {got} != {want}")
    with safe_open(ours, framework="pt") as handle:
        metadata = handle.metadata()
    check(metadata == {"format": "pt", "writer": "dnnx"}, f"metadata {metadata}")
    theirs = os.path.join(folder, "python.safetensors")
    save_file(loaded, theirs, metadata=metadata)
    with open(ours, "rb") as a, open(theirs, "rb") as b:
        ours_bytes, theirs_bytes = a.read(), b.read()
    # The metadata object is a hash map in the reference writer: compare the headers as JSON and
    # the data bytes exactly, and the whole file where the metadata has one key order.
    n_ours = int.from_bytes(ours_bytes[:8], "little")
    n_theirs = int.from_bytes(theirs_bytes[:8], "little")
    check(n_ours == n_theirs, f"header lengths {n_ours} != {n_theirs}")
    check(json.loads(ours_bytes[8:8 + n_ours]) == json.loads(theirs_bytes[8:8 + n_theirs]),
          "headers differ")
    check(list(json.loads(ours_bytes[8:8 + n_ours])) [1:] ==
          list(json.loads(theirs_bytes[8:8 + n_theirs]))[1:], "tensor order differs")
    check(ours_bytes[8 + n_ours:] == theirs_bytes[8 + n_theirs:], "data bytes differ")

    # Python -> dnnx, every dtype the package writes from torch 1.13
    tensors = {
        "f32": torch.randn(3, 4, generator=torch.Generator().manual_seed(1)),
        "f16": torch.randn(5, generator=torch.Generator().manual_seed(2)).half(),
        "bf16": torch.randn(2, 3, generator=torch.Generator().manual_seed(3)).bfloat16(),
        "f64": torch.randn(4, generator=torch.Generator().manual_seed(4)).double(),
        "i64": torch.tensor([-(2**40), 0, 7]),
        "i32": torch.tensor([[1, -2], [3, 2**31 - 1]], dtype=torch.int32),
        "u8": torch.tensor([0, 128, 255], dtype=torch.uint8),
        "i8": torch.tensor([-128, 5], dtype=torch.int8),
        "i16": torch.tensor([-300, 300], dtype=torch.int16),
        "bool": torch.tensor([True, False, True]),
        "scalar": torch.tensor(2.5),
        "empty": torch.zeros(0, 3),
        "big.conv.weight": torch.randn(8, 4, 3, 3, generator=torch.Generator().manual_seed(5)),
    }
    python_file = os.path.join(folder, "from_python.safetensors")
    save_file(tensors, python_file, metadata={"source": "python"})
    dumped = json.loads(subprocess.run([harness, "dump", python_file], check=True,
                                       capture_output=True, text=True).stdout)
    check(dumped.pop("__metadata__") == {"source": "python"}, "python metadata")
    names = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
             torch.float64: "F64", torch.int64: "I64", torch.int32: "I32", torch.uint8: "U8",
             torch.int8: "I8", torch.int16: "I16", torch.bool: "BOOL"}
    check(sorted(dumped) == sorted(tensors), f"python -> dnnx names {sorted(dumped)}")
    for name, tensor in tensors.items():
        item = dumped.get(name, {})
        check(item.get("dtype") == names[tensor.dtype], f"{name}: dtype {item.get('dtype')}")
        check(item.get("shape") == list(tensor.shape), f"{name}: shape {item.get('shape')}")
        if "values" in item:
            want = tensor.flatten().tolist() if not tensor.is_floating_point() else \
                tensor.float().flatten().tolist()
            check(item["values"] == want, f"python -> dnnx {name}: {item['values']} != {want}")
        else:
            raw = tensor.contiguous().view(torch.uint8).numpy().tobytes() if tensor.dtype != \
                torch.bool else tensor.numpy().astype(np.uint8).tobytes()
            check(item.get("hex") == raw.hex(), f"python -> dnnx {name}: bytes {item.get('hex')}")

print(f"{0 if failures else 1} passed, {1 if failures else 0} failed")
sys.exit(1 if failures else 0)
