"""PNG figures for reports and benchmarks: the only module that imports matplotlib.

Everything renders with the Agg backend (no display, no fonts fetched); the
caller gives plain numbers, so the report and the bench scripts share one
look without each of them learning matplotlib.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: headless machines have no display

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

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


@dataclass(frozen=True)
class Estimate:
    """A point with its 95% CI (NaN: none) and how it is drawn: "sig" (significant by
    the caller's rule), "plain", or "thin" (under the minimum n: grey, never marked)."""

    label: str
    value: float
    lo: float
    hi: float
    mark: str = "plain"


_COLOR = {"sig": "crimson", "plain": "#222222", "thin": "#aaaaaa"}


def _estimate(ax: Axes, e: Estimate, y: float, *, color: str | None = None) -> None:
    c = color or _COLOR[e.mark]
    if math.isfinite(e.lo) and math.isfinite(e.hi):
        ax.plot([e.lo, e.hi], [y, y], color=c, linewidth=1.6 if e.mark == "sig" else 1.1)
    ax.plot([e.value], [y], marker="o", markersize=6, color=c,
            markerfacecolor="white" if e.mark == "thin" else c)
    if e.mark == "sig":
        ax.annotate("*", (e.hi if math.isfinite(e.hi) else e.value, y), xytext=(4, -4),
                    textcoords="offset points", color=c, fontsize=12)


def forest(path: Path, rows: Sequence[Estimate], *, title: str, xlabel: str,
           reference: Mapping[str, Estimate] | None = None,
           reference_label: str = "baseline", legend: Mapping[str, str] | None = None,
           vlines: Mapping[str, float] | None = None) -> Path:
    """One row per estimate, top to bottom, with its CI; `reference` (by label) is drawn
    just below its row in blue (e.g. the baseline). A line at 0; `vlines` labelled
    dashed lines (e.g. a margin); `legend`: what each mark means, when not the report's
    significant / CI includes 0 / too few triplets."""
    fig, ax = plt.subplots(figsize=(6.4, 0.9 + 0.42 * max(1, len(rows))))
    for i, e in enumerate(rows):
        _estimate(ax, e, -i)
        ref = (reference or {}).get(e.label)
        if ref is not None:
            _estimate(ax, ref, -i - 0.3, color="#4a7ab5")
    ax.axvline(0, color="black", linewidth=0.6)
    for label, x in (vlines or {}).items():
        ax.axvline(x, color="grey", linestyle="--", linewidth=0.8)
        ax.annotate(label, (x, 0.99), xycoords=("data", "axes fraction"), fontsize=7,
                    color="grey", ha="center", va="top")
    ax.set_yticks([-i for i in range(len(rows))])
    ax.set_yticklabels([e.label for e in rows], fontsize=8)
    ax.set_ylim(-len(rows) + 0.4, 0.6)
    words = legend or {"sig": "significant (*)", "plain": "CI includes 0",
                       "thin": "too few triplets"}
    handles = [Line2D([], [], color=_COLOR[mark], marker="o", label=text,
                      markerfacecolor="white" if mark == "thin" else _COLOR[mark])
               for mark, text in words.items()]
    if reference:
        handles.append(Line2D([], [], color="#4a7ab5", marker="o", label=reference_label))
    _finish(ax, title, xlabel, "", legend=False)
    if vlines:  # under the axes: inside, it hid a margin's line and label
        ax.legend(handles=handles, fontsize=7, loc="upper center", ncol=len(handles),
                  bbox_to_anchor=(0.5, -0.5 / (0.9 + 0.42 * max(1, len(rows)))),
                  frameon=False)
    else:
        ax.legend(handles=handles, fontsize=7, loc="best")
    return _save(fig, path)


def heatmap(path: Path, rows: Sequence[str], cols: Sequence[str],
            values: Sequence[Sequence[float]], *, title: str, label: str,
            outlined: Sequence[tuple[int, int]] = ()) -> Path:
    """A diverging colour grid centred on 0 (NaN: grey), the `outlined` (row, col)
    cells boxed (e.g. each country's own language)."""
    grid = np.array(values, dtype=float).reshape(len(rows), len(cols))
    finite = grid[np.isfinite(grid)]
    top = float(np.max(np.abs(finite))) if finite.size else 1.0
    fig, ax = plt.subplots(figsize=(1.2 + 0.62 * max(1, len(cols)),
                                    1.2 + 0.42 * max(1, len(rows))))
    cmap = plt.get_cmap("RdBu_r").with_extremes(bad="#dddddd")
    im = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=-top or -1, vmax=top or 1,
                   aspect="auto")
    for r, c in outlined:
        ax.add_patch(Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, edgecolor="black",
                               linewidth=1.4))
    ax.set_xticks(range(len(cols)))
    ax.set_xticklabels(list(cols), fontsize=8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(list(rows), fontsize=8)
    ax.set_xlabel("asked in", fontsize=9)
    ax.set_ylabel("option country", fontsize=9)
    ax.set_title(title, fontsize=10)
    fig.colorbar(im, ax=ax, label=label, shrink=0.85)
    return _save(fig, path)


@dataclass(frozen=True)
class Panel:
    """One country's MD over runs: x positions, estimates (mark "thin" = under the
    minimum n), the baseline's (value, lo, hi), and shaded spans (x0, x1, state)."""

    points: Sequence[tuple[int, Estimate]]
    baseline: tuple[float, float, float] | None = None
    spans: Sequence[tuple[float, float, str]] = ()


_SPAN = {"firing": ("crimson", 0.13), "pending": ("orange", 0.12)}


def trend_panels(path: Path, panels: Mapping[str, Panel], *, title: str, ylabel: str,
                 xlabels: Sequence[str] = ()) -> Path:
    """Small multiples, each on its own y range, the baseline's CI as a band, alert
    periods shaded. A panel's range holds every point drawn where it is: the reliable
    points with their CI band, the thin ones (grey, open, no CI) and the baseline's
    band; a point is never clipped nor moved to the frame."""
    n = max(1, len(panels))
    cols = min(3, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.5 * cols, 2.5 * rows), squeeze=False)
    for ax, (name, p) in zip(axes.flat, panels.items(), strict=False):
        good = [(x, e) for x, e in p.points if e.mark != "thin"]
        lo, hi = panel_limits(p)
        for x0, x1, state in p.spans:
            color, alpha = _SPAN.get(state, ("grey", 0.1))
            ax.axvspan(x0 - 0.5, x1 + 0.5, color=color, alpha=alpha, linewidth=0)
        if p.baseline is not None:
            b, b_lo, b_hi = p.baseline
            if math.isfinite(b_lo) and math.isfinite(b_hi):
                ax.axhspan(b_lo, b_hi, color="#4a7ab5", alpha=0.15, linewidth=0)
            ax.axhline(b, linestyle="--", linewidth=1, color="#4a7ab5")
        if good:
            xs = [x for x, _ in good]
            ax.plot(xs, [e.value for _, e in good], marker="o", markersize=3, color="#222222")
            ax.fill_between(xs, [e.lo for _, e in good], [e.hi for _, e in good], alpha=0.2,
                            linewidth=0, color="#222222")
        for x, e in p.points:
            if e.mark == "thin" and math.isfinite(e.value):
                ax.plot([x], [e.value], marker="o", markersize=4, color=_COLOR["thin"],
                        markerfacecolor="white")
        ax.set_ylim(lo, hi)
        ax.axhline(0, color="black", linewidth=0.5)
        ax.set_title(name, fontsize=9)
        ax.grid(alpha=0.3)
        if xlabels:
            ticks = sorted({0, len(xlabels) - 1, (len(xlabels) - 1) // 2})
            ax.set_xticks(ticks)
            ax.set_xticklabels([xlabels[t] for t in ticks], fontsize=7)
        ax.set_xlim(-0.6, max(0, len(xlabels) - 1) + 0.6)
        ax.tick_params(axis="y", labelsize=7)
    for ax in list(axes.flat)[len(panels):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel, fontsize=8)
    fig.suptitle(title, fontsize=10)
    return _save(fig, path)


def panel_limits(p: Panel) -> tuple[float, float]:
    """The y range of a trend panel: every drawn value (each point, a reliable point's CI,
    the baseline and its CI, 0) inside, with a margin of 8% (at least 0.1) so that a
    marker at the extreme is drawn whole."""
    drawn = [e.value for _, e in p.points]
    drawn += [v for _, e in p.points if e.mark != "thin" for v in (e.lo, e.hi)]
    if p.baseline is not None:
        drawn += list(p.baseline)
    spread = [v for v in drawn if math.isfinite(v)] + [0.0]
    lo, hi = min(spread), max(spread)
    pad = max(0.1, 0.08 * (hi - lo))
    return lo - pad, hi + pad


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
