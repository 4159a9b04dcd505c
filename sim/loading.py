"""Scenario files read and written: :func:`load_scenario` reads, validates and resolves one
(relative input paths against the file's folder; a bad file raises :class:`ScenarioError`
naming the file, the field and the problem); :func:`resolved_yaml` writes the fully
defaulted scenario saved beside the results."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from sim.errors import ScenarioError, format_errors
from sim.scenario import Scenario

_PATH_FIELDS = (("namespace", "catalog"), ("namespace", "queries"), ("network", "file"),
                ("workload", "arrival", "trace"))


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe loader that rejects a key given twice in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_scenario(path: str | Path) -> Scenario:
    """Read, validate and resolve a scenario file; raise ScenarioError on any problem."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read the file ({exc.strerror})") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f"line {where.line + 1}: " if where is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError(f"{path}: {line}not valid YAML ({problem})") from None
    if data is None:
        raise ScenarioError(f"{path}: (top level): the file is empty")
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}: (top level): a scenario must be a mapping of fields, "
                            f"got {type(data).__name__}")
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(format_errors(path, exc, Scenario)) from None
    return _resolve_paths(scenario, path)


def _resolve_paths(scenario: Scenario, path: Path) -> Scenario:
    data = scenario.model_dump(mode="json")
    base = path.resolve().parent
    for fields in _PATH_FIELDS:
        node = data
        for f in fields[:-1]:
            node = node[f]
        value = node[fields[-1]]
        if value is None:
            continue
        resolved = Path(value) if Path(value).is_absolute() else base / value
        if not resolved.exists():
            raise ScenarioError(f"{path}: {'.'.join(fields)}: file not found ({resolved})")
        node[fields[-1]] = str(resolved)
    if scenario.sweep is not None:
        for key, values in scenario.sweep.grid.items():
            for value in values:
                try:
                    scenario.with_overrides({key: value})
                except ValidationError as exc:
                    first = format_errors(path, exc, Scenario).splitlines()[0].split(": ", 2)[-1]
                    raise ScenarioError(f"{path}: sweep.grid.{key}: value {value!r}: {first}"
                                        ) from None
                except ValueError as exc:
                    raise ScenarioError(f"{path}: sweep.grid.{key}: {exc}") from None
    return Scenario.model_validate(data)


def resolved_yaml(scenario: Scenario) -> str:
    """The fully defaulted scenario, as saved beside the results."""
    return yaml.safe_dump(scenario.model_dump(mode="json"), sort_keys=False)
