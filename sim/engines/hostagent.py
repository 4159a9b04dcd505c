"""Host agent: serves one Mininet host's part of a run plan (``python3 -m sim.engines.hostagent``).

Started by :mod:`sim.engines.mininet` inside the host's network namespace with the path of
a pickled :class:`sim.engines.nodehost.HostPart`. It reads one command per line on standard input
and answers each with one JSON line on standard output (nothing else is printed there):

``start`` → nodes served · ``origin WALL`` · ``warm`` → warm time · ``replay T0_WALL`` →
jobs completed · ``hangup`` (clients close their connections) · ``finish PATH`` → the
:class:`sim.engines.base.EngineOutput` piece pickled to PATH, then the agent exits. A failure
answers ``{"error": …}`` and exits with status 1.
"""

from __future__ import annotations

import asyncio
import gc
import json
import pickle
import sys
import traceback
from pathlib import Path

from sim.engines.nodehost import NodeHost, quiet_process


async def serve(part_path: str) -> int:
    host = NodeHost(pickle.loads(Path(part_path).read_bytes()))
    quiet_process()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    def answer(value: object) -> None:
        sys.stdout.write(json.dumps(value) + "\n")
        sys.stdout.flush()

    while line := (await reader.readline()).decode().strip():
        cmd, _, arg = line.partition(" ")
        try:
            if cmd == "start":
                answer({"ok": await host.start()})
            elif cmd == "origin":
                await host.set_origin(float(arg))
                answer({"ok": True})
            elif cmd == "warm":
                answer({"ok": await host.warm()})
            elif cmd == "replay":
                answer({"ok": await host.replay(float(arg))})
            elif cmd == "hangup":
                await host.hang_up()
                answer({"ok": True})
            elif cmd == "finish":
                gc.enable()
                piece = await host.finish()
                Path(arg).write_bytes(pickle.dumps(piece))
                answer({"ok": True})
                return 0
            else:
                raise ValueError(f"unknown command {cmd!r}")
        except Exception:
            answer({"error": traceback.format_exc()})
            return 1
    return 0  # the driver went away


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: python3 -m sim.engines.hostagent PART.pickle", file=sys.stderr)
        return 2
    return asyncio.run(serve(sys.argv[1]))


if __name__ == "__main__":
    sys.exit(main())
