"""A local Ray instance started by ``ensure_ray`` listens on loopback only (issue 45): its
GCS, raylet, workers and agents, checked with ``ss`` while a session runs in a child
process (every process of the session is a descendant of that child)."""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.ray

SESSION = """
import sys
from sim.engines.ray import ensure_ray
ray = ensure_ray(num_cpus=1)

@ray.remote
def one():
    return 1

@ray.remote
class Actor:
    def ping(self):
        return 1

actor = Actor.remote()
assert ray.get([one.remote(), one.remote(), actor.ping.remote()]) == [1, 1, 1]
print("READY", flush=True)
sys.stdin.read()
ray.shutdown()
"""


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        found.add(pid)
        todo += children.get(pid, [])
    return found


def _loopback(local: str) -> bool:
    """``127.0.0.1:80``, ``[::1]:80``, ``[::ffff:127.0.0.1]:80`` yes; ``*:80``,
    ``0.0.0.0:80``, ``[::]:80`` and any other address no."""
    host = local.rsplit(":", 1)[0].strip("[]").split("%")[0]
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False  # "*" or a name
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def test_a_local_ray_listens_on_loopback_only() -> None:
    if os.environ.get("CI"):
        import ray  # noqa: F401  (CI installs Ray: a missing one is a failure there)
    else:
        pytest.importorskip("ray", reason="Ray is not installed (bash .ci/setup)")
    if shutil.which("ss") is None:
        pytest.skip("ss (iproute2) is not installed")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    child = subprocess.Popen([sys.executable, "-c", SESSION], cwd=ROOT, env=env, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stderr is not None
        line = child.stdout.readline()
        assert line.startswith("READY"), child.stderr.read()[-3000:]
        time.sleep(1.0)  # agents bind after the session is up
        pids = _descendants(child.pid)
        listening = subprocess.run(["ss", "-ltunpH"], capture_output=True, text=True,
                                   check=True).stdout
        ours = []
        for row in listening.splitlines():
            owners = {(name, int(pid)) for name, pid in re.findall(r'\("([^"]+)",pid=(\d+)',
                                                                     row)}
            if any(pid in pids for _, pid in owners):
                ours.append((row.split()[4], sorted(name for name, _ in owners)))
        names = {name for _, who in ours for name in who}
        assert {"gcs_server", "raylet"} <= names, ours  # ss saw the session
        exposed = [(local, who) for local, who in ours if not _loopback(local)]
        assert exposed == [], exposed
    finally:
        if child.stdin is not None:
            child.stdin.close()
        try:
            child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
