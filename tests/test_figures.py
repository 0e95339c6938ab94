"""The report's figures: every point is drawn where it is, inside the frame."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from monitor.report import figures
from monitor.report.figures import Estimate, Panel


def test_md_over_time_never_clips_a_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A thin point far from the reliable ones (CN 2.25 on a panel whose reliable points
    lie within 1) is drawn at 2.25, not at the frame, and every drawn value, each CI
    and the baseline's band included, lies inside the axis limits."""
    saved: list[Figure] = []
    monkeypatch.setattr(figures, "_save", lambda fig, path: saved.append(fig) or path)
    panels = {
        "CN": Panel([(0, Estimate("CN", 0.4, -0.1, 0.9)), (1, Estimate("CN", 0.6, 0.1, 1.0)),
                     (2, Estimate("CN", 2.25, math.nan, math.nan, "thin")),
                     (3, Estimate("CN", -1.75, -4.0, 0.5, "thin"))],
                    baseline=(0.3, -0.2, 0.8)),
        "KR": Panel([(0, Estimate("KR", -0.2, -3.1, 2.7)), (1, Estimate("KR", 0.1, -0.4, 0.6))]),
    }
    figures.trend_panels(tmp_path / "t.png", panels, title="t", ylabel="MD",
                         xlabels=["a", "b", "c", "d"])
    [fig] = saved
    axes = {ax.get_title(): ax for ax in fig.axes if ax.get_visible()}
    for name, panel in panels.items():
        ax = axes[name]
        lo, hi = ax.get_ylim()
        drawn = [y for line in ax.get_lines() if isinstance(line, Line2D)
                 and line.get_marker() not in (None, "None", "")
                 for y in line.get_ydata()]
        for _, e in panel.points:
            assert e.value in drawn, (name, e.value, drawn)  # where it is, not at the edge
            assert lo < e.value < hi
            if e.mark != "thin":  # the CI band is drawn for reliable points
                assert lo <= e.lo and e.hi <= hi
        if panel.baseline is not None:
            assert lo <= min(panel.baseline) and max(panel.baseline) <= hi
        assert (lo, hi) == figures.panel_limits(panel)
