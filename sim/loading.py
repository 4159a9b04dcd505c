"""Scenario files read and written: :func:`load_scenario` reads, validates and resolves one
(relative input paths against the file's folder; a bad file raises :class:`ScenarioError`
naming the file, the field and the problem) and checks what building it would take
(:mod:`sim.limits`); :func:`resolved_yaml` writes the fully defaulted scenario saved beside
the results. Files are read with the bounded YAML loader of :mod:`sim.yamlfile`.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from sim.errors import ScenarioError, format_errors, shown
from sim.limits import check_scenario, check_sweep_size
from sim.scenario import Scenario
from sim.yamlfile import read_yaml

_PATH_FIELDS = (("namespace", "catalog"), ("namespace", "queries"), ("network", "file"),
                ("workload", "arrival", "trace"))

def read_scenario(path: str | Path) -> Scenario:
    """Read, validate and resolve a scenario file, without :mod:`sim.limits`' budget check
    (callers that apply overrides first check the result); raise ScenarioError."""
    path = Path(path)
    data = read_yaml(path)
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


def load_scenario(path: str | Path) -> Scenario:
    """Read, validate and resolve a scenario file and check what building it would take
    (:func:`sim.limits.check_scenario`); raise ScenarioError on any problem."""
    scenario = read_scenario(path)
    check_scenario(scenario, str(path))
    return scenario


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
        check_sweep_size(scenario.sweep.grid, str(path))
        for key, values in scenario.sweep.grid.items():
            for value in values:
                try:
                    scenario.with_overrides({key: value})
                except ValidationError as exc:
                    first = format_errors(path, exc, Scenario).splitlines()[0].split(": ", 2)[-1]
                    raise ScenarioError(f"{path}: sweep.grid.{key}: value {shown(value)}: "
                                        f"{first}") from None
                except ValueError as exc:
                    raise ScenarioError(f"{path}: sweep.grid.{key}: {exc}") from None
    return Scenario.model_validate(data)


def resolved_yaml(scenario: Scenario) -> str:
    """The fully defaulted scenario, as saved beside the results."""
    return yaml.safe_dump(scenario.model_dump(mode="json"), sort_keys=False)
