"""dnnx.Context and its tuning options, the current context of a block, algos / select / profile
rows, and the choice cache."""

import os
import subprocess
import sys

import numpy as np
import pytest

import dnnx


def conv_desc():
    return dnnx.ConvDesc.from_shapes((1, 3, 8, 8), (4, 3, 3, 3), pad=1)


def test_context_fields():
    ctx = dnnx.Context(backend="reference", device=0, type_config="half")
    assert ctx.backend == "reference" and ctx.requested_backend == "reference"
    assert ctx.device == "cpu" and ctx.device_id == 0
    assert ctx.type_config == "half" and ctx.dtype == "f16"
    assert "reference" in ctx.describe() and "reference" in repr(ctx)
    auto = dnnx.Context()
    assert auto.requested_backend == "auto" and auto.backend == dnnx.resolve_backend("auto")
    assert isinstance(ctx.fingerprint(), str)
    ctx.synchronize()
    assert ctx.stream == 0


def test_tune_policies_per_direction_and_op():
    ctx = dnnx.Context("reference")
    tune = ctx.tune
    assert tune.fwd == "heuristic"
    tune.fwd = "exhaustive"
    tune.bwd_weights = "time_once"
    assert ctx.tune.fwd == "exhaustive" and ctx.tune.bwd_weights == "exhaustive:once"
    ctx.tune.pool.bwd = "exhaustive"
    assert ctx.tune.pool.bwd == "exhaustive" and ctx.tune.pooling.bwd_data == "exhaustive"
    assert ctx.tune.policy("pool", "bwd") == "exhaustive"
    ctx.tune.set_policy("xent", "fwd", "exhaustive")
    assert ctx.tune.cross_entropy.fwd == "exhaustive"
    ctx.tune.matmul.bwd_weights = "exhaustive"
    assert ctx.tune.linear.bwd_weights == "exhaustive"
    ctx.tune.bnorm.fwd = "fixed:reference:direct"
    assert ctx.tune.batch_norm.fwd == "fixed:reference:direct"
    assert ctx.tune.conv.fwd == "exhaustive"  # convolution's row is the three fields
    assert ctx.tune.act.directions == ["fwd", "bwd"]
    assert "pool" in repr(ctx.tune.pool)
    with pytest.raises(dnnx.InvalidArgument, match="bwd_weights"):
        ctx.tune.pool.bwd_weights = "exhaustive"
    with pytest.raises(dnnx.InvalidArgument):
        ctx.tune.fwd = "fastest_please"
    with pytest.raises(dnnx.InvalidArgument):
        ctx.tune.policy("nope", "fwd")


def test_tune_options_mirror_the_cpp_struct():
    tune = dnnx.Context("reference").tune
    assert tune.workspace_limit is None
    tune.workspace_limit = 1 << 20
    assert tune.workspace_limit == 1 << 20 and tune.effective_workspace_limit() == 1 << 20
    tune.fastest = True
    assert tune.effective_workspace_limit() is None
    tune.workspace_limit = None
    assert tune.workspace_limit is None
    with pytest.raises(dnnx.InvalidArgument, match="workspace_limit"):
        tune.workspace_limit = -5
    for name in ("deterministic", "verbose", "time_naive", "final_round"):
        setattr(tune, name, True)
        assert getattr(tune, name) is True
    tune.benchmark_limit, tune.warmup_runs, tune.timing_runs = 3, 0, 2
    tune.abandon_factor = 8.0
    assert (tune.benchmark_limit, tune.warmup_runs, tune.timing_runs, tune.abandon_factor) == (
        3, 0, 2, 8.0)
    assert tune.variant_factor == 2.0
    tune.variant_factor = 0
    assert tune.variant_factor == 0.0
    with pytest.raises(dnnx.InvalidArgument, match="variant_factor"):
        tune.variant_factor = 0.5
    assert tune.final_loop_ms == 0.5
    tune.final_loop_ms = 4.0
    assert tune.final_loop_ms == 4.0
    for bad in (-1.0, 1001.0, float("nan")):
        with pytest.raises(dnnx.InvalidArgument, match="final_loop_ms"):
            tune.final_loop_ms = bad
    assert tune.final_contenders == 0
    tune.final_contenders = 1000
    assert tune.final_contenders == 1000
    for bad in (-1, 1001):
        with pytest.raises(dnnx.InvalidArgument, match="final_contenders"):
            tune.final_contenders = bad
    assert tune.host_tie == 0.02
    tune.host_tie = 0
    assert tune.host_tie == 0.0
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(dnnx.InvalidArgument, match="host_tie"):
            tune.host_tie = bad
    assert tune.search_budget_ms == 0.0
    tune.search_budget_ms = 1500
    assert tune.search_budget_ms == 1500.0
    for bad in (-1.0, 3_600_001.0, float("nan"), float("inf")):
        with pytest.raises(dnnx.InvalidArgument, match="search_budget_ms"):
            tune.search_budget_ms = bad
    assert tune.late_plan_share == 0.04
    tune.late_plan_share = 0
    assert tune.late_plan_share == 0.0
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(dnnx.InvalidArgument, match="late_plan_share"):
            tune.late_plan_share = bad
    assert (tune.energy_window_ms, tune.energy_repeats, tune.profile_energy) == (1000.0, 3, False)
    tune.energy_window_ms, tune.energy_repeats, tune.profile_energy = 50, 100, True
    assert (tune.energy_window_ms, tune.energy_repeats, tune.profile_energy) == (50.0, 100, True)
    for bad in (49.0, 60_001.0, float("nan")):
        with pytest.raises(dnnx.InvalidArgument, match="energy_window_ms"):
            tune.energy_window_ms = bad
    for bad in (0, 101, -3):
        with pytest.raises(dnnx.InvalidArgument, match="energy_repeats"):
            tune.energy_repeats = bad
    tune.fwd, tune.bwd_data = "min_energy", "energy_delay:once"
    assert (tune.fwd, tune.bwd_data) == ("min_energy", "energy_delay:once")
    tune.fwd = tune.bwd_data = "heuristic"
    copied = tune.copy()
    assert copied == tune
    copied.fwd = "exhaustive"
    assert copied != tune and tune.fwd == "heuristic"


def test_tune_options_pickle_every_field():
    import pickle
    tune = dnnx.Context("reference").tune.copy()
    tune.fwd, tune.bwd_weights = "exhaustive", "fixed:reference:direct"
    tune.pool.bwd = "fixed:reference:direct"
    tune.workspace_limit, tune.deterministic, tune.fastest = 4096, True, True
    tune.verbose, tune.time_naive, tune.final_round = True, True, False
    tune.benchmark_limit, tune.warmup_runs, tune.timing_runs = 3, 0, 2
    tune.abandon_factor, tune.variant_factor, tune.final_loop_ms = 8.0, 0.0, 3.0
    tune.host_tie, tune.search_budget_ms, tune.late_plan_share = 0.1, 750.0, 0.5
    tune.energy_window_ms, tune.energy_repeats, tune.profile_energy = 250.0, 5, True
    tune.final_contenders = 20
    again = pickle.loads(pickle.dumps(tune))
    assert again == tune and again.pool.bwd == "fixed:reference:direct"
    assert pickle.loads(pickle.dumps(dnnx.Context("reference").tune)) == \
        dnnx.Context("reference").tune
    state = tune.__getstate__()
    state["policies"]["nonsense.fwd"] = "heuristic"
    with pytest.raises(dnnx.InvalidArgument):
        dnnx.TuneOptions.__new__(dnnx.TuneOptions).__setstate__(state)


def test_contexts_as_blocks():
    outer, inner = dnnx.Context("reference"), dnnx.Context("reference")
    assert dnnx.current() is dnnx.default_context()
    with outer as entered:
        assert entered is outer and dnnx.current() is outer
        with inner:
            assert dnnx.current() is inner
        assert dnnx.current() is outer
        explicit = dnnx.Context("reference")
        assert dnnx.current(explicit) is explicit
    assert dnnx.current() is dnnx.default_context()


def test_tuning_block_restores_options():
    ctx = dnnx.Context("reference")
    ctx.tune.bwd_data = "exhaustive"
    with ctx.tuning(fwd="exhaustive", workspace_limit=4096, deterministic=True,
                    pool={"bwd": "exhaustive"}, act="exhaustive", final_loop_ms=2.0) as tuned:
        assert tuned is ctx
        assert ctx.tune.fwd == "exhaustive" and ctx.tune.workspace_limit == 4096
        assert ctx.tune.final_loop_ms == 2.0
        assert ctx.tune.deterministic and ctx.tune.pool.bwd == "exhaustive"
        assert ctx.tune.act.fwd == "exhaustive" and ctx.tune.act.bwd == "exhaustive"
    assert ctx.tune.fwd == "heuristic" and ctx.tune.workspace_limit is None
    assert ctx.tune.final_loop_ms == 0.5
    assert not ctx.tune.deterministic and ctx.tune.pool.bwd == "heuristic"
    assert ctx.tune.bwd_data == "exhaustive"
    with pytest.raises(dnnx.InvalidArgument, match="neither"):
        with ctx.tuning(no_such_option=1):
            pass
    with ctx:
        with dnnx.tuning(fwd="exhaustive"):
            assert ctx.tune.fwd == "exhaustive"
    assert ctx.tune.fwd == "heuristic"


def test_algos_select_profile_rows(ctx):
    desc = conv_desc()
    rows = dnnx.algos(desc, "fwd", ctx=ctx)
    assert rows and all(isinstance(row, dnnx.Row) for row in rows)
    assert rows[0]._fields == ("id", "status", "reason", "time", "workspace", "deterministic",
                               "notes", "energy")
    assert all(row.energy is None for row in rows)
    assert {row.status for row in rows} <= {"supported", "unsupported"}
    assert all(row.time is None for row in rows)
    assert all(row.reason for row in rows if row.status == "unsupported")
    supported = [row.id for row in rows if row.status == "supported"]
    assert supported

    choice = dnnx.select(desc, "fwd", ctx=ctx)
    assert choice.id == supported[0] and choice.policy == "heuristic"
    assert choice.op == "conv" and choice.direction == "fwd" and choice.backend == ctx.backend
    assert choice.late_plans == []  # only plans that compile in the background are ever late

    ctx.tune.fwd = "fixed:" + supported[-1]
    assert dnnx.select(desc, "fwd", ctx=ctx).id == supported[-1]

    profile = dnnx.profile(desc, "bwd_data", ctx=ctx)
    assert profile.direction == "bwd_data" and profile.chosen
    timed = [row for row in profile if row.status == "ok"]
    assert timed and all(row.time > 0 for row in timed)
    assert profile.chosen in {row.id for row in timed}
    assert "dnnx profile conv" in profile.repro
    assert profile.chosen in profile.table() and profile.chosen in profile.json()
    assert profile.energy_meter == "" and all(row.energy is None for row in profile)

    # The energy policies on a backend without an energy counter: the fastest, and why.
    ctx.tune.fwd = "min_energy"
    choice = dnnx.select(desc, "fwd", ctx=ctx)
    assert choice.policy == "min_energy" and choice.energy_j is None
    assert choice.energy_meter == f"the {ctx.backend} backend reads no energy counter"
    assert choice.energy_fastest == ""
    ctx.tune.profile_energy = True
    profile = dnnx.profile(desc, "fwd", ctx=ctx)
    assert profile.energy_meter == choice.energy_meter
    assert all(row.energy is None for row in profile)


def test_select_for_every_op_desc(reference):
    descs = {
        "pool": dnnx.PoolDesc.from_shapes((1, 2, 4, 4), 2),
        "activation": dnnx.ActivationDesc(kind="tanh", dims=(2, 3)),
        "softmax": dnnx.SoftmaxDesc(dims=(2, 3)),
        "cross_entropy": dnnx.CrossEntropyDesc(dims=(2, 3)),
        "batch_norm": dnnx.BatchNormDesc(dims=(2, 3)),
        "add": dnnx.AddDesc(src_dims=(1, 3), dst_dims=(2, 3)),
        "matmul": dnnx.MatmulDesc.linear(2, 3, 4),
        "conv_fused": dnnx.ConvFusedDesc(conv=conv_desc(), bias=True),
    }
    for name, desc in descs.items():
        assert dnnx.algos(desc, "fwd", ctx=reference), name
        assert dnnx.select(desc, "fwd", ctx=reference).id, name
    assert dnnx.algos(descs["pool"], "bwd", ctx=reference)
    with pytest.raises(dnnx.InvalidArgument, match="bwd_weights"):
        dnnx.algos(descs["pool"], "bwd_weights", ctx=reference)
    with pytest.raises(dnnx.InvalidArgument):
        dnnx.algos(object(), "fwd", ctx=reference)


def test_desc_classes():
    desc = dnnx.ConvDesc(batch=2, in_channels=3, out_channels=8, input=(5, 6), kernel=(3, 3),
                         pad_before=(1, 1), pad_after=(1, 1), dtype="float16",
                         layout="channels_last")
    assert desc.batch == 2 and desc.kernel == (3, 3, 0) and desc.input[:2] == (5, 6)
    desc.stride = 2  # an int sets every entry
    assert desc.stride == (2, 2, 2)
    desc.stride = (1, 1, 1)
    assert desc.dtype == "f16" and desc.layout == "nhwc"
    assert desc.dst_dims() == (2, 8, 5, 6)
    assert repr(desc) == desc.key()
    assert "dnnx profile conv" in desc.repro("bwd_data")
    assert "--direction bwd" in dnnx.PoolDesc.from_shapes((1, 2, 4, 4), 2).repro("bwd")
    same = dnnx.ConvDesc.from_shapes((2, 3, 5, 6), (8, 3, 3, 3), pad=1, dtype="f16",
                                     layout="nhwc")
    assert same == desc and hash(same) == hash(desc)
    assert desc.copy() == desc and desc.copy() is not desc
    assert "stride" in dnnx.ConvDesc.fields()
    fused = dnnx.ConvFusedDesc(conv=desc, residual=True, residual_scale=0.5)
    assert fused.conv == desc and fused.activation == "relu"
    # NumPy integers and torch.Size are sequences of ints too.
    assert dnnx.ActivationDesc(dims=np.array([2, 3])).dims == (2, 3)
    desc.__init__(batch=5)  # again: a fresh desc
    assert desc.batch == 5 and desc.in_channels == 1
    pool = dnnx.PoolDesc(batch=1, channels=2, input=(6, 6), kernel=2, stride=2, mode="avg")
    assert pool.mode == "avg_include_pad" and pool.dst_dims() == (1, 2, 3, 3)


def test_choice_cache_stats_export_import(tmp_path):
    ctx = dnnx.Context("reference")
    cache = dnnx.ChoiceCache()
    ctx.choice_cache = cache
    assert cache.stats()["size"] == 0
    dnnx.select(conv_desc(), "fwd", ctx=ctx)
    dnnx.select(conv_desc(), "fwd", ctx=ctx)
    stats = cache.stats()
    assert stats["size"] == 1 and stats["hits"] >= 1 and stats["misses"] >= 1
    assert stats["mode"] == "off" and len(cache) == 1
    (key, choice), = cache.entries()
    assert "conv" in key and choice.id
    path = str(tmp_path / "choices.json")
    assert cache.export_file(path) == 1 and os.path.getsize(path) > 0
    other = dnnx.ChoiceCache()
    assert other.import_file(path) == 1 and len(other) == 1
    cache.clear()
    assert len(cache) == 0
    with pytest.raises(dnnx.InvalidArgument):
        other.import_file(str(tmp_path / "missing.json"))
    filed = dnnx.ChoiceCache(str(tmp_path / "tune.json"), mode="readwrite")
    ctx.choice_cache = filed
    dnnx.select(conv_desc(), "fwd", ctx=ctx)
    assert filed.stats()["writes"] >= 1 and filed.path.endswith("tune.json")
    assert isinstance(dnnx.cache.stats(), dict)
    with pytest.raises(TypeError):
        ctx.choice_cache = None


def test_backends_listed():
    available, why = dnnx.backend_available("reference")
    assert available and why == ""
    assert isinstance(dnnx.backend_version("reference"), str)
    assert dnnx.__version__


def test_background_work_stops_at_exit():
    # The package's exit handler calls dnnx::stop_background_work (run here in a child
    # interpreter, the function counted); calling it directly is harmless, and dnnx stays usable.
    code = ("import atexit, dnnx\n"
            "from unittest import mock\n"
            "with mock.patch.object(dnnx._dnnx, 'stop_background_work') as stop:\n"
            "    atexit._run_exitfuncs()\n"
            "print(stop.call_count)\n")
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=120)
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "1"
    dnnx.stop_background_work()
    dnnx.stop_background_work()
    available, _ = dnnx.backend_available("reference")
    assert available


def test_results_do_not_depend_on_the_backend_choice_api(reference):
    # A fixed policy runs exactly that candidate: the result matches the heuristic's.
    src = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    weights = np.random.default_rng(1).standard_normal((4, 3, 3, 3)).astype(np.float32)
    desc = dnnx.conv.desc_for(src, weights, padding=1)
    first = dnnx.conv.fwd(desc, src, weights, ctx=reference)
    ids = [row.id for row in dnnx.algos(desc, ctx=reference) if row.status == "supported"]
    for algo in ids:
        with reference.tuning(fwd="fixed:" + algo):
            np.testing.assert_allclose(dnnx.conv.fwd(desc, src, weights, ctx=reference), first,
                                       rtol=1e-5, atol=1e-5)


def test_context_from_env(monkeypatch):
    monkeypatch.setenv("DNNX_BACKEND", "reference")
    monkeypatch.setenv("DNNX_TYPE", "bf16")
    monkeypatch.setenv("DNNX_ALGO_CONV_FWD", "exhaustive")
    monkeypatch.setenv("DNNX_ALGO_POOL_BWD", "time_once")
    monkeypatch.setenv("DNNX_WORKSPACE_LIMIT", "1024")
    ctx = dnnx.Context.from_env()
    assert isinstance(ctx, dnnx.Context)
    assert ctx.backend == "reference" and ctx.type_config == "bfloat16"
    assert ctx.tune.fwd == "exhaustive" and ctx.tune.pool.bwd == "exhaustive:once"
    assert ctx.tune.workspace_limit == 1024
    copied = ctx.copy()
    assert isinstance(copied, dnnx.Context) and copied.tune == ctx.tune
    copied.tune.fwd = "heuristic"
    assert ctx.tune.fwd == "exhaustive"
    monkeypatch.setenv("DNNX_DETERMINISTIC", "maybe")
    with pytest.raises(dnnx.InvalidArgument, match="DNNX_DETERMINISTIC"):
        dnnx.Context.from_env()


def test_default_context_follows_the_arrays_device():
    saved = dnnx.default_context()
    try:
        dnnx.set_default_context(dnnx.Context("reference"))
        dnnx.default_context().tune.fwd = "exhaustive"
        src = np.zeros((1, 3, 4, 4), np.float32)
        weights = np.zeros((2, 3, 1, 1), np.float32)
        desc = dnnx.conv.desc_for(src, weights)
        # Host arrays, a host default: the default itself runs them, with its options.
        assert dnnx.conv.fwd(desc, src, weights).shape == (1, 2, 4, 4)
        assert dnnx._context.resolve(None, src) is dnnx.default_context()
        # Inside a block, the block's context, whatever the arrays.
        block = dnnx.Context("reference")
        with block:
            assert dnnx._context.resolve(None, src) is block
    finally:
        dnnx.set_default_context(saved)
