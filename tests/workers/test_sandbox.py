import os

import pytest

from workers.fingerprint import harness_hash
from workers.sandbox import scrub_env


def test_scrub_env_drops_secrets():
    env = {
        "PATH": "/bin",
        "AWS_SECRET_ACCESS_KEY": "x",
        "DATABASE_URL": "pg://",
        "MY_TOKEN": "t",
        "REDIS_URL": "redis://",
        "DB_PASSWORD": "p",
        "HOME": "/root",
    }
    assert scrub_env(env) == {"PATH": "/bin", "HOME": "/root"}


def test_harness_hash_is_stable_hex():
    assert harness_hash() == harness_hash()
    assert len(harness_hash()) == 64


def test_redact_removes_env_secrets_and_private_keys():
    from workers.boundary import env_secrets, redact

    env = {
        "DATABASE_URL": "postgres://ke:hunter2-long@db:5432/ke",
        "MY_API_TOKEN": "tok-0123456789",
        "SHORT_KEY": "abc",  # too short to redact without mangling ordinary text
        "PATH": "/usr/bin",
    }
    secrets = env_secrets(env)
    pem = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEI\n-----END PRIVATE KEY-----"
    report = {
        "reason": f"boom tok-0123456789 {pem}",
        "log": ["password hunter2-long", "/usr/bin stays"],
    }
    clean = redact(report, secrets)
    assert "tok-0123456789" not in str(clean) and "hunter2-long" not in str(clean)
    assert "MC4CAQAwBQYDK2VwBCIEI" not in clean["reason"]
    assert "[redacted private key]" in clean["reason"]
    assert clean["log"][1] == "/usr/bin stays"


def test_missing_bubblewrap_refuses_with_what_to_do(tmp_path):
    from workers.boundary import BoundaryUnavailable, boundary_from_env

    with pytest.raises(BoundaryUnavailable, match="apt-get install bubblewrap"):
        boundary_from_env({"KERNELEVOLVE_BWRAP": str(tmp_path / "no-bwrap")})
    with pytest.raises(BoundaryUnavailable, match="must be 'bwrap' or 'none'"):
        boundary_from_env({"KERNELEVOLVE_SANDBOX": "chroot"})
    assert boundary_from_env({"KERNELEVOLVE_SANDBOX": "none"}).describe() == {"boundary": "none"}


def test_evaluator_without_a_sandbox_says_why(monkeypatch, tmp_path):
    from tests.workers.conftest import read_fixture
    from workers.evaluate import EvaluationRequest, Evaluator, EvaluatorUnavailable

    monkeypatch.setenv("KERNELEVOLVE_BWRAP", str(tmp_path / "no-bwrap"))
    request = EvaluationRequest(
        problem_source=read_fixture("problems", "silu.py"),
        candidate_source=read_fixture("candidates", "silu_good.py"),
    )
    with Evaluator() as ev, pytest.raises(EvaluatorUnavailable, match="bubblewrap"):
        ev.evaluate(request)


def test_stale_scratch_folders_of_dead_workers_are_swept(tmp_path):
    import subprocess
    import sys

    from workers.sandbox import OWNER_FILE, SCRATCH_PREFIX, sweep_stale_scratch

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], text=True, capture_output=True
    ).stdout.strip()
    gone, alive = tmp_path / f"{SCRATCH_PREFIX}gone", tmp_path / f"{SCRATCH_PREFIX}alive"
    for folder, pid in ((gone, dead), (alive, str(os.getpid()))):
        (folder / "child0").mkdir(parents=True)
        (folder / OWNER_FILE).write_text(pid)
    assert sweep_stale_scratch(str(tmp_path)) == [str(gone)]
    assert not gone.exists() and alive.exists()


def test_a_closed_evaluator_leaves_no_scratch_folder():
    import glob
    import tempfile

    from workers.sandbox import SCRATCH_PREFIX, SandboxChild

    before = set(glob.glob(os.path.join(tempfile.gettempdir(), SCRATCH_PREFIX + "*")))
    child = SandboxChild("interpret")
    assert os.path.isdir(child.root)
    child.cleanup()
    after = set(glob.glob(os.path.join(tempfile.gettempdir(), SCRATCH_PREFIX + "*")))
    assert after <= before


def test_a_closing_evaluator_sweeps_a_folder_orphaned_after_it_started():
    """A worker killed while the next one started (its process still exiting when the new one
    swept) leaves a folder nobody would remove: the survivor sweeps again as it closes."""
    import subprocess
    import sys
    import tempfile

    from workers.sandbox import OWNER_FILE, SCRATCH_PREFIX, SandboxChild

    child = SandboxChild("interpret")
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], text=True, capture_output=True
    ).stdout.strip()
    orphan = tempfile.mkdtemp(prefix=SCRATCH_PREFIX)
    with open(os.path.join(orphan, OWNER_FILE), "w") as fh:
        fh.write(dead)
    child.cleanup()
    assert not os.path.exists(orphan) and not os.path.exists(child.root)


def test_the_output_tap_reads_up_to_the_mark_even_split_across_reads():
    """The reply's log holds what the child printed just before replying: the tap reads up to
    the call's mark (here written in two pieces) and keeps none of it."""
    from workers.sandbox import _OutputTap

    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb", buffering=0) as stream:
        tap = _OutputTap(stream)
        mark = b"\x1eke-end-0123456789abcdef\x1e"
        tap.reset(mark)
        tap.start()
        os.write(write_end, b"last words before the reply\n" + mark[:7])
        assert not tap.wait_mark(0.2)  # half a mark is not the mark
        os.write(write_end, mark[7:] + b"after")
        assert tap.wait_mark(5.0)
        os.close(write_end)
        tap.join(5.0)
        log = tap.snapshot()["log"]
    assert log == "last words before the reply\nafter"


def test_what_a_failing_candidate_printed_last_is_in_its_report(evaluator):
    """A candidate that prints a lot and then fails at import: its last line is in the compile
    gate's log every time, never lost to the order in which the two pipes are read."""
    from tests.workers.conftest import read_fixture
    from tests.workers.fixtures.adversarial import silu
    from workers.evaluate import EvaluationRequest

    prelude = "print('x' * 200_000)\nprint('LAST-LINE')\nraise RuntimeError('stop')\n"
    request = EvaluationRequest(
        problem_source=read_fixture("problems", "silu.py"), candidate_source=silu(prelude=prelude)
    )
    for _ in range(3):
        report = evaluator.evaluate(request).to_dict()
        gate = next(g for g in report["gates"] if g["status"] == "failed")
        assert "LAST-LINE" in gate["evidence"]["log"]
        assert "ke-end-" not in gate["evidence"]["log"]
