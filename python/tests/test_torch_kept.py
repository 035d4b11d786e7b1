"""dnnx.torch's per-call shortcuts: descs kept per input metadata (Note [kept descs]) and calls
autograd does not record (Note [calls autograd does not record]). Whatever changes between two
calls of a layer - the input's shape, dtype or layout, the layer's policy, the context - must
take effect on the next call: a stale entry would be a silently wrong result."""

import copy

import pytest

import dnnx

torch = pytest.importorskip("torch")
dt = pytest.importorskip("dnnx.torch")
F = torch.nn.functional


def close(actual, expected, tol=1e-4):
    torch.testing.assert_close(actual, expected, rtol=tol, atol=tol)


def conv_pair(seed=0, **options):
    torch.manual_seed(seed)
    theirs = torch.nn.Conv2d(3, 4, 3, **options)
    return theirs, dt.convert(copy.deepcopy(theirs))


def check_conv(ours, theirs, x):
    """Forward and every gradient of `ours` against `theirs` on `x`."""
    x_ours = x.detach().clone().requires_grad_(True)
    x_theirs = x.detach().clone().requires_grad_(True)
    dst, expected = ours(x_ours), theirs(x_theirs)
    assert dst.shape == expected.shape and dst.dtype == expected.dtype
    assert dst.is_contiguous(memory_format=torch.channels_last) == \
        expected.is_contiguous(memory_format=torch.channels_last)
    close(dst, expected)
    gradient = torch.randn_like(expected)
    ours.zero_grad()
    theirs.zero_grad()
    dst.backward(gradient)
    expected.backward(gradient)
    close(x_ours.grad, x_theirs.grad, 1e-3)
    close(ours.weight.grad, theirs.weight.grad, 1e-3)
    close(ours.bias.grad, theirs.bias.grad, 1e-3)


def test_shape_changes_between_calls(ctx):
    theirs, ours = conv_pair(padding=1)
    with ctx:
        for shape in [(2, 3, 8, 8), (2, 3, 6, 5), (1, 3, 8, 8), (2, 3, 8, 8)]:
            check_conv(ours, theirs, torch.randn(shape))
        desc, _ = dt._calls(ours)["fwd"]
        assert desc.batch == 2 and desc.input[:2] == (8, 8)


def test_layout_and_strides_change_between_calls(ctx):
    theirs, ours = conv_pair(1, padding=1)
    x = torch.randn(2, 3, 8, 8)
    strided = torch.randn(2, 3, 8, 16)[..., ::2]  # same shape, not dense: copied at each call
    with ctx:
        check_conv(ours, theirs, x)
        check_conv(ours, theirs, x.contiguous(memory_format=torch.channels_last))
        assert dt._calls(ours)["fwd"][0].layout == "nhwc"
        check_conv(ours, theirs, strided)
        check_conv(ours, theirs, strided)  # the kept entry says: copy
        assert dt._calls(ours)["fwd"][0].layout == "nchw"
        check_conv(ours, theirs, x)


def test_dtype_changes_between_calls(reference):
    torch.manual_seed(2)
    x = torch.randn(2, 3, 6, 6)
    weight = torch.randn(4, 3, 3, 3)
    expected = F.conv2d(x, weight, padding=1)
    with reference:
        close(dt.conv(x, weight, padding=1), expected)
        for dtype in (torch.bfloat16, torch.float16):
            dst = dt.conv(x.to(dtype), weight.to(dtype), padding=1)
            assert dst.dtype == dtype
            close(dst.float(), F.conv2d(x.to(dtype).float(), weight.to(dtype).float(),
                                        padding=1), 2e-2)
        close(dt.conv(x, weight, padding=1), expected)


def test_unhashable_arguments_build_the_desc_each_call(reference):
    torch.manual_seed(3)
    x, weight = torch.randn(1, 2, 7, 7), torch.randn(2, 2, 3, 3)
    with reference:
        for stride in ([1, 1], [2, 2], [1, 2]):
            close(dt.conv(x, weight, stride=stride, padding=[1, 1]),
                  F.conv2d(x, weight, stride=stride, padding=1))
            close(dt.pool(x, [3, 3], stride, [1, 1]),
                  F.max_pool2d(x, 3, stride, 1))


def test_policy_change_after_a_call_takes_effect():
    if not dnnx.backend_available("cpu")[0]:
        pytest.skip("the cpu backend (several convolution candidates) is not built")
    context = dnnx.Context("cpu")
    theirs, ours = conv_pair(4, padding=1)
    x = torch.randn(2, 3, 8, 8)
    desc = dnnx.conv.desc_for(x, ours.weight.detach(), padding=1)
    ids = [row.id for row in dnnx.algos(desc, "fwd", ctx=context) if row.status == "supported"]
    assert len(ids) >= 2
    layer = dt.algo(ours)
    with context:
        for chosen in (ids[0], ids[-1], ids[0]):
            layer.fwd = "fixed:" + chosen
            check_conv(ours, theirs, x)
            assert f"Conv2d fwd: {chosen} [fixed:{chosen}]" in dt.report(ours)
    # The context's own options, for a layer without options of its own.
    theirs, plain = conv_pair(4, padding=1)
    with context:
        plain(x)
        for chosen in (ids[-1], ids[0]):
            with context.tuning(conv={"fwd": "fixed:" + chosen}):
                check_conv(plain, theirs, x)
                assert f"Conv2d fwd: {chosen} [fixed:{chosen}]" in dt.report(plain)


def test_context_change_between_calls():
    theirs, ours = conv_pair(5, padding=1)
    x = torch.randn(2, 3, 5, 5)
    for backend in [name for name in ("reference", "cpu", "reference")
                    if dnnx.backend_available(name)[0]]:
        with dnnx.Context(backend):
            check_conv(ours, theirs, x)
        assert dt._calls(ours)["fwd"][1].backend == backend


@pytest.mark.parametrize("grad_mode", ["no_grad", "inputs_without_grad"])
def test_calls_autograd_does_not_record(ctx, grad_mode):
    torch.manual_seed(6)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(64, 5),
        torch.nn.LogSoftmax(dim=1))
    converted = dt.convert(copy.deepcopy(model))
    if grad_mode == "inputs_without_grad":
        for module in (model, converted):
            module.requires_grad_(False)
    x = torch.randn(2, 3, 8, 8)
    labels = torch.tensor([1, 4])
    loss, converted_loss = torch.nn.CrossEntropyLoss(), dt.convert(torch.nn.CrossEntropyLoss())
    for training in (True, False):  # batch statistics (running ones updated), then running ones
        model.train(training)
        converted.train(training)
        with ctx, torch.set_grad_enabled(grad_mode != "no_grad"):
            out = converted(x)
            value = converted_loss(out, labels)
            expected = model(x)
            close(out, expected, 1e-3)
            close(value, loss(expected, labels), 1e-3)
        assert not out.requires_grad and out.grad_fn is None and value.grad_fn is None
        close(converted[1].running_mean, model[1].running_mean)
        close(converted[1].running_var, model[1].running_var)
    text = dt.report(converted)
    for line in ("0 Conv2d fwd", "1 BatchNorm2d fwd", "2 ReLU fwd", "3 MaxPool2d fwd",
                 "5 Linear fwd", "6 LogSoftmax fwd"):
        assert line in text


def test_kept_tables_stay_bounded(reference):
    with reference:
        for size in range(1, dt._KEPT_LIMIT + 40):
            dt.activation(torch.randn(1, 1, size))
        assert len(dt._activation_descs) <= dt._KEPT_LIMIT
        x = torch.randn(1, 2, 3)
        close(dt.activation(x), torch.relu(x))


def test_backward_on_another_thread_runs_under_the_forwards_block():
    """On a GPU PyTorch runs the backward on an autograd thread of its own, where the forward's
    `with ctx:` block is not open (Note [the forward's block in the backward]); here a thread
    stands in for it."""
    import threading
    if not dnnx.backend_available("cpu")[0]:
        pytest.skip("the cpu backend (several convolution candidates) is not built")
    context = dnnx.Context("cpu")
    theirs, ours = conv_pair(8, padding=1)
    x = torch.randn(2, 3, 8, 8)
    desc = dnnx.conv.desc_for(x, ours.weight.detach(), padding=1)
    ids = [row.id for row in dnnx.algos(desc, "bwd_data", ctx=context)
           if row.status == "supported"]
    chosen = ids[-1]
    relu = dt.convert(torch.nn.ReLU())
    failures = []

    def backward(loss):
        try:
            loss.backward()
        except Exception as error:  # reported below, in the test's thread
            failures.append(error)

    with context.tuning(conv={"bwd_data": "fixed:" + chosen}):
        with context:
            loss = relu(ours(x.requires_grad_(True))).sum()
        worker = threading.Thread(target=backward, args=(loss,))  # no block open there
        worker.start()
        worker.join()
        assert not failures, failures
        text = dt.report(ours)
        assert f"Conv2d bwd_data: {chosen} [fixed:{chosen}]" in text, text
    # the block's context, or a C++ layer's copy of it with the block's options (Note [layers
    # in C++])
    desc, used = dt._calls(ours)["bwd_data"]
    assert used is context or dnnx.select(desc, "bwd_data", ctx=used).id == chosen
    assert dt._calls(relu)["bwd_data"][1].backend == context.backend
    expected = theirs(x.detach().requires_grad_(True))
    torch.relu(expected).sum().backward()
    close(ours.weight.grad, theirs.weight.grad, 1e-3)
