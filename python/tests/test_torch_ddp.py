"""A converted model under torch.nn.parallel.DistributedDataParallel: 2 processes on gloo (CPU),
each on its own batch; the all-reduced gradients must equal the unconverted model's."""

import os
import socket

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 6, 3, padding=1), torch.nn.BatchNorm2d(6), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(6 * 4 * 4, 3))


def batch(rank):
    generator = torch.Generator().manual_seed(100 + rank)
    return torch.randn(4, 3, 8, 8, generator=generator)


def worker(rank, world_size, port, path):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        import dnnx.torch
        model = dnnx.torch.convert(make_model())
        assert type(model[0]) is dnnx.torch.Conv2d and type(model[5]) is dnnx.torch.Linear
        parallel = torch.nn.parallel.DistributedDataParallel(model)
        parallel(batch(rank)).square().sum().backward()
        if rank == 0:
            torch.save({name: p.grad for name, p in model.named_parameters()}, path)
    finally:
        dist.destroy_process_group()


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_converted_model_under_ddp_gloo(tmp_path):
    path = str(tmp_path / "grads.pt")
    torch.multiprocessing.spawn(worker, args=(2, free_port(), path), nprocs=2, join=True)
    reduced = torch.load(path)
    # DDP averages the ranks' gradients; batch-norm uses each rank's own batch statistics.
    model = make_model()
    loss = sum(model(batch(rank)).square().sum() for rank in range(2)) / 2
    loss.backward()
    for name, parameter in model.named_parameters():
        torch.testing.assert_close(reduced[name], parameter.grad, rtol=2e-3, atol=2e-3)
