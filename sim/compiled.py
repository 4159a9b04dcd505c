"""The compiled build: the simulation's hot modules compiled by mypyc, in a copy of the code.

:func:`build` (``tooldns compile``) copies the packages (``nodes``, ``sim``, ``topologies``,
``analysis``) and ``pyproject.toml`` (whose mypy settings mypyc reads) into a folder,
``build/compiled`` by default, compiles :data:`HOT` there with mypyc and writes
:data:`MANIFEST`: the modules, where the copy came from and a digest of every copied file.
Put that folder first on ``PYTHONPATH`` to run from it; nothing changes for runs without it.
The same scenario and seed give the same bytes compiled or not: ``benchmarks/golden.py
--compiled`` checks every shipped case, ``tests/sim/test_compiled.py`` some of them.

Compiled code checks annotations when it runs (a ``bytearray`` where ``bytes`` is annotated
raises ``TypeError``), so the hot modules are typed exactly, not only to mypy's satisfaction.

``tooldns compile`` compiles the checkout it is run from (:func:`checkout_of` the working
folder; the installed code only outside any checkout), not whichever one is installed. A
copy does not follow later edits of its origin: :func:`stale` names the files that changed
since, and ``tooldns`` warns when it runs from a stale copy or from a copy of another
checkout than the one it is run in (:func:`mismatch`); the ``provenance`` of every summary
lists the modules that ran compiled (:func:`loaded`).
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

#: The modules compiled: the codec, the resolver, the authoritative server, the stub, the
#: path model and link draws, the simpy engine's message path, the wire cost model, and the
#: records of each discovery (what a simulated discovery spends its time in).
HOT: tuple[str, ...] = (
    "nodes.dns.message", "nodes.dns.codec", "nodes.dns.wire", "nodes.dns.ids",
    "nodes.resolver.core", "nodes.resolver.walk", "nodes.resolver.caches",
    "nodes.resolver.infra", "nodes.resolver.merge", "nodes.resolver.clients",
    "nodes.resolver.types",
    "nodes.authoritative.server", "nodes.authoritative.fit", "nodes.authoritative.answers",
    "nodes.authoritative.zonestate", "nodes.bm25",
    "nodes.agent.stub", "topologies.paths", "topologies.uniforms",
    "sim.engines.simpy", "sim.accounting",
    "sim.run.records", "sim.run.spool", "sim.run.recorder")
PACKAGES = ("nodes", "sim", "topologies", "analysis")
MANIFEST = "COMPILED.json"
HERE = Path(__file__).resolve().parents[1]  # the tree this code runs from
_BUILT = tuple(importlib.machinery.EXTENSION_SUFFIXES)


#: The build script: mypyc's own (``python -m mypyc``) with ``separate=True``, one
#: extension (one C file) per module, so the C compiler runs on every core. One group in
#: one 15 MB C file, as ``mypyc`` makes it, compiles on one core (58 s against 36 s for
#: the tests' -O0 build on this 2-core machine; HISTORY.md §30). A call between modules goes
#: through the callee's export table, which the yardstick does not tell apart.
SETUP = """from setuptools import setup
from mypyc.build import mypycify

setup(name="tooldns-compiled",
      ext_modules=mypycify({sources!r}, opt_level="{opt}", separate=True))
"""


class CompileError(RuntimeError):
    """mypyc (or the C compiler) failed; the message ends with its output."""


def checkout_of(path: Path) -> Path | None:
    """The testbed checkout ``path`` is in (its own folder or a parent holding this
    project's ``pyproject.toml`` and ``sim/compiled.py``), or None."""
    path = path.resolve()
    for folder in (path, *path.parents):
        project = folder / "pyproject.toml"
        if project.is_file() and (folder / "sim" / "compiled.py").is_file():
            try:
                text = project.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if 'name = "tooldns-testbed"' in text:
                return folder
    return None


def _files(root: Path) -> list[str]:
    """The files a copy holds, relative to ``root``: the packages' sources and data (no
    caches, no compiled modules) and ``pyproject.toml``."""
    out = ["pyproject.toml"] if (root / "pyproject.toml").is_file() else []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*")):
            if (path.is_file() and "__pycache__" not in path.parts
                    and not path.name.endswith((*_BUILT, ".c", ".h"))):
                out.append(path.relative_to(root).as_posix())
    return out


def _digests(root: Path, files: list[str]) -> dict[str, str]:
    return {f: hashlib.sha256((root / f).read_bytes()).hexdigest() for f in files}


def build(out: Path, origin: Path = HERE, modules: tuple[str, ...] = HOT,
          log: Callable[[str], None] | None = None, opt_level: int = 3) -> dict:
    """Copy ``origin``'s code into ``out`` and compile ``modules`` there; returns the
    manifest. ``out`` is replaced only when it is a compiled copy (or empty) and only once
    the new copy is complete; a failed build leaves it as it was. ``opt_level`` is the C
    compiler's (0 builds faster and runs slower: the same semantics, for tests)."""
    out = out.resolve()
    if out.exists() and any(out.iterdir()) and not (out / MANIFEST).is_file():
        raise FileExistsError(f"{out}: exists and is not a compiled copy ({MANIFEST} missing)")
    started = time.perf_counter()
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    files = _files(origin)
    for f in files:
        (partial / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(origin / f, partial / f)
    sources = [m.replace(".", "/") + ".py" for m in modules]
    if log:
        log(f"compiling {len(modules)} modules with mypyc in {partial} …")
    (partial / "build").mkdir()
    (partial / "build" / "setup.py").write_text(SETUP.format(sources=sources, opt=opt_level))
    jobs = str(max(1, min(len(sources), os.cpu_count() or 1)))
    done = subprocess.run([sys.executable, "build/setup.py", "build_ext", "--inplace",
                           "--parallel", jobs], cwd=partial, capture_output=True, text=True,
                          check=False)
    missing = [m for m in modules if not _compiled_file(partial, m)]
    if done.returncode != 0 or missing:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-20:])
        shutil.rmtree(partial, ignore_errors=True)
        raise CompileError(f"mypyc failed (exit {done.returncode}; not built: "
                           f"{', '.join(missing) or 'none'}):\n{tail}")
    shutil.rmtree(partial / "build", ignore_errors=True)  # mypyc's C sources and objects
    from mypy.version import __version__ as mypy_version

    manifest = {"origin": str(origin), "modules": list(modules), "opt_level": opt_level,
                "mypy": mypy_version, "python": platform.python_version(),
                "built_s": round(time.perf_counter() - started, 1),
                "files": _digests(partial, files)}  # what was compiled, not what is there now
    (partial / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    return manifest


def _compiled_file(root: Path, module: str) -> Path | None:
    """The extension module built for ``module`` under ``root``, if any."""
    folder = root.joinpath(*module.split(".")[:-1])
    stem = module.rsplit(".", 1)[-1]
    return next((folder / (stem + s) for s in _BUILT if (folder / (stem + s)).is_file()), None)


def manifest(root: Path = HERE) -> dict | None:
    """The manifest of the compiled copy at ``root`` (None: ``root`` is not one)."""
    path = root / MANIFEST
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else None


def stale(root: Path = HERE) -> list[str] | None:
    """The files of the copy at ``root`` that differ from its origin now (added, removed or
    changed there since the build); None when ``root`` is not a compiled copy or its origin
    is gone."""
    data = manifest(root)
    if data is None:
        return None
    origin = Path(str(data.get("origin", "")))
    if not origin.is_dir():
        return None
    recorded: dict[str, str] = data.get("files", {})
    now = _digests(origin, _files(origin))
    return sorted(f for f in recorded.keys() | now.keys() if recorded.get(f) != now.get(f))


def mismatch(cwd: Path, root: Path = HERE) -> str | None:
    """Why running the compiled copy at ``root`` from ``cwd`` is not running ``cwd``'s
    checkout (its origin is another folder), or None (not a copy, or not in a checkout,
    or the same one)."""
    data = manifest(root)
    here = checkout_of(cwd)
    if data is None or here is None:
        return None
    origin = Path(str(data.get("origin", "")))
    if origin.resolve() == here:
        return None
    return (f"running from the compiled copy {root}, built from {origin}, not from this "
            f"checkout {here}: this checkout's edits are not in the run (tooldns compile "
            f"here builds it)")


def loaded() -> list[str]:
    """The hot modules this process has imported compiled."""
    return [m for m in HOT if str(getattr(sys.modules.get(m), "__file__", "")).endswith(_BUILT)]
