"""Escape attempts by hostile candidates, each pinned to what must stop it.

Every attempt runs as a real candidate through the evaluator on ``interpret``. Most are written
twice: once as the probe wrote them (the audit hook, the second layer, must name the rule), and
once after switching that hook off through ``gc`` as the probe did, so that only the
operating-system boundary (bubblewrap: unprivileged user, own network and PID namespaces, a
filesystem without the portal's data) stands between the candidate and the host. Each test
asserts what a user would see: the host untouched, the secret absent from the whole report, and a
reason that says what was refused.
"""

import json
import os
import secrets
import socket
import threading

import pytest

from tests.workers.conftest import read_fixture
from tests.workers.fixtures.adversarial import HONEST_FORWARD, silu
from workers import constants as C
from workers.boundary import REPO_ROOT
from workers.evaluate import EvaluationRequest

SILU = read_fixture("problems", "silu.py")

# Switches the audit hook off the way the probe did: find the policy object, clear `enforcing`.
DISABLE_HOOK = """
import gc
for _obj in gc.get_objects():
    if type(_obj).__name__ == "AuditPolicy":
        _obj.enforcing = False
        _obj.__class__.__call__ = lambda self, event, args: None
"""


@pytest.fixture
def planted(tmp_path_factory):
    """A secret in the repository's data/ folder (where the portal keeps its keys) and a file in
    the host's /tmp; both must be out of reach. Removed afterwards."""
    data = os.path.join(REPO_ROOT, "data")
    os.makedirs(data, exist_ok=True)
    token = secrets.token_hex(16)
    secret_path = os.path.join(data, f"escape-probe-{token[:8]}.pem")
    with open(secret_path, "w") as fh:
        fh.write(f"secret-{token}\n")
    host_dir = tmp_path_factory.mktemp("host")
    victim = host_dir / "victim.txt"
    victim.write_text("precious\n")
    marker = host_dir / "pwned"
    yield {
        "secret_path": secret_path,
        "secret": f"secret-{token}",
        "victim": str(victim),
        "marker": str(marker),
        "host_dir": str(host_dir),
    }
    os.remove(secret_path)


def _run(evaluator, prelude: str, forward: str | None = None) -> dict:
    source = silu(prelude=prelude) if forward is None else silu(prelude=prelude, forward=forward)
    request = EvaluationRequest(problem_source=SILU, candidate_source=source)
    return evaluator.evaluate(request).to_dict()


def _failed(report: dict) -> dict:
    assert report["verdict"] == C.REJECTED, report["gates"]
    return next(g for g in report["gates"] if g["status"] == C.FAILED)


def _assert_secret_absent(report: dict, secret: str):
    assert secret not in json.dumps(report)


TAMPERED = "sandbox refused: the audit policy was tampered with"


def _os_error(gate: dict) -> str:
    """With the hook switched off the gate names the tampering; the error the operating system
    gave is kept beside it."""
    assert gate["reason"] == TAMPERED, gate["reason"]
    return gate["evidence"]["error"] or ""


@pytest.mark.parametrize("hook", ["on", "off"])
def test_reading_the_portal_secret_raises_at_import_and_leaks_nothing(evaluator, planted, hook):
    prelude = (DISABLE_HOOK if hook == "off" else "") + (
        f"raise RuntimeError(open({planted['secret_path']!r}).read())"
    )
    report = _run(evaluator, prelude)
    gate = _failed(report)
    assert gate["name"] == C.GATE_COMPILE
    error = gate["reason"] if hook == "on" else _os_error(gate)
    assert "No such file or directory" in error  # data/ is not in the sandbox at all
    _assert_secret_absent(report, planted["secret"])


def test_secret_printed_to_the_compile_log_or_raised_in_forward_leaks_nothing(evaluator, planted):
    path = planted["secret_path"]
    prelude = DISABLE_HOOK + (
        "import glob, os\n"
        "for _p in glob.glob('/work/**/*.pem', recursive=True) + [" + repr(path) + "]:\n"
        "    print(open(_p).read() if os.access(_p, os.R_OK) else f'blocked {_p}')\n"
    )
    leak = f"        raise RuntimeError(open({path!r}).read())"
    forward = HONEST_FORWARD.replace("        return out", leak)
    report = _run(evaluator, prelude, forward)
    assert "blocked" in json.dumps(report)
    _assert_secret_absent(report, planted["secret"])


def test_the_host_passwd_and_shadow_are_not_what_the_child_sees(evaluator):
    prelude = DISABLE_HOOK + (
        "import os\n"
        "print('PASSWD', open('/etc/passwd').read())\n"
        "print('SHADOW', os.path.exists('/etc/shadow'))\n"
        "print('UID', os.getuid(), os.geteuid())\n"
        "raise RuntimeError('done')\n"
    )
    report = _run(evaluator, prelude)
    log = _failed(report)["evidence"]["log"]
    assert "SHADOW False" in log
    assert "UID 0" not in log  # an unprivileged user, never root
    with open("/etc/passwd") as fh:
        host_users = [line.split(":")[0] for line in fh if line.strip()]
    shown = log.split("PASSWD", 1)[1].split("SHADOW", 1)[0]
    assert not [u for u in host_users if u not in ("root", "nobody") and f"\n{u}:" in shown]


@pytest.mark.parametrize("hook", ["on", "off"])
def test_truncating_or_linking_a_host_file_leaves_it_untouched(evaluator, planted, hook):
    victim, folder = planted["victim"], planted["host_dir"]
    prelude = (DISABLE_HOOK if hook == "off" else "") + (
        "import os\n"
        f"os.truncate({victim!r}, 0)\n"
        f"os.symlink('/etc/passwd', {os.path.join(folder, 'link')!r})\n"
    )
    gate = _failed(_run(evaluator, prelude))
    if hook == "on":
        assert gate["rule"] == C.RULE_SANDBOX_VIOLATION
        assert "os.truncate outside the sandbox folder" in gate["reason"]
    else:
        assert "No such file or directory" in _os_error(gate)
    with open(victim) as fh:
        assert fh.read() == "precious\n"
    assert not os.path.lexists(os.path.join(folder, "link"))


@pytest.mark.parametrize("hook", ["on", "off"])
def test_writing_into_the_repository_is_refused(evaluator, hook):
    target = os.path.join(REPO_ROOT, "workers", f"pwned_{hook}.py")
    prelude = (DISABLE_HOOK if hook == "off" else "") + f"open({target!r}, 'w').write('x')\n"
    gate = _failed(_run(evaluator, prelude))
    assert not os.path.exists(target)
    if hook == "on":
        assert gate["reason"].startswith("sandbox refused: write outside the sandbox folder")
    else:
        assert "Read-only file system" in _os_error(gate)


@pytest.fixture
def listener():
    """A TCP server on the host's loopback that answers with a secret and counts connections."""
    token = secrets.token_hex(8)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    seen = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            seen.append(1)
            conn.sendall(f"reply-{token}".encode())
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield {"port": server.getsockname()[1], "reply": f"reply-{token}", "seen": seen}
    stop.set()
    thread.join(2)
    server.close()


@pytest.mark.parametrize("hook", ["on", "off"])
def test_network_through_ctypes_reaches_nothing(evaluator, listener, hook):
    port = listener["port"]
    prelude = (DISABLE_HOOK if hook == "off" else "") + (
        "import ctypes, socket, struct\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "fd = libc.socket(2, 1, 0)\n"
        f"addr = struct.pack('<HH4s8x', 2, socket.htons({port}), socket.inet_aton('127.0.0.1'))\n"
        "rc = libc.connect(fd, addr, len(addr))\n"
        "buf = ctypes.create_string_buffer(64)\n"
        "n = libc.recv(fd, buf, 64, 0) if rc == 0 else -1\n"
        "raise RuntimeError(f'connect={rc} errno={ctypes.get_errno()} got={buf.value!r}')\n"
    )
    report = _run(evaluator, prelude)
    gate = _failed(report)
    assert not listener["seen"]
    assert listener["reply"] not in json.dumps(report)
    if hook == "on":
        assert "native call to socket through ctypes" in gate["reason"]
    else:
        assert "connect=-1 errno=111" in _os_error(gate)  # refused: its own empty loopback


def test_python_sockets_are_refused_by_name(evaluator, listener):
    prelude = f"import socket\nsocket.create_connection(('127.0.0.1', {listener['port']}))\n"
    gate = _failed(_run(evaluator, prelude))
    assert gate["reason"] == "sandbox refused: network access (socket.connect)"
    assert not listener["seen"]


SHELLS = {
    "subprocess_env_sh": "import sys\nsys.modules['subprocess'].run("
    "['/usr/bin/env', 'sh', '-c', 'touch {marker}'])\n",
    "ctypes_system": "import ctypes\nctypes.CDLL(None).system(b'touch {marker}')\n",
    "posix_spawn_getattr": "import os\ngetattr(os, 'posix_' + 'spawn')("
    "'/bin/sh', ['sh', '-c', 'touch {marker}'], dict(os.environ))\n",
}


@pytest.mark.parametrize("attack", sorted(SHELLS))
@pytest.mark.parametrize("hook", ["on", "off"])
def test_a_shell_cannot_touch_the_host(evaluator, planted, attack, hook):
    marker = planted["marker"]
    prelude = (DISABLE_HOOK if hook == "off" else "") + SHELLS[attack].format(marker=marker)
    prelude += "raise RuntimeError('attempt finished')\n"
    gate = _failed(_run(evaluator, prelude))
    assert not os.path.exists(marker)
    assert gate["rule"] == C.RULE_SANDBOX_VIOLATION
    if hook == "on":
        assert "process control" in gate["reason"] or "native call to system" in gate["reason"]
    else:
        assert gate["reason"] == TAMPERED


def test_environment_and_other_processes_hold_no_secret(evaluator, monkeypatch):
    token = "tok-" + secrets.token_hex(12)
    monkeypatch.setenv("KERNELEVOLVE_PROBE_TOKEN", token)
    # A fresh child, started with the token in the worker's environment.
    evaluator.close()
    prelude = DISABLE_HOOK + (
        "import contextlib, glob, os\n"
        "print('PIDS', sorted(int(p.split('/')[2]) for p in glob.glob('/proc/[0-9]*')))\n"
        "seen = [repr(dict(os.environ))]\n"
        "for _p in glob.glob('/proc/[0-9]*/environ'):\n"
        "    with contextlib.suppress(OSError):\n"
        "        seen.append(open(_p, 'rb').read().decode('latin-1'))\n"
        "raise RuntimeError(' '.join(seen))\n"
    )
    report = _run(evaluator, prelude)
    gate = _failed(report)
    _assert_secret_absent(report, token)
    assert "PIDS [" in gate["evidence"].get("log", ""), gate
    pids = gate["evidence"]["log"].split("PIDS [", 1)[1].split("]", 1)[0]
    assert len(pids.split(",")) < 10  # its own PID namespace: not the host's processes
    evaluator.close()


def test_the_report_says_which_boundary_held(evaluator):
    report = _run(evaluator, "")
    assert report["verdict"] == C.ACCEPTED
    assert report["fingerprint"]["sandbox"]["boundary"] == "bwrap"
    assert report["fingerprint"]["sandbox"]["network"] == "none"
    assert report["fingerprint"]["sandbox"]["uid"] != 0


def test_resource_limits_are_set_and_cannot_be_raised(evaluator):
    prelude = DISABLE_HOOK + (
        "import resource\n"
        "nproc = resource.getrlimit(resource.RLIMIT_NPROC)\n"
        "print('NPROC', nproc, 'FSIZE', resource.getrlimit(resource.RLIMIT_FSIZE))\n"
        "resource.setrlimit(resource.RLIMIT_NPROC, (nproc[1] * 2, nproc[1] * 2))\n"
    )
    gate = _failed(_run(evaluator, prelude))
    error = _os_error(gate)
    assert "not allowed to raise maximum limit" in error or "Operation not permitted" in error
    n, f = C.CHILD_MAX_PROCESSES, C.CHILD_MAX_FILE_BYTES
    assert f"NPROC ({n}, {n}) FSIZE ({f}, {f})" in gate["evidence"]["log"]
