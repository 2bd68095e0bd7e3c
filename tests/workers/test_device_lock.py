"""The device lock: evaluation processes on one GPU host (sandbox children, the confined tuner
and model check) take the timed rounds in turn."""

import fcntl
import os
import subprocess
import sys
import time

from workers import device_lock
from workers.confined import run_confined
from workers.gates import performance

HOLDER = """
import sys, time
from workers import device_lock
fd = device_lock.open_lock(sys.argv[1])
with device_lock.held(fd):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _holder(path, seconds):
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, path, str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_process_waits_for_the_holder(tmp_path):
    path = str(tmp_path / "gpu.lock")
    proc = _holder(path, 1.0)
    fd = device_lock.open_lock(path)
    with device_lock.held(fd, wait_s=30) as info:
        assert info["held"]
    proc.wait(timeout=30)
    assert info["waited_s"] >= 0.5  # it ran only once the other process let go


def test_a_holder_that_never_lets_go_does_not_block_for_good(tmp_path):
    path = str(tmp_path / "gpu.lock")
    proc = _holder(path, 30)
    try:
        fd = device_lock.open_lock(path)
        start = time.monotonic()
        with device_lock.held(fd, wait_s=0.3) as info:
            pass
        assert time.monotonic() - start < 10
        assert not info["held"]
        assert "timed anyway" in info["note"]
    finally:
        proc.kill()
        proc.wait()


def test_a_closed_descriptor_is_reported_not_raised(tmp_path):
    fd = device_lock.open_lock(str(tmp_path / "gpu.lock"))
    os.close(fd)  # what untrusted code in the child could do
    with device_lock.held(fd) as info:
        pass
    assert not info["held"] and "unusable" in info["note"]


def test_the_path_follows_the_visible_devices_and_can_be_turned_off():
    a = device_lock.lock_path({"CUDA_VISIBLE_DEVICES": "0"})
    b = device_lock.lock_path({"CUDA_VISIBLE_DEVICES": "1"})
    assert a != b and a.endswith("kernelevolve-gpu-0.lock")
    assert device_lock.lock_path({"KERNELEVOLVE_DEVICE_LOCK": "off"}) is None
    assert device_lock.lock_path({"KERNELEVOLVE_DEVICE_LOCK": "/x/y.lock"}) == "/x/y.lock"


def test_the_timing_report_says_what_waiting_cost():
    assert performance._lock_evidence([{"waited_s": 0.0, "held": True}]) == {}
    got = performance._lock_evidence(
        [{"waited_s": 1.5, "held": True}, {"waited_s": 0.25, "held": False, "note": "n"}]
    )
    assert got == {"device_lock": {"waited_s": 1.75, "rounds": 2, "notes": ["n"]}}


def _confined_probe(path, monkeypatch, wait_s):
    monkeypatch.setenv("KERNELEVOLVE_DEVICE_LOCK", path)
    return run_confined(
        "workers.device_lock_probe",
        {"wait_s": wait_s},
        timeout_s=120,
        cpu_s=60,
        memory_bytes=4 << 30,
        gpu=True,  # a GPU run (tuner, model check) is handed the lock; others are not
    )


def test_a_confined_gpu_run_is_handed_the_lock_and_waits_for_its_holder(tmp_path, monkeypatch):
    path = str(tmp_path / "gpu.lock")
    free = _confined_probe(path, monkeypatch, wait_s=5)
    assert free["fd"] is not None and free["held"]
    proc = _holder(path, 30)
    try:  # another process holds the device: the confined run cannot take it
        busy = _confined_probe(path, monkeypatch, wait_s=0.3)
    finally:
        proc.kill()
        proc.wait()
    assert not busy["held"] and "timed anyway" in busy["note"]
    cpu = run_confined("workers.device_lock_probe", {}, timeout_s=120, cpu_s=60,
                       memory_bytes=4 << 30)  # fmt: skip
    assert cpu["fd"] is None  # a CPU run gets no lock


def test_device_time_is_the_time_held_not_the_wait_for_it(tmp_path):
    """A candidate's device seconds count its turn on the GPU: the wait for another process's
    rounds and what runs outside a held block (compiling, warming up) are wall time only."""
    path = str(tmp_path / "gpu.lock")
    proc = _holder(path, 0.6)
    fd = device_lock.open_lock(path)
    before = device_lock.held_total()
    time.sleep(0.2)  # outside: not counted
    with device_lock.held(fd, wait_s=30) as info:
        time.sleep(0.3)
    proc.wait(timeout=30)
    counted = device_lock.held_total() - before
    assert info["waited_s"] >= 0.2
    assert 0.3 <= counted < 0.3 + 0.2


def _taken(path) -> bool:
    """Whether some descriptor holds the lock, asked from a new one (as another process would)."""
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def test_an_inner_block_neither_waits_nor_lets_the_device_go(tmp_path):
    path = str(tmp_path / "gpu.lock")
    fd = device_lock.open_lock(path)
    before = device_lock.held_total()
    with device_lock.held(fd, wait_s=0.2) as outer:
        with device_lock.held(fd, wait_s=0.2) as inner:
            assert inner["held"] and inner.get("nested")
        # Without the count, the inner block's release would free the device here.
        assert _taken(path)
        time.sleep(0.05)
    assert outer["held"] and not _taken(path)
    assert device_lock.held_total() - before < 1.0  # the outer block's time, counted once
    with device_lock.held(fd, wait_s=0.2) as again:
        assert again["held"] and not again.get("nested")


class _State:
    def __init__(self, fd):
        self.lock_fd = fd
        self.lock_wait_s = 5.0


def test_torch_compile_times_its_configs_holding_the_device(tmp_path, monkeypatch):
    """Inductor times its kernels' configs at their first call, outside the timed rounds: timed
    beside another process's rounds, a slower config could win and every candidate would be
    judged against a slower compile. Its benchmarker's timings now take the device lock."""
    from torch._inductor.runtime import benchmarking, triton_heuristics

    path = str(tmp_path / "gpu.lock")
    seen = []

    def timing(*args, **kwargs):  # stands for the GPU timing this machine cannot run
        seen.append(_taken(path))
        return 1.0

    bench = benchmarking.benchmarker
    for name in performance.INDUCTOR_TIMINGS:
        if hasattr(bench, name):
            monkeypatch.setattr(bench, name, timing)
    state = _State(device_lock.open_lock(path))
    wrapped = performance.lock_inductor_tuning(state)
    assert "benchmark_gpu" in wrapped
    assert performance.lock_inductor_tuning(state) == wrapped  # once per child, not twice
    # The autotuner calls the same object, so the wrapping reaches it.
    assert triton_heuristics.benchmarker is bench
    assert bench.benchmark_gpu(lambda: None) == 1.0
    assert seen == [True] and not _taken(path)
    # The timing report says how many of compile's timings held the device.
    assert performance._inductor_evidence(state) == {
        "inductor_timings": {"calls": 1, "waited_s": 0.0}
    }
