"""The CuTe template's per-case tuner (workers/search/tune_cute.py): what it would time. The
timing itself needs the GPU (docs/benchmarks.md has its runs); here, the parameter sets, the
launches they plan, and the command line's refusals."""

import pytest

from workers.contract import problem as P
from workers.search import tune_cute
from workers.search.generators.templates import cute_row


def test_online_is_swept_only_where_the_operator_reads_it():
    space = {"threads": [128, 256], "max_per_thread": [64], "max_cluster": [8, 16],
             "prefetch": [0, 1], "online": [0, 1], "exchange": [1], "stage": [0, 1],
             "occupancy": [0]}  # fmt: skip
    assert len(tune_cute.param_sets("softmax", space)) == 32
    rms = tune_cute.param_sets("rms_norm", space)
    assert len(rms) == 16 and all("online" not in p for p in rms)


def test_parameter_sets_that_plan_one_launch_are_timed_once(tmp_path):
    space = {"threads": [256], "max_per_thread": [64], "max_cluster": [2, 4, 8, 16],
             "prefetch": [1], "online": [1], "exchange": [0, 1], "stage": [0, 1],
             "occupancy": [0]}  # fmt: skip
    sets = tune_cute.param_sets("softmax", space)

    def keys(rows, n, itemsize):
        out = set()
        for i, params in enumerate(sets):
            mod = P.load_module(cute_row.render("softmax", params), f"tc_{i}", str(tmp_path))
            out.add(tune_cute.launch_key(mod, params, n, itemsize, rows))
        return out

    # 32,768 bf16 columns fit a cluster of 2 whatever the largest cluster allowed: one launch
    # (two ways for the cluster to exchange its partials, two ways to load the row)
    assert keys(1024, 32768, 2) == {
        (8, 8, True, 2, 256, 1, 1, exchange, stage, 0, 0, 0, 0, 0)
        for exchange in (0, 1)
        for stage in (0, 1)
    }
    # 262,144 bf16 columns need 16 CTAs to stay in registers; 2, 4 and 8 all loop in one CTA,
    # where neither the exchange nor the staging matters
    assert keys(128, 262144, 2) == {
        (8, 128, False, 1, 256, 1, 1, 0, 0, 0, 0, 0, 0, 0),
        *(
            (8, 8, True, 16, 256, 1, 1, xch, stage, 0, 0, 0, 0, 0)
            for xch in (0, 1)
            for stage in (0, 1)
        ),
    }


def test_a_row_too_large_for_shared_memory_is_not_staged_there(tmp_path):
    """``stage`` asks for the kept row in shared memory; where it would not fit an SM's (64k
    fp32 columns in one 512-thread CTA is 256 KB), the launch keeps it in registers instead of
    failing to launch (the H200 sweep's CUDA_LAUNCH_INVALID_CONFIG)."""
    import torch

    params = {"threads": 512, "max_per_thread": 128, "max_cluster": 1, "stage": 2}
    mod = P.load_module(cute_row.render("rms_norm", params), "tc_stage", str(tmp_path))
    big = mod._ke_launch_of(torch.empty(2, 65536, dtype=torch.float32))
    fits = mod._ke_launch_of(torch.empty(2, 32768, dtype=torch.float32))
    assert big[2] and fits[2]  # both kept in one CTA
    assert big[9] == 0 and fits[9] == 2
    assert tune_cute.launch_key(mod, {**params, "prefetch": 1}, 65536, 4, 2)[9] == 0


def test_a_campaign_tunes_the_norms_rows_read_again_from_shared_memory():
    """The H200 runs of session 33: re-reading a norm's row from shared memory (stage 2) won
    its longest rows; a campaign's start tries it for RMSNorm and LayerNorm, not for softmax,
    whose exps it would compute twice (it never won there)."""
    for op in ("rms_norm", "layer_norm"):
        assert tune_cute.campaign_space(op)["stage"] == [0, 2]
    assert tune_cute.campaign_space("softmax")["stage"] == [0]
    # session 34: streaming cache hints won the catalog's bf16 softmax rows; the packed pair
    # exchange never lost
    assert tune_cute.campaign_space("softmax")["cache"] == [0, 3]
    assert tune_cute.campaign_space("rms_norm")["cache"] == [0]
    assert all(tune_cute.campaign_space(op)["pack"] == [1] for op in cute_row.OPS)
    for op in cute_row.OPS:
        space = tune_cute.campaign_space(op)
        assert all(set(v) <= set(cute_row.SPACE[k]) for k, v in space.items())


def test_a_value_outside_the_template_space_is_refused(capsys):
    with pytest.raises(SystemExit):
        tune_cute.main(["--op", "softmax", "--problem", "p.py", "--workload", "w.json",
                        "--out", "o", "--threads", "96"])  # fmt: skip
    assert "[96] not in [64, 128, 256, 512, 1024]" in capsys.readouterr().err


def test_a_case_the_workload_does_not_have_is_refused_by_name(capsys):
    """``--cases`` times only the named cases of a workload (one slow case re-tuned on its
    own); a name the workload does not have is refused with the names it has."""
    with pytest.raises(SystemExit):
        tune_cute.main(["--op", "softmax", "--problem", "workers/catalog/problems/softmax.py",
                        "--workload", "workers/catalog/problems/softmax.json", "--out", "o",
                        "--cases", "b2048_d8192_bf16,b9_d9_bf16"])  # fmt: skip
    err = capsys.readouterr().err
    assert "['b9_d9_bf16'] not in the workload" in err and "b4096_d1024_bf16" in err


def test_the_tuned_table_sends_each_case_shape_its_own_launch(tmp_path, monkeypatch):
    """The tuner's report becomes one candidate whose table gives each case shape the launch
    that won it; a shape outside the table takes the defaults. Both compile for sm_90a."""
    import torch

    report = {
        "cases": [
            {
                "key": "4,32768,bfloat16",
                "finals": [{"params": {"threads": 128, "max_cluster": 4, "exchange": 1}}],
            },  # fmt: skip
            {"key": "8,1024,float32", "finals": []},  # nothing timed: not in the table
        ]
    }
    table = tune_cute.table_of(report)
    assert table == {"4,32768,bfloat16": {"threads": 128, "max_cluster": 4, "exchange": 1}}
    src = cute_row.render("softmax", {"table": table})
    mod = P.load_module(src, "tc_table", str(tmp_path))
    tuned = mod._ke_launch_of(torch.empty(4, 32768, dtype=torch.bfloat16))
    # (vec, per, keep, cluster, even, threads, prefetch, online, exchange, stage, occupancy,
    # order, pack, cache, reread)
    assert tuned == (8, 8, True, 4, True, 128, 1, 1, 1, 0, 0, 0, 0, 0, 0)
    other = mod._ke_launch_of(torch.empty(4, 32768, dtype=torch.float32))
    assert other[5] == cute_row.DEFAULTS["threads"] and other[8] == cute_row.DEFAULTS["exchange"]
    with pytest.raises(ValueError, match="threads=96"):
        cute_row.render("softmax", {"table": {"4,32768,bfloat16": {"threads": 96}}})


def test_the_template_cli_writes_the_candidate_of_a_recorded_table(capsys):
    """``cute_row OP --table REPORT`` rewrites the tuned candidate of an H200 run from its
    recorded table (docs/demo/h200-cute-tuned), and a table it cannot use is refused."""
    path = "docs/demo/h200-cute-tuned/layer_norm.json"
    assert cute_row.main(["layer_norm", "--table", path]) == 0
    src = capsys.readouterr().out
    assert "'4096,4096,bfloat16': {" in src and "_KE_TABLE = {" in src
    with pytest.raises(SystemExit):
        cute_row.main(["layer_norm", "--table", '{"4,8,bfloat16": {"warps": 4}}'])
    assert "table['4,8,bfloat16']" in capsys.readouterr().err


def test_the_grid_order_and_the_packed_exchange_count_only_where_they_change_the_launch(tmp_path):
    """``order`` moves a cluster's CTAs from the grid's x to its y, and ``pack`` packs an
    online softmax's pairs: for a row one CTA holds, neither changes the kernel, so the tuner
    times it once; for RMSNorm, which exchanges single values, ``pack`` never does."""
    space = {"max_cluster": [16], "order": [0, 1], "pack": [0, 1]}
    launches = {}
    for op in ("softmax", "rms_norm"):
        for i, params in enumerate(tune_cute.param_sets(op, space)):
            mod = P.load_module(cute_row.render(op, params), f"tc_{op}{i}", str(tmp_path))
            for n in (1024, 262144):
                key = tune_cute.launch_key(mod, params, n, 2, 64)
                launches.setdefault((op, n), set()).add(key[-4:-2])
    assert launches[("softmax", 1024)] == {(0, 0)}
    assert launches[("softmax", 262144)] == {(0, 0), (0, 1), (1, 0), (1, 1)}
    assert launches[("rms_norm", 262144)] == {(0, 0), (1, 0)}
