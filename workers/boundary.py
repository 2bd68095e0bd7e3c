"""The operating-system boundary around untrusted code (candidates and uploaded references).

Every child that runs untrusted code is started through ``confine(...)``, which wraps its command
in bubblewrap (``bwrap``):

- **its own namespaces**: network (only a loopback that reaches nothing), PID (it sees only its
  own processes), IPC and UTS; it dies with its parent;
- **a filesystem built from nothing**: the system directories read-only (``/usr`` and the
  ``/bin``, ``/lib`` links, a short list of ``/etc`` files, ``/sys``), the Python installation
  and its package folders read-only, the repository's ``workers/`` package read-only, and one
  writable scratch folder. The repository's ``data/`` (the portal's secret key, the registry's
  signing key, the SQLite database), ``/root``, ``/home``, ``/var`` and ``/run`` (the database and
  broker sockets) are not there at all; ``/tmp`` is empty and private; ``/etc/passwd`` holds two
  lines. Shells stay (Ubuntu's ``/sbin/ldconfig``, which Triton runs, is a shell script): a
  shell in the box has the box's rights and nothing more;
- **an unprivileged user**: started as root, the child drops to ``KERNELEVOLVE_SANDBOX_UID``
  (65534, ``nobody``) before Python imports anything of ours; started as another user, it keeps
  that unprivileged user inside a user namespace;
- **the GPU device nodes** (``/dev/nvidia*``) only on the ``cuda`` platform; a minimal ``/dev``
  otherwise.

The Python audit hooks in ``workers.instrument`` stay as a second layer that names the rule a
candidate broke; this module is what holds when they are bypassed.

``KERNELEVOLVE_SANDBOX=none`` runs children without the boundary (a developer's machine without
bubblewrap): the reports then say ``"boundary": "none"``. Without that explicit choice a missing
or broken bubblewrap refuses to evaluate, with the reason. ``KERNELEVOLVE_BWRAP`` names the binary
where it is not on ``PATH`` (a GPU host that unpacked the ``.deb`` with ``dpkg -x``).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKERS_DIR = os.path.join(REPO_ROOT, "workers")

SANDBOX_ENV = "KERNELEVOLVE_SANDBOX"
SANDBOX_UID_ENV = "KERNELEVOLVE_SANDBOX_UID"
BWRAP_ENV = "KERNELEVOLVE_BWRAP"
KIND_BWRAP = "bwrap"
KIND_NONE = "none"
DEFAULT_UID = 65534

# System folders mounted read-only; on merged-/usr systems the top-level ones are links.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# The /etc files compilers and loaders read (cc is an alternatives link; ldconfig -p reads the
# cache). Everything else in /etc stays out of view.
ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/OpenCL",
    "/etc/nvidia",
)


class BoundaryUnavailable(RuntimeError):
    """The sandbox cannot be built here; the message says why and what to do."""


@dataclass(frozen=True)
class Boundary:
    """How untrusted children are confined on this host."""

    kind: str  # KIND_BWRAP | KIND_NONE
    bwrap: str | None = None
    uid: int | None = None  # the uid the child drops to (None: keep ours, in a user namespace)
    version: str = ""

    def describe(self) -> dict:
        if self.kind == KIND_NONE:
            return {"boundary": KIND_NONE}
        return {
            "boundary": KIND_BWRAP,
            "bwrap": self.version,
            "uid": self.uid if self.uid is not None else os.getuid(),
            "network": "none",
        }


def _bwrap_path(environ) -> str | None:
    given = environ.get(BWRAP_ENV)
    if given:
        return given if os.access(given, os.X_OK) else None
    return shutil.which("bwrap") or (
        "/usr/bin/bwrap" if os.access("/usr/bin/bwrap", os.X_OK) else None
    )


@lru_cache(maxsize=4)
def _probe(bwrap: str, uid: int | None) -> str:
    """Run ``true`` in the sandbox once; return bwrap's version or raise with its complaint."""
    argv = _bwrap_args(bwrap, uid, scratch=None, gpu=False) + ["/usr/bin/true"]
    try:
        run = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BoundaryUnavailable(f"bubblewrap at {bwrap} did not run: {exc}") from exc
    if run.returncode != 0:
        raise BoundaryUnavailable(
            f"bubblewrap at {bwrap} cannot build the sandbox here: "
            f"{(run.stderr or run.stdout).strip()[:400]}"
        )
    version = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10)
    return version.stdout.strip()


def boundary_from_env(environ=None) -> Boundary:
    """The boundary this host uses; raises ``BoundaryUnavailable`` rather than run unconfined."""
    environ = os.environ if environ is None else environ
    kind = environ.get(SANDBOX_ENV, KIND_BWRAP).strip().lower() or KIND_BWRAP
    if kind == KIND_NONE:
        return Boundary(KIND_NONE)
    if kind != KIND_BWRAP:
        raise BoundaryUnavailable(f"{SANDBOX_ENV}={kind!r}: must be 'bwrap' or 'none'")
    bwrap = _bwrap_path(environ)
    if bwrap is None:
        raise BoundaryUnavailable(
            "bubblewrap (bwrap) is not installed, and untrusted code runs only inside it: "
            "install it (apt-get install bubblewrap), point KERNELEVOLVE_BWRAP at a bwrap binary, "
            "or set KERNELEVOLVE_SANDBOX=none to run without an operating-system boundary"
        )
    uid = None
    if os.geteuid() == 0:
        try:
            uid = int(environ.get(SANDBOX_UID_ENV, DEFAULT_UID))
        except ValueError as exc:
            raise BoundaryUnavailable(f"{SANDBOX_UID_ENV} must be a number") from exc
        if uid == 0:
            raise BoundaryUnavailable(f"{SANDBOX_UID_ENV}=0 would run untrusted code as root")
    return Boundary(KIND_BWRAP, bwrap=bwrap, uid=uid, version=_probe(bwrap, uid))


def _hidden_roots() -> list[str]:
    """Folders no bind may contain or equal: the repository (but for what we pick) and data."""
    roots = [REPO_ROOT]
    data = os.environ.get("KERNELEVOLVE_DATA_DIR")
    if data:
        roots.append(os.path.realpath(data))
    return roots


def _toolchain_prefixes() -> set[str]:
    """Install prefixes of the C compiler Triton builds its launcher with, where it lives outside
    /usr (a GPU image's /opt/gcc, say): the compiler needs its own lib/ and libexec/ too."""
    found = set()
    names = [os.environ.get("CC", ""), "cc", "gcc", "clang"]
    for name in filter(None, names):
        path = shutil.which(name)
        if not path:
            continue
        real = os.path.realpath(path)
        prefix = os.path.dirname(os.path.dirname(real))
        if not any(prefix == d or prefix.startswith(d + "/") for d in SYSTEM_DIRS):
            found.add(prefix)
    return found


def _python_paths() -> list[str]:
    """The folders the interpreter, its packages, its libraries and the C compiler live in, minus
    anything that would show the repository (or an ancestor of it) whole."""
    venv = os.path.realpath(sys.prefix)
    wanted = {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        getattr(sys, "base_exec_prefix", sys.base_prefix),
        os.path.dirname(os.path.realpath(sys.executable)),
    }
    wanted.update(p for p in sys.path if p)
    for var in ("PYTHONPATH", "LD_LIBRARY_PATH"):
        wanted.update(p for p in os.environ.get(var, "").split(os.pathsep) if p)
    wanted.update(_toolchain_prefixes())
    chosen = set()
    for path in wanted:
        for p in {os.path.abspath(path), os.path.realpath(path)}:
            if not os.path.isdir(p):
                continue
            bad = False
            for hidden in _hidden_roots():
                inside = p == hidden or p.startswith(hidden.rstrip("/") + "/")
                above = hidden.startswith(p.rstrip("/") + "/") or p == "/"
                if above or (inside and not (p == venv or p.startswith(venv + "/"))):
                    bad = True
            mounted = any(p == d or p.startswith(d + "/") for d in SYSTEM_DIRS)
            if not bad and not mounted:
                chosen.add(p)
    # A folder inside another chosen one is already there.
    return sorted(p for p in chosen if not any(p.startswith(q + "/") for q in chosen if q != p))


def _bwrap_args(bwrap, uid, *, scratch, gpu) -> list[str]:
    args = [
        bwrap,
        "--die-with-parent",
        "--unshare-net",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
    ]
    if uid is None:
        args += ["--unshare-user"]
    else:
        # Root builds the mounts, then the child drops to uid before it runs anything else.
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    args += ["--proc", "/proc", "--dev", "/dev", "--ro-bind-try", "/sys", "/sys"]
    args += ["--perms", "1777", "--tmpfs", "/tmp", "--perms", "0755", "--dir", "/etc"]
    for path in ETC_FILES:
        args += ["--ro-bind-try", path, path]
    code = _python_paths() + [WORKERS_DIR]
    # bwrap makes the folders above a mount point readable by its owner only: make them
    # traversable for the unprivileged user (/root/.pyenv/... above the interpreter, say).
    made = {"/", "/tmp", "/etc", *SYSTEM_DIRS}
    for path in code:
        parts = path.strip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            folder = "/" + "/".join(parts[:i])
            if folder in made or any(folder.startswith(d + "/") for d in SYSTEM_DIRS):
                continue
            made.add(folder)
            args += ["--perms", "0755", "--dir", folder]
    for path in code:
        args += ["--ro-bind", path, path]
    if gpu:
        for node in sorted(glob.glob("/dev/nvidia*")):
            args += ["--dev-bind", node, node]
        for node in ("/dev/dri",):
            args += ["--dev-bind-try", node, node]
    if scratch:
        args += ["--bind", scratch, scratch]
        passwd = os.path.join(scratch, ".passwd")
        group = os.path.join(scratch, ".group")
        args += ["--ro-bind", passwd, "/etc/passwd", "--ro-bind", group, "/etc/group"]
    return args


# Runs first in the confined interpreter (``python -I``: no cwd on sys.path, no PYTHON* vars):
# drop to the unprivileged user, then put the code folder and PYTHONPATH back and run the module.
_ENTRY = (
    "import os, sys, runpy\n"
    "code, uid, module = sys.argv[1], sys.argv[2], sys.argv[3]\n"
    "if uid != '-':\n"
    "    u = int(uid); os.setgroups([]); os.setresgid(u, u, u); os.setresuid(u, u, u)\n"
    "    assert os.getuid() == u and os.geteuid() == u, 'could not drop privileges'\n"
    "extra = [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if p]\n"
    "sys.path[:0] = [code] + extra\n"
    "sys.argv = [module] + sys.argv[4:]\n"
    "runpy.run_module(module, run_name='__main__', alter_sys=True)\n"
)


def prepare_scratch(boundary: Boundary, scratch: str) -> None:
    """Make ``scratch`` the child's: its passwd and group files, owned by the sandbox user."""
    if boundary.kind == KIND_NONE:
        return
    uid = boundary.uid if boundary.uid is not None else os.getuid()
    for name, text in (
        (".passwd", f"root:x:0:0::/:/sbin/nologin\nsandbox:x:{uid}:{uid}::{scratch}:/bin/false\n"),
        (".group", f"root:x:0:\nsandbox:x:{uid}:\n"),
    ):
        path = os.path.join(scratch, name)
        if not os.path.exists(path):
            with open(path, "w") as fh:
                fh.write(text)
            os.chmod(path, 0o444)
    if boundary.uid is not None:
        for folder, _dirs, files in os.walk(scratch):
            os.chown(folder, boundary.uid, boundary.uid)
            for name in files:
                # The scratch root's dotfiles (passwd, group, the owner's pid) stay ours.
                if not (folder == scratch and name.startswith(".")):
                    os.chown(os.path.join(folder, name), boundary.uid, boundary.uid)
        os.chown(scratch, boundary.uid, boundary.uid)
        os.chmod(scratch, 0o700)


def confine(
    boundary: Boundary,
    module: str,
    args: list[str],
    *,
    scratch: str,
    gpu: bool,
) -> list[str]:
    """The command that runs ``python -m module args`` behind ``boundary``, with ``scratch``
    as its only writable folder."""
    python = [os.path.abspath(sys.executable), "-I", "-B", "-u", "-c", _ENTRY, REPO_ROOT]
    if boundary.kind == KIND_NONE:
        return python + ["-", module, *args]
    uid = "-" if boundary.uid is None else str(boundary.uid)
    prefix = _bwrap_args(boundary.bwrap, boundary.uid, scratch=scratch, gpu=gpu)
    return prefix + ["--chdir", scratch, "--"] + python + [uid, module, *args]


def redact(value, secrets: list[str]):
    """``value`` with every secret string and every PEM private key block replaced.

    A second line of defence: the boundary keeps secrets out of the child's reach, and this keeps
    one that reached a report anyway (an environment variable, a key) out of what is stored.
    """
    if isinstance(value, str):
        value = _PEM.sub("[redacted private key]", value)
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, "[redacted]")
        return value
    if isinstance(value, dict):
        return {k: redact(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact(v, secrets) for v in value)
    return value


_PEM = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(-----END [A-Z0-9 ]*PRIVATE KEY-----|$)", re.S
)


def env_secrets(environ=None, pattern: str | None = None) -> list[str]:
    """Values of this process's credential-like variables (long enough not to match by chance)."""
    from workers import constants as C

    environ = os.environ if environ is None else environ
    rx = re.compile(pattern or C.SECRET_ENV_PATTERN, re.IGNORECASE)
    values = {v for k, v in environ.items() if rx.search(k) and len(v) >= 8}
    # A URL's password is the secret part; the whole URL is redacted too.
    for v in list(values):
        m = re.match(r"^[a-z0-9+.-]+://[^:/@]*:([^@/]{4,})@", v)
        if m:
            values.add(m.group(1))
    return sorted(values, key=len, reverse=True)
