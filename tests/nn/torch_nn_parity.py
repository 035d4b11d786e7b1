"""dnnx::nn against torch.nn: a model's printed tree, state_dict keys, first-step logits and
parameter gradients, then the loss of every step of an SGD run (and the final state), for the
Fashion-MNIST CNN and a small residual network built from the same initial weights.

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
]


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
    messages = []
    ok = True
    with open(os.path.join(directory, "repr.txt")) as text:
        got = text.read()
    if got != repr(model):
        ok = False
        messages.append(f"repr differs:\n--- dnnx\n{got}\n--- torch\n{model!r}")
    with open(os.path.join(directory, "keys.txt")) as text:
        keys = text.read().split()
    if keys != list(model.state_dict().keys()):
        return False, messages + [f"state_dict keys differ: dnnx {keys}, torch "
                                  f"{list(model.state_dict().keys())}"]
    model.load_state_dict(load_state(directory, "init.", model))
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=case["lr"], momentum=case["momentum"])
    losses = []
    for step in range(case["steps"]):
        x = torch.from_numpy(arrays[f"x{step}"])
        y = torch.from_numpy(arrays[f"y{step}"]).long()
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        losses.append(loss.item())
        if step == 0:
            want = logits.detach().numpy()
            got = np.load(os.path.join(directory, "out.npy"))
            good, message = compare("logits", got, want, bound_of(want))
            ok &= good
            messages.append(message)
            # The floor is relative to the largest gradient of the model: a bias before a batch
            # norm has a gradient of exactly 0 in theory, which both sides round to some 1e-8.
            largest = max(float(p.grad.abs().max()) for p in model.parameters())
            for key, parameter in model.named_parameters():
                want = parameter.grad.numpy()
                got = np.load(os.path.join(directory, "grad." + key + ".npy")).reshape(want.shape)
                good, message = compare("grad." + key, got, want,
                                        RTOL * np.abs(want) + FLOOR * largest)
                if not good:
                    ok = False
                    messages.append(message)
            messages.append(f"{len(list(model.parameters()))} gradients agree"
                            if ok else "gradients differ")
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


if __name__ == "__main__":
    sys.exit(main(__doc__, "nn_harness",
                  [(case["name"], case, "") for case in CASES], run_one))
