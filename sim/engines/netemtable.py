"""netem delay tables made from a link's :class:`topologies.links.DelayModel`, so that kernel
links delay packets with the simulation's distribution, not netem's default.

Given a jitter and no table, netem draws delays uniformly in mean ± jitter; the simulation
draws a truncated normal, a lognormal or an empirical distribution. netem draws a delay as
``mu + sigma * t / 8192`` with ``t`` picked at random per packet from a table of int16 that
``tc`` reads from ``$TC_LIB_DIR/NAME.dist``. The table here is the model's own inverse CDF
at :data:`TABLE_SIZE` evenly spaced probabilities, standardised by its mean and std: the
simulation's distribution up to the table's resolution and the int16 range (beyond
``mean ± 4 std`` values are clipped; only a lognormal's far right tail reaches that).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from topologies.links import DelayModel, LinkSpec

SCALE = 8192  # netem's NETEM_DIST_SCALE
TABLE_SIZE = 4096
INT16 = (-32768, 32767)


def table(model: DelayModel, size: int = TABLE_SIZE) -> list[int]:
    """``size`` values t with ``mean + std * t / SCALE`` = the model's quantiles."""
    if model.is_constant or model.std <= 0:
        raise ValueError("a constant delay needs no table")
    out = []
    for i in range(size):
        x = model.quantile((i + 0.5) / size)
        t = round((x - model.mean) / model.std * SCALE)
        out.append(min(max(t, INT16[0]), INT16[1]))
    return out


def table_name(model: DelayModel) -> str:
    """A name for the model's table (the same model, the same file)."""
    key = repr((model.dist, model.mean, model.std, model.samples)).encode()
    return f"tooldns-{model.dist}-{hashlib.sha256(key).hexdigest()[:12]}"


def write_table(model: DelayModel, folder: Path) -> str:
    """Write ``folder/NAME.dist`` (tc's format: ``#`` comments, then whitespace-separated
    integers) and return NAME."""
    name = table_name(model)
    values = table(model)
    lines = [f"# {model.dist} delay, mean {model.mean} s, std {model.std} s "
             f"(sim.engines.netemtable)"]
    lines += [" ".join(map(str, values[i:i + 16])) for i in range(0, len(values), 16)]
    (folder / f"{name}.dist").write_text("\n".join(lines) + "\n")
    return name


def netem_args(link: LinkSpec, name: str | None) -> list[str]:
    """netem's parameters for ``link``: delay (and std with the table ``name``), loss."""
    delay = link.delay
    args = ["delay", f"{delay.mean * 1e6:.0f}us"]
    if name is not None:
        args += [f"{delay.std * 1e6:.0f}us", "distribution", name]
    if link.loss:
        args += ["loss", f"{link.loss * 100:.6f}%"]
    return args


def set_distribution(intf: str, link: LinkSpec, lib_dir: Path) -> None:
    """Give the netem qdisc on ``intf`` (installed by Mininet's ``TCLink``) the delay
    table of ``link``'s model; raises ``RuntimeError`` if ``tc`` refuses."""
    name = write_table(link.delay, lib_dir)
    shown = subprocess.run(["tc", "qdisc", "show", "dev", intf], capture_output=True,
                           text=True, check=True).stdout
    line = next((ln.split() for ln in shown.splitlines() if ln.startswith("qdisc netem ")), None)
    if line is None:
        raise RuntimeError(f"netem: no netem qdisc on {intf}: {shown.strip()!r}")
    handle = line[2]
    where = ["root"] if "root" in line else ["parent", line[line.index("parent") + 1]]
    limit = line[line.index("limit") + 1] if "limit" in line else "1000"
    cmd = ["tc", "qdisc", "change", "dev", intf, *where, "handle", handle, "netem",
           "limit", limit, *netem_args(link, name)]
    done = subprocess.run(cmd, capture_output=True, text=True,
                          env={**os.environ, "TC_LIB_DIR": str(lib_dir)})
    if done.returncode != 0:
        raise RuntimeError(f"netem: {' '.join(cmd)}: {done.stderr.strip()}")
