"""The compiled build (sim/compiled.py, ``tooldns compile``): a copy of the code with the hot
modules compiled by mypyc gives the same bytes as the Python code, and a copy older than its
origin is named stale."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sim import compiled
from sim.compiled import HOT, MANIFEST, build, stale

ROOT = Path(__file__).resolve().parents[2]

#: Golden cases that take the compiled code through its typed edges: DNS over TLS, the
#: intent in the QNAME (dnslib-parsed CNAME chains), truncation to TCP and plain resolution,
#: sessions with a registry fallback, DNSSEC trust, faults with replicas.
CASES = ("quickstart", "dot-cost", "hot-k0-tc", "session-zipf", "trust-rogue-publisher",
         "faults-replicas")


def _origin(tmp: Path) -> Path:
    """A small tree shaped like the repository: the packages and pyproject.toml."""
    origin = tmp / "origin"
    for package in compiled.PACKAGES:
        (origin / package).mkdir(parents=True)
        (origin / package / "__init__.py").write_text("")
    (origin / "nodes" / "hot.py").write_text("X = 1\n")
    (origin / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    return origin


def _fake_copy(origin: Path, out: Path) -> None:
    """What :func:`build` leaves, without running mypyc: the files and their manifest."""
    files = compiled._files(origin)
    for f in files:
        (out / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(origin / f, out / f)
    (out / MANIFEST).write_text(json.dumps({"origin": str(origin), "modules": [],
                                            "files": compiled._digests(origin, files)}))


def test_stale_names_what_changed_at_the_origin(tmp_path: Path) -> None:
    origin = _origin(tmp_path)
    copy = tmp_path / "copy"
    _fake_copy(origin, copy)
    assert stale(copy) == []
    (origin / "nodes" / "hot.py").write_text("X = 2\n")
    (origin / "sim" / "new.py").write_text("")
    (origin / "analysis" / "__init__.py").unlink()
    assert stale(copy) == ["analysis/__init__.py", "nodes/hot.py", "sim/new.py"]
    assert stale(origin) is None  # not a compiled copy
    shutil.rmtree(origin)
    assert stale(copy) is None  # its origin is gone: nothing to compare with


def test_caches_and_built_modules_are_not_part_of_a_copy(tmp_path: Path) -> None:
    origin = _origin(tmp_path)
    (origin / "nodes" / "__pycache__").mkdir()
    (origin / "nodes" / "__pycache__" / "hot.cpython-311.pyc").write_bytes(b"x")
    (origin / "nodes" / "hot.cpython-311-x86_64-linux-gnu.so").write_bytes(b"x")
    (origin / "nodes" / "hot.c").write_text("")
    assert "nodes/hot.py" in compiled._files(origin)
    assert not [f for f in compiled._files(origin) if "pycache" in f or f.endswith((".so", ".c"))]


def test_build_replaces_only_a_compiled_copy(tmp_path: Path) -> None:
    origin = _origin(tmp_path)
    other = tmp_path / "results"
    other.mkdir()
    (other / "keep.csv").write_text("1\n")
    with pytest.raises(FileExistsError, match="not a compiled copy"):
        build(other, origin=origin, modules=("nodes.hot",))
    assert (other / "keep.csv").read_text() == "1\n"


def test_a_failed_build_leaves_the_copy_as_it_was(tmp_path: Path) -> None:
    origin = _origin(tmp_path)
    (origin / "nodes" / "hot.py").write_text("X: int = 'not an int'\n")  # mypyc refuses
    copy = tmp_path / "copy"
    _fake_copy(origin, copy)
    before = (copy / MANIFEST).read_text()
    with pytest.raises(compiled.CompileError, match=r"not built: nodes\.hot"):
        build(copy, origin=origin, modules=("nodes.hot",))
    assert (copy / MANIFEST).read_text() == before
    assert not (tmp_path / "copy.partial").exists()


def test_compiled_code_gives_the_same_bytes(tmp_path: Path) -> None:
    """The real build (mypyc and the C compiler; -O0 to build faster, the same semantics),
    then golden cases run from it: every hot module loads compiled and every digest equals
    the Python code's."""
    made = build(tmp_path / "code", opt_level=0)
    assert made["modules"] == list(HOT)
    assert stale(tmp_path / "code") == []
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "golden.py"),
                           "--code", str(tmp_path / "code"), "--only", *CASES],
                          capture_output=True, text=True, cwd=ROOT, timeout=600, check=False)
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    assert lines[0].startswith(f"code: {tmp_path / 'code'}; compiled: {len(HOT)} of {len(HOT)}")
    ran = [line.split()[0] for line in lines[1:] if " identical " in line]
    assert len(ran) >= len(CASES) and not [line for line in lines if "DIFFERENT" in line]
    # Ray actors, shards and Mininet hosts receive nodes by pickle
    done = subprocess.run([sys.executable, "-c", PICKLED, str(ROOT / "scenarios" /
                                                              "engines-small.yaml")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(tmp_path / "code")},
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(len(HOT)), "same"]


#: Run from a compiled copy: a server and a resolver of a plan pickled and back, and the
#: server's reply to the resolver's first query before and after.
PICKLED = """
import pickle, sys
from sim.compiled import HOT, loaded
for module in HOT:
    __import__(module)
from sim.build.namespace import build_namespace
from sim.build.plan import make_plan
from sim.build.workload import build_jobs
from sim.loading import load_scenario
sc = load_scenario(sys.argv[1])
ns = build_namespace(sc)
plan = make_plan(sc, sc.schemes[0], ns, build_jobs(sc, ns, sc.network.agents))[0]
resolver = next(iter(plan.resolvers.values()))
shipped = pickle.loads(pickle.dumps(resolver))
resolver.discover(plan.requests[0], 0.0)
shipped.discover(plan.requests[0], 0.0)
query, again = resolver.to_send()[0], shipped.to_send()[0]
server = plan.hierarchy.servers[query.dst[0]]
copy = pickle.loads(pickle.dumps(server))
src = ("127.0.53.1", 5353)
same = (again.dst == query.dst and len(again.data) == len(query.data)
        and copy.handle(query.data, src, 0.0, "udp") == server.handle(query.data, src, 0.0,
                                                                      "udp"))
print(len(loaded()), "same" if same else "different")
"""


def _checkout(at: Path) -> Path:
    """A folder shaped like a checkout of the testbed (what checkout_of looks for)."""
    (at / "sim").mkdir(parents=True)
    (at / "sim" / "compiled.py").write_text("")
    (at / "pyproject.toml").write_text('[project]\nname = "tooldns-testbed"\n')
    return at


def test_the_checkout_a_command_runs_in(tmp_path: Path) -> None:
    clone = _checkout(tmp_path / "clone")
    (clone / "sim" / "deep").mkdir()
    assert compiled.checkout_of(clone / "sim" / "deep") == clone.resolve()
    assert compiled.checkout_of(tmp_path) is None
    assert compiled.checkout_of(ROOT / "tests") == ROOT
    # a copy built from another checkout: named when run in this one
    other = _checkout(tmp_path / "other")
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / MANIFEST).write_text(json.dumps({"origin": str(other), "files": {}}))
    why = compiled.mismatch(clone, copy)
    assert why is not None and str(other) in why and str(clone.resolve()) in why
    assert compiled.mismatch(other, copy) is None  # built from the checkout it runs in
    assert compiled.mismatch(tmp_path, copy) is None  # not in a checkout: nothing to say


def test_compile_takes_the_checkout_it_is_run_in(tmp_path: Path) -> None:
    """``tooldns compile`` run in another clone compiles that clone (here a clone without
    the hot modules, so mypyc stops at once), not the installed code."""
    clone = _checkout(tmp_path / "clone")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "sim.cli", "compile", "--out",
                           str(tmp_path / "out")], cwd=clone, env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert f"compiling the checkout {clone.resolve()}" in done.stderr + done.stdout
    assert done.returncode == 1 and "not built" in done.stderr
    assert not (tmp_path / "out").exists()
    refused = subprocess.run([sys.executable, "-m", "sim.cli", "compile", "--origin",
                              str(tmp_path)], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=60, check=False)
    assert refused.returncode == 2 and "not a checkout" in refused.stderr
