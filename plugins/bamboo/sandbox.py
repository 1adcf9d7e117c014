"""Run a program the model helped write, in a child process with limits.

The authors run each check with `exec` in a `multiprocessing.Process` of the evaluating Python
(RUCAIBox/BAMBOO `private_eval/execution.py`, itself OpenAI's human-eval `check_correctness`): a
3-second `setitimer` alarm around the `exec`, standard streams swallowed, a temporary working
folder, and `reliability_guard()` switching off `os.kill`, `os.system`, `subprocess.Popen`,
`shutil.rmtree`, `builtins.exit` and the like. This module does the same in a **separate
interpreter** (`python -I`, its environment emptied but for PATH, HOME and locale), so nothing the
program does reaches lceval's process, and adds what the authors leave to the machine:

- memory: `RLIMIT_AS` (address space; default 4 GiB), no core files, files written at most 16 MiB;
- CPU: `RLIMIT_CPU` as a second stop beside the alarm; the parent kills the process group when the
  wall-clock allowance passes;
- network: the child first moves into a network namespace of its own (`unshare(CLONE_NEWNET)`, or
  with a user namespace where unprivileged ones are allowed): it then has no interface but an
  unconnected loopback. Where neither is allowed, Python's socket API is switched off instead
  (`connect`, `getaddrinfo`, `create_connection` raise), and the result says which isolation held.

Modules named in `preload` are imported before the alarm starts (the authors' forked process had
numpy imported by its parent), so the 3 seconds time the program, not the import of pandas.

The result is the authors' text: `passed`, `timed out` or `failed: <exception>`, with the
exception's type beside it (`MemoryError` says nothing of itself).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass

__all__ = ["Limits", "RUNNER", "run_program"]


@dataclass(frozen=True)
class Limits:
    timeout: float = 3.0  # seconds of the alarm around the program (the authors' `timeout`)
    memory_mb: int = 4096  # address space of the child
    wall_seconds: float = 120.0  # the parent's last resort, imports included
    python: str = sys.executable


#: The child's code (passed with -c; the program and limits come on stdin as JSON).
RUNNER = r'''
import json, os, sys
cfg = json.loads(sys.stdin.read())
out = os.dup(1)
def report(text):
    os.write(out, json.dumps(text).encode() + b"\n")
import resource
mem = cfg["memory_mb"] * 1024 * 1024
for limit, value in ((resource.RLIMIT_AS, mem), (resource.RLIMIT_CORE, 0), (resource.RLIMIT_FSIZE, 16 * 1024 * 1024),
                     (resource.RLIMIT_CPU, int(cfg["cpu_seconds"]))):
    try:
        resource.setrlimit(limit, (value, value))
    except (ValueError, OSError):
        pass
isolation = "sockets"
try:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    CLONE_NEWNET, CLONE_NEWUSER = 0x40000000, 0x10000000
    if libc.unshare(CLONE_NEWNET) == 0 or libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0:
        isolation = "namespace"
except Exception:
    pass
import socket
def _no_network(*args, **kwargs):
    raise OSError("network access is switched off in lceval's sandbox")
socket.socket.connect = socket.socket.connect_ex = socket.socket.sendto = _no_network
socket.create_connection = socket.getaddrinfo = socket.gethostbyname = _no_network
for name in cfg["preload"]:
    try:
        __import__(name)
    except Exception:
        pass
import builtins, faulthandler, io, shutil, signal, subprocess, tempfile, contextlib
work = tempfile.mkdtemp()
os.chdir(work)
faulthandler.disable()
os.environ["OMP_NUM_THREADS"] = "1"
for mod, names in ((os, ["kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid", "fork",
                          "forkpty", "killpg", "rename", "renames", "truncate", "replace", "unlink", "fchmod",
                          "fchown", "chmod", "chown", "chroot", "lchown", "getcwd", "chdir"]),
                   (shutil, ["rmtree", "move", "chown"]), (subprocess, ["Popen"]), (builtins, ["exit", "quit"])):
    for name in names:
        setattr(mod, name, None)
builtins.help = None
for name in ("ipdb", "joblib", "resource", "psutil", "tkinter"):
    sys.modules[name] = None
class _Timeout(Exception):
    pass
def _alarm(signum, frame):
    raise _Timeout()
sink = io.StringIO()
result, error = "passed", None
try:
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, cfg["timeout"])
        try:
            exec(cfg["program"], {})
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
except _Timeout:
    result = "timed out"
except BaseException as e:
    result, error = f"failed: {e}", type(e).__name__
report({"result": result, "error": error, "isolation": isolation})
'''


def run_program(program: str, limits: Limits, preload: tuple[str, ...] = ()) -> dict[str, str]:
    """`{"result": "passed" | "timed out" | "failed: ...", "isolation": "namespace" | "sockets"}`."""
    cfg = {"program": program, "timeout": limits.timeout, "memory_mb": limits.memory_mb,
           "cpu_seconds": max(1, int(limits.wall_seconds)), "preload": list(preload)}
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")}
    with tempfile.TemporaryDirectory(prefix="lceval-sandbox-") as cwd:
        try:
            proc = subprocess.Popen([limits.python, "-I", "-c", RUNNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, cwd=cwd, env={**env, "TMPDIR": cwd},
                                    start_new_session=True)
        except OSError as exc:
            return {"result": f"failed: cannot start {limits.python}: {exc}", "isolation": "none"}
        try:
            stdout, _ = proc.communicate(json.dumps(cfg).encode(), timeout=limits.wall_seconds)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return {"result": "timed out", "isolation": "killed"}
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    lines = [line for line in stdout.decode("utf-8", "replace").splitlines() if line.strip()]
    if not lines:  # killed by a limit (memory, CPU) before it could say
        return {"result": f"failed: the process ended with {proc.returncode} (a limit: memory, CPU time or "
                          "file size)", "isolation": "unknown"}
    try:
        return json.loads(lines[-1])
    except ValueError:
        return {"result": "failed: no result from the sandbox", "isolation": "unknown"}
