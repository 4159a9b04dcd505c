"""Every command, link and path that README.md and docs/*.md show stays true.

Commands in ``bash`` blocks: ``tooldns ...`` lines are parsed by the real CLI parser, and the
cheap ones (``validate``, ``schema``, ``run --show-config`` in place of a run) executed;
``python3 -m M`` needs module M, ``python3 FILE`` the file, and the flags and sub-commands
shown must appear in its source; ``python3 -c CODE`` is run. Inline ``tooldns CMD --flag``
spans need the command and its flags. Relative links, repo paths in backticks and dotted
``nodes.``/``sim.``/``topologies.``/``analysis.`` references must exist.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import importlib
import importlib.util
import io
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from sim.cli.main import build_parser, main

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TOP = ("nodes/", "sim/", "topologies/", "analysis/", "scenarios/", "benchmarks/",
       "notebooks/", "tests/", "docs/", ".ci/")
PLACEHOLDER = re.compile(r"[<>…*]|\bFILE\b|\bDIR\b|\bADDR(ESS)?\b|\bN\b|\[")


def _blocks(text: str) -> list[str]:
    """Command lines of the ``bash`` blocks: continuations joined, heredoc bodies skipped."""
    lines: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        heredoc: str | None = None
        pending = ""
        for raw in block.splitlines():
            if heredoc is not None:
                heredoc = None if raw.strip() == heredoc else heredoc
                continue
            if m := re.search(r"<<'?(\w+)'?", raw):
                heredoc = m.group(1)
            line = pending + raw.strip()
            if line.endswith("\\"):
                pending = line[:-1] + " "
                continue
            pending = ""
            if line:
                lines.append(line)
    return lines


def _strip(line: str) -> str:
    """The command itself: no comment, ``sudo``, setup prefix, background ``&`` or redirect."""
    line = re.sub(r"\s+#\s.*$", "", line).strip()
    line = line.removeprefix("bash .ci/setup && ")
    line = re.sub(r"^sudo\s+", "", line)
    line = re.sub(r"\s*&$", "", line)
    return re.sub(r"\s*>\s*\S+$", "", line)


def _commands() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for line in _blocks(page.read_text()):
            for sub in re.findall(r"\$\((python3 -c \"[^\"]*\")\)", line):
                found.append((page.name, sub))
            command = _strip(line)
            if command.startswith(("tooldns ", "python3 ")):
                found.append((page.name, command))
    return found


COMMANDS = _commands()


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("tooldns has no sub-commands")


PARSER = build_parser()
SUB = _subparsers(PARSER)


def _parses(argv: list[str]) -> str:
    """'' when the CLI parser accepts ``argv`` (``--help`` included), else its message."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(argv)
    except SystemExit as stop:
        return "" if stop.code == 0 else err.getvalue()
    return ""


def _expand(argv: list[str]) -> list[str]:
    out: list[str] = []
    for arg in argv:
        hits = sorted(glob.glob(arg, root_dir=ROOT)) if "*" in arg else []
        out.extend(hits or [arg])
    return out


def test_pages_show_commands() -> None:
    assert len(COMMANDS) > 40
    assert any(c.startswith("tooldns run scenarios/quickstart.yaml") for _, c in COMMANDS)


@pytest.mark.parametrize(("page", "command"), COMMANDS, ids=[f"{p}:{c[:60]}" for p, c in COMMANDS])
def test_command(page: str, command: str, tmp_path: Path) -> None:
    if command.startswith("python3 -c "):
        code = shlex.split(command)[2]
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0 and out.stdout.strip(), out.stderr
        return
    argv = _expand(shlex.split(command))
    if argv[0] == "tooldns":
        _tooldns(argv[1:], tmp_path)
    else:
        _python(argv[1:])


def _tooldns(argv: list[str], tmp_path: Path) -> None:
    problem = _parses(argv)
    assert not problem, problem
    files = [a for a in argv if a.endswith((".yaml", ".yml"))]
    for name in files:
        if "/" in name and not PLACEHOLDER.search(name):
            assert (ROOT / name).is_file(), name
    cheap: list[str] | None = None
    if argv[0] in ("validate", "schema"):
        cheap = argv
    elif argv[0] == "run" and files and "--shards" not in argv:
        cheap = [*argv, "--show-config"] if "--show-config" not in argv else argv
    if cheap is None:
        return
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([*cheap, "-q"])
    assert status == 0, err.getvalue()
    assert out.getvalue().strip()


def _python(argv: list[str]) -> None:
    if argv[0] == "-m":
        module, args = argv[1], argv[2:]
        if module == "pytest":
            for arg in args:
                if arg.startswith("tests/"):
                    assert (ROOT / arg.split("::")[0]).is_file(), arg
            return
        spec = importlib.util.find_spec(module)
        assert spec and spec.origin, f"no module {module}"
        source = Path(spec.origin).read_text()
    else:
        path, args = ROOT / argv[0], argv[1:]
        assert path.is_file(), argv[0]
        source = path.read_text()
    if "\ndef build_parser(" in source and argv[0] != "-m":  # parse with the script's own parser
        script = importlib.util.spec_from_file_location(f"_doc_{path.stem}", path)
        assert script is not None and script.loader is not None
        module_ = importlib.util.module_from_spec(script)
        script.loader.exec_module(module_)
        module_.build_parser().parse_args(args)  # SystemExit(2) on an unknown flag or word
        return
    for arg in args:
        if arg.startswith("-") and not arg.startswith("--inside"):
            flag = arg.split("=")[0]
            assert f'"{flag}"' in source or f"'{flag}'" in source, f"{flag} not in {argv[:2]}"
    if args and re.fullmatch(r"[a-z][a-z0-9-]*", args[0]):  # a sub-command word
        word = args[0]
        assert f'"{word}"' in source or f"'{word}'" in source or f"cmd_{word}" in source, word


INLINE = sorted({(p.name, m) for p in PAGES
                 for m in re.findall(r"`(?:sudo )?(tooldns [^`]*)`", p.read_text())})


@pytest.mark.parametrize(("page", "span"), INLINE, ids=[f"{p}:{s[:50]}" for p, s in INLINE])
def test_inline_command(page: str, span: str) -> None:
    words = span.split()[1:]
    if words[0] == "--help":
        return
    assert words[0] in SUB, f"{page}: no command {words[0]!r}"
    known = SUB[words[0]]._option_string_actions
    for word in words[1:]:
        flag = word.strip("[]").split("=")[0]
        if flag.startswith("-"):
            assert flag in known, f"{page}: tooldns {words[0]} has no {flag}"


def _links(text: str) -> list[str]:
    return [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"\w+:", t)]


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_links_and_paths_exist(page: Path) -> None:
    text = page.read_text()
    missing = []
    for link in _links(text):
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        if not path.exists():
            missing.append(link)
        elif anchor and path.suffix == ".md":
            body = path.read_text()
            heads = {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-")
                     for h in re.findall(r"^#+ (.*)$", body, re.M)}
            if anchor not in heads and f'id="{anchor}"' not in body:
                missing.append(link)
    for span in re.findall(r"`([^`\s]+)`", text):
        span = span.rstrip(".,;:")
        if span.startswith(TOP) or span in ("README.md", "Vagrantfile", "pyproject.toml"):
            if PLACEHOLDER.search(span.replace("*", "")) or span.startswith("results/"):
                continue
            if not (glob.glob(span, root_dir=ROOT) if "*" in span else (ROOT / span).exists()):
                missing.append(span)
    assert not missing, f"{page.name}: {missing}"


def _dotted(text: str) -> set[str]:
    names = re.findall(r"`((?:nodes|sim|topologies|analysis)(?:\.\w+)+)", text)
    files = (".py", ".md", ".csv", ".json", ".png", ".parquet", ".yaml", ".pcap", ".html")
    return {n for n in names if not n.endswith(files)}


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_dotted_references_resolve(page: Path) -> None:
    missing = []
    for name in sorted(_dotted(page.read_text())):
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):
            module = ".".join(parts[:cut])
            with contextlib.suppress(ImportError):
                if importlib.util.find_spec(module) is not None:
                    break
        else:
            missing.append(name)
            continue
        obj: object = importlib.import_module(module)
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                missing.append(name)
                break
            obj = getattr(obj, attr)
    assert not missing, f"{page.name}: {missing}"


def test_readme_is_a_front_door() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"docs/{page.name}" in text, f"README does not point to docs/{page.name}"


def test_architecture_names_every_folder() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    for pkg in ("nodes", "sim", "topologies", "analysis"):
        for init in sorted((ROOT / pkg).rglob("__init__.py")):
            folder = init.parent.relative_to(ROOT).as_posix() + "/"
            assert f"`{folder}`" in text, f"docs/architecture.md does not describe {folder}"


def test_architecture_modules_exist() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    missing = []
    for folder, row in re.findall(r"^\| `([\w/]+/)` \| (.*) \|$", text, re.M):
        for module in re.findall(r"`(\w+\.py)`", row):
            if not (ROOT / folder / module).is_file():
                missing.append(folder + module)
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"
