"""PNG figures for reports and benchmarks: the only module that imports matplotlib.

Everything renders with the Agg backend (no display, no fonts fetched); the
caller gives plain numbers, so the report and the bench scripts share one
look without each of them learning matplotlib.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: headless machines have no display

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

# Figures carry codes and English labels only: a slim container has no CJK
# font, and native option names belong in the HTML tables, not in pixels.
_DPI = 110


@dataclass(frozen=True)
class Series:
    """One line: y against x, optionally with a confidence band lo..hi."""

    label: str
    x: Sequence[float]
    y: Sequence[float]
    lo: Sequence[float] | None = None
    hi: Sequence[float] | None = None


def line_chart(path: Path, series: Sequence[Series], *, title: str, xlabel: str, ylabel: str,
               hlines: Mapping[str, float] | None = None, logx: bool = False,
               logy: bool = False) -> Path:
    """Lines with optional CI bands and labelled horizontal reference lines."""
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for s in series:
        (line,) = ax.plot(list(s.x), list(s.y), marker="o", markersize=3, label=s.label)
        if s.lo is not None and s.hi is not None:
            ax.fill_between(list(s.x), list(s.lo), list(s.hi), alpha=0.2,
                            color=line.get_color(), linewidth=0)
    for label, value in (hlines or {}).items():
        ax.axhline(value, linestyle="--", linewidth=1, color="grey")
        ax.annotate(label, (0.01, value), xycoords=("axes fraction", "data"),
                    fontsize=8, color="grey", va="bottom")
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    _finish(ax, title, xlabel, ylabel, legend=len(series) > 1)
    return _save(fig, path)


def small_multiples(path: Path, panels: Mapping[str, tuple[Series, float | None]], *,
                    title: str, ylabel: str, xlabels: Sequence[str] = ()) -> Path:
    """One small line chart per key (e.g. per country): its series with CI band,
    and a dashed reference line (the baseline) when given. Shared y axis.
    `xlabels`, when given, name the x positions 0..n-1 (e.g. run dates)."""
    n = max(1, len(panels))
    cols = min(3, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 2.5 * rows), sharey=True,
                             squeeze=False)
    for ax, (name, (s, ref)) in zip(axes.flat, panels.items(), strict=False):
        ax.plot(list(s.x), list(s.y), marker="o", markersize=3)
        if s.lo is not None and s.hi is not None:
            ax.fill_between(list(s.x), list(s.lo), list(s.hi), alpha=0.2, linewidth=0)
        if ref is not None:
            ax.axhline(ref, linestyle="--", linewidth=1, color="grey", label="baseline")
        ax.axhline(0, color="black", linewidth=0.5)
        ax.set_title(name, fontsize=9)
        ax.grid(alpha=0.3)
        if xlabels:
            ticks = sorted({0, len(xlabels) - 1, (len(xlabels) - 1) // 2})
            ax.set_xticks(ticks)
            ax.set_xticklabels([xlabels[t] for t in ticks], fontsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel, fontsize=8)
    fig.suptitle(title, fontsize=11)
    return _save(fig, path)


def bar_chart(path: Path, labels: Sequence[str], groups: Mapping[str, Sequence[float]], *,
              title: str, ylabel: str,
              errors: Mapping[str, Sequence[tuple[float, float]]] | None = None) -> Path:
    """Grouped bars (one group per label), errors given as (lo, hi) per bar."""
    fig, ax = plt.subplots(figsize=(max(6.0, 0.6 * len(labels) * max(1, len(groups))), 4.2))
    width = 0.8 / max(1, len(groups))
    for i, (name, values) in enumerate(groups.items()):
        xs = [j + i * width for j in range(len(labels))]
        err = None
        if errors and name in errors:
            err = [[max(0.0, v - lo) for v, (lo, _) in zip(values, errors[name], strict=True)],
                   [max(0.0, hi - v) for v, (_, hi) in zip(values, errors[name], strict=True)]]
        ax.bar(xs, list(values), width=width, label=name, yerr=err, capsize=2)
    ax.set_xticks([j + width * (len(groups) - 1) / 2 for j in range(len(labels))])
    ax.set_xticklabels(list(labels), rotation=30, ha="right")
    ax.axhline(0, color="black", linewidth=0.6)
    _finish(ax, title, "", ylabel, legend=len(groups) > 1)
    return _save(fig, path)


def violins(path: Path, groups: Mapping[str, Sequence[float]], *, title: str, ylabel: str,
            marks: Mapping[str, Sequence[float]] | None = None) -> Path:
    """One violin per group; `marks` overlays points (the local option's scores)."""
    names = [k for k, v in groups.items() if len(v) > 1]
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(names)), 4.2))
    if names:
        ax.violinplot([list(groups[k]) for k in names], showmedians=True)
        labelled = False
        for i, k in enumerate(names, start=1):
            pts = list((marks or {}).get(k, []))
            if pts:
                # A small deterministic jitter so the marks do not stack on one pixel.
                xs = [i + 0.12 * (((j * 37) % 11) / 10 - 0.5) for j in range(len(pts))]
                ax.scatter(xs, pts, s=8, color="crimson", alpha=0.6, zorder=3,
                           label=None if labelled else "local option")
                labelled = True
        ax.set_xticks(range(1, len(names) + 1))
        ax.set_xticklabels(names)
    else:
        ax.text(0.5, 0.5, "not enough scores", ha="center", transform=ax.transAxes)
    _finish(ax, title, "", ylabel, legend=bool(marks) and bool(names))
    return _save(fig, path)


def _finish(ax: Axes, title: str, xlabel: str, ylabel: str, *, legend: bool) -> None:
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    # metadata without the software/date keys: the same data gives the same bytes.
    fig.savefig(path, dpi=_DPI, format="png", metadata={"Software": None})
    plt.close(fig)
    return path
