"""dnnx::nn against torch.nn: a model's printed tree, state_dict keys, first-step logits and
parameter gradients, then the loss of every step of an SGD run (and the final state), for the
Fashion-MNIST CNN and a small residual network built from the same initial weights; and every
kind of layer alone (forward, input and parameter gradients, running statistics), recurrent layers
with initial states, packed sequences and a safetensors checkpoint loaded into torch.

The harness (nn_harness) builds the dnnx model, writes its tree and initial state_dict, and trains
it on the batches this script writes; the script loads the same state into the torch model and
trains it the same way in float32. Exit codes: 0 agree, 1 mismatch, 77 torch or numpy missing.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from oracle_common import compare, main, np, run_harness, torch  # noqa: E402

nn = torch.nn
F = torch.nn.functional


class BasicBlock(nn.Module):
    """torchvision.models.resnet.BasicBlock (torchvision is not needed)."""

    def __init__(self, inplanes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes))
        else:
            self.downsample = None

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = self.downsample(x) if self.downsample is not None else x
        return self.relu(out + identity)


class Residual(nn.Module):
    """dnnx::nn::Residual with branches "0" (a module) and "1" (the identity), then `post`."""

    def __init__(self, branch, post):
        super().__init__()
        self.add_module("0", branch)
        self.post = post

    def forward(self, x):
        return self.post(getattr(self, "0")(x) + x)


def fashion_cnn(channels, classes):
    return nn.Sequential(
        nn.Conv2d(channels, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(inplace=True), nn.Linear(128, classes))


def small_resnet(channels, classes):
    return nn.Sequential(
        nn.Conv2d(channels, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
        BasicBlock(8, 8), BasicBlock(8, 16, 2),
        Residual(nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16)), nn.ReLU()),
        nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.Linear(16, classes))


# Elementwise bounds: relative to the element, plus a floor relative to the tensor's largest
# element for the values that sums cancel down to near zero (f32 rounding of the terms remains).
RTOL = 1e-5
FLOOR = 1e-6

CASES = [
    {"name": "fashion_reference", "model": "fashion", "backend": "reference", "seed": 7,
     "input": [8, 1, 28, 28], "classes": 10, "steps": 20, "lr": 0.01, "momentum": 0.9},
    {"name": "resnet_reference", "model": "resnet", "backend": "reference", "seed": 8,
     "input": [4, 3, 16, 16], "classes": 5, "steps": 20, "lr": 0.01, "momentum": 0.9},
    {"name": "fashion_cpu", "model": "fashion", "backend": "cpu", "seed": 9,
     "input": [8, 1, 28, 28], "classes": 10, "steps": 20, "lr": 0.01, "momentum": 0.9},
    {"name": "resnet_cpu", "model": "resnet", "backend": "cpu", "seed": 10,
     "input": [4, 3, 16, 16], "classes": 5, "steps": 20, "lr": 0.01, "momentum": 0.9},
    # Fine-tuning in eval mode (frozen batch norm: the running statistics of the first steps,
    # backward through them): the logits and every gradient of the first eval step, the losses.
    {"name": "resnet_eval_finetune_reference", "model": "resnet", "backend": "reference",
     "seed": 11, "input": [4, 3, 16, 16], "classes": 5, "steps": 8, "lr": 0.01, "momentum": 0.9,
     "eval_from": 4},
    {"name": "fashion_eval_finetune_cpu", "model": "fashion", "backend": "cpu", "seed": 12,
     "input": [8, 1, 28, 28], "classes": 10, "steps": 8, "lr": 0.01, "momentum": 0.9,
     "eval_from": 4},
]


# Single layers against their torch.nn module: repr, state_dict keys, output, input gradient,
# parameter gradients and the state after the forward (running statistics), in training mode.
LAYERS = [
    ("conv1d_dilated_groups", [2, 4, 11], {"type": "Conv", "dims": 1, "in": 4, "out": 6,
                                           "kernel": [3], "stride": [2], "padding": [2],
                                           "dilation": [2], "groups": 2}),
    ("conv2d_no_bias", [2, 3, 7, 6], {"type": "Conv", "dims": 2, "in": 3, "out": 5,
                                      "kernel": [3, 2], "stride": [1, 2], "padding": [1, 0],
                                      "bias": False}),
    ("conv3d", [1, 2, 5, 4, 4], {"type": "Conv", "dims": 3, "in": 2, "out": 3, "kernel": [2],
                                 "padding": [1]}),
    ("linear", [3, 2, 7], {"type": "Linear", "in": 7, "out": 4}),
    ("batchnorm1d_nc", [6, 5], {"type": "BatchNorm", "dims": 0, "features": 5,
                                "momentum": 0.3}),
    ("batchnorm1d_ncl", [4, 3, 6], {"type": "BatchNorm", "dims": 0, "features": 3,
                                    "eps": 1e-3}),
    ("batchnorm3d_no_affine", [2, 3, 3, 2, 4], {"type": "BatchNorm", "dims": 3, "features": 3,
                                                "affine": False}),
    ("batchnorm2d_no_tracking", [3, 4, 3, 3], {"type": "BatchNorm", "dims": 2, "features": 4,
                                               "track": False}),
    # momentum=None: the cumulative average over four training forwards.
    ("batchnorm2d_momentum_none", [3, 4, 3, 3], {"type": "BatchNorm", "dims": 2, "features": 4,
                                                 "momentum": None, "passes": 4}),
    # Backward in eval mode with the running statistics of three training forwards.
    ("batchnorm2d_eval_backward", [3, 4, 3, 3], {"type": "BatchNorm", "dims": 2, "features": 4,
                                                 "passes": 3, "eval": True}),
    ("batchnorm1d_momentum_none_eval", [6, 5], {"type": "BatchNorm", "dims": 0, "features": 5,
                                                "momentum": None, "passes": 3, "eval": True}),
    ("relu6_inplace", [2, 3, 4, 4], {"type": "Activation", "kind": "clipped_relu",
                                     "inplace": True}),
    ("hardtanh", [2, 3, 4], {"type": "Activation", "kind": "clipped_relu", "ceiling": 0.5}),
    ("tanh", [2, 5], {"type": "Activation", "kind": "tanh"}),
    ("sigmoid_inplace", [2, 5], {"type": "Activation", "kind": "sigmoid", "inplace": True}),
    ("elu", [2, 3, 4], {"type": "Activation", "kind": "elu", "alpha": 0.7}),
    ("silu", [2, 3, 4], {"type": "Activation", "kind": "swish"}),
    ("maxpool1d_ceil", [2, 3, 10], {"type": "MaxPool", "dims": 1, "kernel": [3], "stride": [2],
                                    "ceil_mode": True}),
    ("maxpool2d_dilated", [2, 2, 9, 9], {"type": "MaxPool", "dims": 2, "kernel": [3],
                                         "stride": [2], "padding": [1], "dilation": [2]}),
    ("maxpool3d", [1, 2, 4, 6, 6], {"type": "MaxPool", "dims": 3, "kernel": [2]}),
    ("avgpool2d_exclude_pad", [2, 3, 7, 7], {"type": "AvgPool", "dims": 2, "kernel": [3],
                                             "stride": [2], "padding": [1],
                                             "count_include_pad": False}),
    ("avgpool1d_ceil", [2, 2, 9], {"type": "AvgPool", "dims": 1, "kernel": [4], "stride": [3],
                                   "padding": [1], "ceil_mode": True}),
    ("avgpool3d", [1, 2, 4, 4, 4], {"type": "AvgPool", "dims": 3, "kernel": [2]}),
    ("global_avgpool2d", [2, 3, 5, 4], {"type": "GlobalAvgPool", "dims": 2}),
    ("softmax_spatial", [2, 4, 3, 3], {"type": "Softmax"}),
    ("logsoftmax_volumetric", [2, 3, 2, 2, 2], {"type": "Softmax", "log": True}),
    ("flatten_middle", [2, 3, 4, 5], {"type": "Flatten", "start": 1, "end": 2}),
    ("xent_spatial_weighted_ignore", [2, 4, 3, 3], {"type": "CrossEntropyLoss", "weighted": True,
                                                    "ignore_index": 2}),
    ("xent_sum", [5, 7], {"type": "CrossEntropyLoss", "reduction": "sum"}),
    # Recurrent layers (run_recurrent): input {T, N, C} ({N, T, C} batch_first).
    ("lstm_2_layers_bidirectional_states_lengths", [5, 3, 4],
     {"type": "LSTM", "in": 4, "hidden": 6, "layers": 2, "bidirectional": True, "states": True,
      "lengths": True}),
    ("gru_batch_first_no_bias", [3, 4, 5], {"type": "GRU", "in": 5, "hidden": 4,
                                            "batch_first": True, "bias": False, "states": True}),
    ("rnn_relu_2_layers_lengths", [4, 3, 3], {"type": "RNN", "in": 3, "hidden": 5, "layers": 2,
                                              "nonlinearity": "relu", "lengths": True}),
    # Dropout 1 between the layers is deterministic (zeros): the layers run one at a time with
    # the dropout op between them (Note [rnn module dropout]) and must still agree.
    ("rnn_tanh_dropout_all_bidirectional", [4, 2, 3],
     {"type": "RNN", "in": 3, "hidden": 4, "layers": 2, "bidirectional": True, "dropout": 1.0,
      "states": True}),
]


def torch_layer(spec):
    """The torch.nn module of a layer spec (nn_harness.cpp's make_layer)."""
    kind = spec["type"]
    dims = spec.get("dims", 2)
    if kind == "Conv":
        conv = [nn.Conv1d, nn.Conv2d, nn.Conv3d][dims - 1]

        def size(key, default):
            values = spec.get(key, [default])
            return tuple(values * dims if len(values) == 1 else values)

        return conv(spec["in"], spec["out"], size("kernel", 1), stride=size("stride", 1),
                    padding=size("padding", 0), dilation=size("dilation", 1),
                    groups=spec.get("groups", 1), bias=spec.get("bias", True))
    if kind == "Linear":
        return nn.Linear(spec["in"], spec["out"], bias=spec.get("bias", True))
    if kind == "BatchNorm":
        norm = {0: nn.BatchNorm1d, 2: nn.BatchNorm2d, 3: nn.BatchNorm3d}[dims]
        return norm(spec["features"], eps=spec.get("eps", 1e-5),
                    momentum=spec.get("momentum", 0.1), affine=spec.get("affine", True),
                    track_running_stats=spec.get("track", True))
    if kind == "Activation":
        inplace = spec.get("inplace", False)
        name = spec["kind"]
        if name == "relu":
            return nn.ReLU(inplace)
        if name == "clipped_relu":
            ceiling = spec.get("ceiling", 6.0)
            return nn.ReLU6(inplace) if ceiling == 6.0 else nn.Hardtanh(0.0, ceiling, inplace)
        if name == "tanh":
            return nn.Tanh()
        if name == "sigmoid":
            return nn.Sigmoid()
        if name == "elu":
            return nn.ELU(spec.get("alpha", 1.0), inplace)
        if name == "swish":
            return nn.SiLU(inplace)
    if kind == "MaxPool":
        pool = [nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d][dims - 1]
        single = lambda key, default: spec.get(key, [default])[0]  # noqa: E731
        return pool(single("kernel", 1), stride=spec.get("stride", [None])[0],
                    padding=single("padding", 0), dilation=single("dilation", 1),
                    ceil_mode=spec.get("ceil_mode", False))
    if kind == "AvgPool":
        pool = [nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d][dims - 1]
        single = lambda key, default: spec.get(key, [default])[0]  # noqa: E731
        return pool(single("kernel", 1), stride=spec.get("stride", [None])[0],
                    padding=single("padding", 0), ceil_mode=spec.get("ceil_mode", False),
                    count_include_pad=spec.get("count_include_pad", True))
    if kind == "GlobalAvgPool":
        return [nn.AdaptiveAvgPool1d(1), nn.AdaptiveAvgPool2d((1, 1)),
                nn.AdaptiveAvgPool3d((1, 1, 1))][dims - 1]
    if kind == "Softmax":
        return nn.LogSoftmax(dim=1) if spec.get("log", False) else nn.Softmax(dim=1)
    if kind == "Flatten":
        return nn.Flatten(spec.get("start", 1), spec.get("end", -1))
    if kind in ("RNN", "LSTM", "GRU"):
        extra = {"nonlinearity": spec.get("nonlinearity", "tanh")} if kind == "RNN" else {}
        return getattr(nn, kind)(spec["in"], spec["hidden"], num_layers=spec.get("layers", 1),
                                 bias=spec.get("bias", True),
                                 batch_first=spec.get("batch_first", False),
                                 dropout=spec.get("dropout", 0.0),
                                 bidirectional=spec.get("bidirectional", False), **extra)
    raise ValueError(f"unknown layer type {kind}")


def run_layer(harness, case, name, directory, rng):
    shape = case["input"]
    spec = case["layer"]
    x = rng.standard_normal(shape).astype(np.float32)
    arrays = {"x": x}
    if spec["type"] == "CrossEntropyLoss":
        labels = rng.integers(0, shape[1], size=[shape[0]] + shape[2:]).astype(np.float32)
        arrays["y"] = labels
        weight = None
        if spec.get("weighted", False):
            weight = rng.uniform(0.5, 2.0, size=[shape[1]]).astype(np.float32)
            arrays["w"] = weight
        failure = run_harness(harness, directory, case, arrays)
        if failure:
            return False, [failure]
        module = nn.CrossEntropyLoss(
            weight=None if weight is None else torch.from_numpy(weight),
            reduction=spec.get("reduction", "mean"), ignore_index=spec.get("ignore_index", -100))
        xt = torch.from_numpy(x).requires_grad_()
        loss = module(xt, torch.from_numpy(labels).long())
        loss.backward(torch.ones_like(loss))
        messages = []
        ok = True
        with open(os.path.join(directory, "repr.txt")) as text:
            if text.read() != repr(module):
                ok = False
                messages.append(f"repr differs from {module!r}")
        for role, want in (("out", loss.detach().numpy().reshape(-1)), ("dx", xt.grad.numpy())):
            got = np.load(os.path.join(directory, role + ".npy")).reshape(want.shape)
            good, message = compare(role, got, want, bound_of(want))
            ok &= good
            messages.append(message)
        return ok, messages

    module = torch_layer(spec)
    module.train()
    # The output's shape, for dy: run torch once on a copy (in-place layers write over x).
    with torch.no_grad():
        out_shape = list(module(torch.from_numpy(x.copy())).shape)
    module = torch_layer(spec)
    module.train()
    arrays["dy"] = rng.standard_normal(out_shape).astype(np.float32)
    passes = spec.get("passes", 1)
    for k in range(1, passes):
        # Batches of other means and spreads, so that the running statistics differ from any one.
        arrays[f"x{k}"] = (rng.standard_normal(shape) * (1 + k) + k).astype(np.float32)
    failure = run_harness(harness, directory, case, arrays)
    if failure:
        return False, [failure]
    ok = True
    messages = []
    with open(os.path.join(directory, "repr.txt")) as text:
        got = text.read()
    want = repr(module)
    if spec.get("inplace", False) and spec.get("kind") in ("tanh", "sigmoid"):
        want = want[:-1] + "inplace=True)"  # dnnx's extension: torch's have no inplace
    if got != want:
        ok = False
        messages.append(f"repr {got!r} differs from {want!r}")
    with open(os.path.join(directory, "keys.txt")) as text:
        keys = text.read().split()
    if keys != list(module.state_dict().keys()):
        return False, messages + [f"state_dict keys {keys} differ from torch's "
                                  f"{list(module.state_dict().keys())}"]
    if keys:
        module.load_state_dict(load_state(directory, "init.", module))
    with torch.no_grad():
        for k in range(1, passes):
            module(torch.from_numpy(arrays[f"x{k}"]))
    if spec.get("eval", False):
        module.eval()
    xt = torch.from_numpy(x.copy()).requires_grad_()
    # An in-place first layer cannot write over a leaf that requires grad: feed it a copy.
    out = module(xt * 1.0 if spec.get("inplace", False) else xt)
    out.backward(torch.from_numpy(arrays["dy"]))
    checks = [("out", out.detach().numpy()), ("dx", xt.grad.numpy())]
    checks += [("grad." + key, p.grad.numpy()) for key, p in module.named_parameters()]
    for role, want in checks:
        got = np.load(os.path.join(directory, role + ".npy")).reshape(want.shape)
        good, message = compare(role, got, want, bound_of(want))
        ok &= good
        if not good or role in ("out", "dx"):
            messages.append(message)
    final = load_state(directory, "final.", module) if keys else {}
    for key, value in module.state_dict().items():
        if key.endswith("num_batches_tracked"):
            good = int(final[key]) == int(value)
            message = f"{key}: dnnx {int(final[key])}, torch {int(value)}"
        else:
            want = value.numpy()
            good, message = compare("final." + key, final[key].numpy(), want, bound_of(want))
        if not good:
            ok = False
            messages.append(message)
    return ok, messages


def check_tree(directory, module):
    """(ok, messages) for the printed tree (repr.txt) and the state_dict keys (keys.txt) the
    harness wrote against `module`'s; ok is None when the keys differ (nothing else can be
    compared then)."""
    with open(os.path.join(directory, "repr.txt")) as text:
        got = text.read()
    ok, messages = True, []
    if got != repr(module):
        ok = False
        messages.append(f"repr differs:\n--- dnnx\n{got}\n--- torch\n{module!r}")
    with open(os.path.join(directory, "keys.txt")) as text:
        keys = text.read().split()
    if keys != list(module.state_dict().keys()):
        return None, messages + [f"state_dict keys differ: dnnx {keys}, torch "
                                 f"{list(module.state_dict().keys())}"]
    return ok, messages


def read_safetensors(path):
    """{name: torch tensor} of a safetensors file: with the `safetensors` package when it is
    importable, else from the format itself (an 8-byte little-endian header size, the JSON header,
    the data)."""
    try:
        from safetensors.torch import load_file
    except ImportError:
        import json
        with open(path, "rb") as f:
            blob = f.read()
        size = int.from_bytes(blob[:8], "little")
        header = json.loads(blob[8:8 + size])
        dtypes = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64}
        tensors = {}
        for name, entry in header.items():
            if name == "__metadata__":
                continue
            begin, end = entry["data_offsets"]
            array = np.frombuffer(blob[8 + size + begin:8 + size + end],
                                  dtype=dtypes[entry["dtype"]])
            tensors[name] = torch.from_numpy(array.copy()).reshape(entry["shape"])
        return tensors
    return load_file(path)


def run_recurrent(harness, case, name, directory, rng):
    """A recurrent layer against its torch.nn module in float64 (dnnx's reference accumulates in
    f64 and rounds once): repr, state_dict keys, output and final states, the gradients of the
    input, the initial states and the parameters; then the safetensors file of dnnx's state_dict
    loaded into a fresh torch module (strict) computes the same output."""
    spec = case["layer"]
    shape = case["input"]
    batch_first = spec.get("batch_first", False)
    seq, batch = (shape[1], shape[0]) if batch_first else (shape[0], shape[1])
    rows = spec.get("layers", 1) * (2 if spec.get("bidirectional", False) else 1)
    lstm = spec["type"] == "LSTM"
    state_shape = [rows, batch, spec["hidden"]]
    out_shape = list(shape[:2]) + [spec["hidden"] * (2 if spec.get("bidirectional") else 1)]
    arrays = {"x": rng.standard_normal(shape).astype(np.float32),
              "dy": rng.standard_normal(out_shape).astype(np.float32),
              "dhn": rng.standard_normal(state_shape).astype(np.float32)}
    if lstm:
        arrays["dcn"] = rng.standard_normal(state_shape).astype(np.float32)
    if spec.get("states", False):
        arrays["h0"] = rng.standard_normal(state_shape).astype(np.float32)
        if lstm:
            arrays["c0"] = rng.standard_normal(state_shape).astype(np.float32)
    lengths = None
    if spec.get("lengths", False):
        lengths = rng.integers(1, seq + 1, size=batch)
        lengths[rng.integers(0, batch)] = seq
        arrays["lengths"] = lengths.astype(np.float32)
    failure = run_harness(harness, directory, case, arrays)
    if failure:
        return False, [failure]
    unsupported = os.path.join(directory, "unsupported.txt")
    if os.path.exists(unsupported):
        with open(unsupported) as text:
            return True, [f"not run: the backend has no rnn op ({text.read().strip()})"]
    module = torch_layer(spec)
    ok, messages = check_tree(directory, module)
    if ok is None:
        return False, messages
    module.load_state_dict(load_state(directory, "init.", module))
    module = module.double().train()
    x = torch.from_numpy(arrays["x"]).double().requires_grad_()
    leaves = [x]
    hx = None
    if "h0" in arrays:
        h0 = torch.from_numpy(arrays["h0"]).double().requires_grad_()
        leaves.append(h0)
        hx = h0
        if lstm:
            c0 = torch.from_numpy(arrays["c0"]).double().requires_grad_()
            leaves.append(c0)
            hx = (h0, c0)

    def run(module, x, hx):
        if lengths is None:
            out, state = module(x, hx)
        else:
            packed = nn.utils.rnn.pack_padded_sequence(x, torch.from_numpy(lengths),
                                                       batch_first=batch_first,
                                                       enforce_sorted=False)
            out, state = module(packed, hx)
            out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=batch_first,
                                                      total_length=seq)
        return [out] + (list(state) if lstm else [state])

    outputs = run(module, x, hx)
    seeds = [torch.from_numpy(arrays[k]).double() for k in ("dy", "dhn", "dcn") if k in arrays]
    params = list(module.named_parameters())
    grads = torch.autograd.grad(outputs, leaves + [p for _, p in params], seeds)
    names = ["dx"] + (["dh0"] if "h0" in arrays else []) + (["dc0"] if "c0" in arrays else [])
    checks = [("out", outputs[0]), ("hn", outputs[1])] + ([("cn", outputs[2])] if lstm else [])
    checks += list(zip(names, grads[:len(leaves)]))
    checks += [("grad." + key, g) for (key, _), g in zip(params, grads[len(leaves):])]
    for role, want in checks:
        want = want.detach().numpy()
        got = np.load(os.path.join(directory, role + ".npy")).reshape(want.shape)
        good, message = compare(role, got, want, bound_of(want, 1e-5, 1e-5))
        ok &= good
        if not good or role in ("out", "dx"):
            messages.append(message)
    # The checkpoint: dnnx's state_dict as safetensors, into a fresh torch module.
    fresh = torch_layer(spec)
    fresh.load_state_dict(read_safetensors(os.path.join(directory, "state.safetensors")))
    fresh = fresh.double().train()
    with torch.no_grad():
        again = run(fresh, x.detach(), None if hx is None else
                    (tuple(h.detach() for h in hx) if lstm else hx.detach()))
    if not torch.equal(again[0], outputs[0].detach()):
        ok = False
        messages.append("the safetensors checkpoint loaded into torch computes another output")
    else:
        messages.append("safetensors checkpoint loads into torch")
    return ok, messages


def bound_of(want, rtol=RTOL, floor=FLOOR):
    scale = float(np.abs(want).max()) if want.size else 0.0
    return rtol * np.abs(want) + floor * scale


def load_state(directory, prefix, reference):
    state = {}
    for key, value in reference.state_dict().items():
        array = np.load(os.path.join(directory, prefix + key + ".npy"))
        if key.endswith("num_batches_tracked"):
            state[key] = torch.tensor(int(array.reshape(-1)[0]), dtype=torch.int64)
        else:
            state[key] = torch.from_numpy(array.astype(np.float32)).reshape(value.shape)
    return state


def run_one(harness, case, name, directory, rng):
    shape = case["input"]
    arrays = {}
    for step in range(case["steps"]):
        arrays[f"x{step}"] = rng.standard_normal(shape).astype(np.float32)
        arrays[f"y{step}"] = rng.integers(0, case["classes"], size=shape[0]).astype(np.float32)
    failure = run_harness(harness, directory, case, arrays)
    if failure:
        return False, [failure]
    torch.manual_seed(0)
    build = fashion_cnn if case["model"] == "fashion" else small_resnet
    model = build(shape[1], case["classes"])
    ok, messages = check_tree(directory, model)
    if ok is None:
        return False, messages
    model.load_state_dict(load_state(directory, "init.", model))
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=case["lr"], momentum=case["momentum"])
    losses = []
    eval_from = case.get("eval_from", case["steps"])
    for step in range(case["steps"]):
        x = torch.from_numpy(arrays[f"x{step}"])
        y = torch.from_numpy(arrays[f"y{step}"]).long()
        if step == eval_from:
            model.eval()
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        losses.append(loss.item())
        for at, prefix, what in ((0, "", "logits"), (eval_from, "eval", "eval-mode logits")):
            if step != at:
                continue
            want = logits.detach().numpy()
            got = np.load(os.path.join(directory, prefix + "out.npy"))
            good, message = compare(what, got, want, bound_of(want))
            ok &= good
            messages.append(message)
            # The floor is relative to the largest gradient of the model: a bias before a batch
            # norm has a gradient of exactly 0 in theory, which both sides round to some 1e-8.
            largest = max(float(p.grad.abs().max()) for p in model.parameters())
            for key, parameter in model.named_parameters():
                want = parameter.grad.numpy()
                got = np.load(os.path.join(directory, prefix + "grad." + key + ".npy"))
                good, message = compare(prefix + "grad." + key, got.reshape(want.shape), want,
                                        RTOL * np.abs(want) + FLOOR * largest)
                if not good:
                    ok = False
                    messages.append(message)
            messages.append(f"{len(list(model.parameters()))} {prefix + ' ' if prefix else ''}"
                            f"gradients agree" if ok else f"{prefix} gradients differ")
        optimizer.step()
    want = np.array(losses)
    got = np.load(os.path.join(directory, "losses.npy")).astype(np.float64)
    good, message = compare("losses", got, want, RTOL * np.abs(want))
    ok &= good
    messages.append(message + f" (first {want[0]:.6f}, last {want[-1]:.6f})")
    # After 20 steps the rounding differences have grown through the updates, elementwise most
    # where an element is near zero: each tensor within 1e-4 of torch's in relative L2 norm.
    final = load_state(directory, "final.", model)
    worst = 0.0
    for key, value in model.state_dict().items():
        if key.endswith("num_batches_tracked"):
            if int(final[key]) != int(value):
                ok = False
                messages.append(f"{key}: dnnx {int(final[key])}, torch {int(value)}")
            continue
        want = value.numpy().astype(np.float64)
        got = final[key].numpy().astype(np.float64)
        norm = float(np.linalg.norm(want))
        error = float(np.linalg.norm(got - want)) / (norm if norm > 0 else 1.0)
        worst = max(worst, error)
        if not np.all(np.isfinite(got)) or error > 1e-4:
            ok = False
            messages.append(f"final.{key}: relative L2 error {error:.3g} > 1e-4")
    if ok:
        messages.append(f"final state agrees (worst relative L2 error {worst:.2g})")
    return ok, messages


def run_any(harness, case, name, directory, rng):
    if "layer" in case and case["layer"]["type"] in ("RNN", "LSTM", "GRU"):
        return run_recurrent(harness, case, name, directory, rng)
    return (run_layer if "layer" in case else run_one)(harness, case, name, directory, rng)


if __name__ == "__main__":
    runs = [(case["name"], case, "") for case in CASES]
    for backend in ("reference", "cpu"):
        for layer_name, shape, spec in LAYERS:
            case = {"name": f"{layer_name}_{backend}", "backend": backend, "input": shape,
                    "layer": spec}
            runs.append((case["name"], case, ""))
    sys.exit(main(__doc__, "nn_harness", runs, run_any))
