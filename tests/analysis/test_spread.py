"""A sweep's console and report lead with the metrics the grid changes most: spread is the
range over the largest magnitude, within each scheme; constant metrics are left out."""

from __future__ import annotations

import pandas as pd

from analysis.pivot import by_spread, spread


def test_metrics_are_ranked_by_what_the_grid_changes() -> None:
    table = pd.DataFrame({
        "point": ["a", "a", "b", "b"], "scheme": ["x", "y", "x", "y"],
        "success": [1.0, 1.0, 1.0, 1.0],  # constant: left out
        "median_latency_ms": [10.0, 200.0, 20.0, 210.0],  # x doubles: spread 0.5
        "mean_bytes_down": [500, 4000, 510, 4010],  # small change within a scheme
    })
    assert spread(pd.Series([10.0, 20.0])) == 0.5 and spread(pd.Series([], dtype=float)) == 0
    # the schemes' gap (200 vs 10 ms) is not the grid's doing: ranked within each scheme
    assert by_spread(table) == ["median_latency_ms", "mean_bytes_down"]
    assert by_spread(table, ("mean_bytes_down", "success")) == ["mean_bytes_down"]
