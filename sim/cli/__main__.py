"""``python3 -m sim.cli``: the ``tooldns`` command without installing it."""

from sim.cli.main import main

raise SystemExit(main())
