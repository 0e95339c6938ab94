"""JSD per language: how differently a language's scores are spread (docs/statistics.md).

JSD_l = JSD(P_l, G) in bits between the histogram of the scores given in
language l (10 bins) and the pooled histogram G of every language. At run
sizes its plug-in value is biased upward, so it is reported as the EXCESS
over a permutation null that shuffles the language labels within each unit
(n_perm shuffles), with the p-value of the plug-in value under that null,
and a cluster-bootstrap CI over units (n_boot replicates): a normal interval
about the excess (so the excess lies inside it), all truncated at 0; "overall" is the
mean over languages. The plug-in value, its square
root and the natural-log JS distance (scipy's jensenshannon) are kept for
comparison with the paper.

One kernel for one run and for a year of runs: the draws of a group depend
only on its seed and cell sizes, so groups that share them are evaluated
together; each replicate's histograms come out of one matrix product, and a
histogram's JSD is a table lookup per bin (exact integer indices: float32
holds them exactly below 2**24), so a group's numbers do not depend on what
it is batched with.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from monitor.store import UnitScores
from monitor.vocab import POOLED

__all__ = ["BINS", "N_BOOT", "N_PERM", "OVERALL", "JSDRow", "jsd_bits", "jsd_rows"]

BINS = 10
N_PERM = 200
N_BOOT = 1000
OVERALL = "overall"
_CHUNK = 64  # groups per numpy batch: ~0.5 MB per group and array, so memory stays flat
_WORKERS = max(1, min(4, os.cpu_count() or 1))
_Z95 = 1.959964  # the normal 97.5% quantile
_SERIAL_TASKS = 8  # one run's cells (scenarios + pooled) are evaluated without a pool


@dataclass(kw_only=True, frozen=True)
class JSDRow:
    """Excess JSD of one (group, scenario, language) cell, with its CI, p and n."""

    scenario: str
    language: str  # a language, or "overall"
    jsd_bits: float
    ci_lower: float
    ci_upper: float
    p_value: float
    n: int  # units
    plugin_bits: float
    js_distance_bits: float
    js_distance_nat: float
    group: str = "pooled"


def jsd_bits(p: np.ndarray, g: np.ndarray) -> np.ndarray:
    """JSD in bits between histograms (last axis), broadcasting; unnormalised ok."""
    p = p / np.clip(p.sum(axis=-1, keepdims=True), 1e-300, None)
    g = g / np.clip(g.sum(axis=-1, keepdims=True), 1e-300, None)
    m = (p + g) / 2

    def h(x: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            terms: np.ndarray = np.where(x > 0, x * np.log2(x), 0.0)
        total: np.ndarray = -terms.sum(axis=-1)
        return total

    out: np.ndarray = np.clip(h(m) - h(p) / 2 - h(g) / 2, 0.0, None)
    return out


def _xlog2x(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = x * np.log2(np.maximum(x, 1.0))  # 0 log 0 = 0
    return out


class _Table:
    """JSD of a language's histogram c (n scores) against the pooled g (L n):
    log2(2Ln) - log2(n)/2 - log2(Ln)/2 + sum_k T(c_k, g_k) / (2Ln) with
    T(c, g) = L f(c) + f(g) - f(Lc + g), f = x log2 x: one lookup per bin, not
    jsd_bits' three log2 (a long history's bootstrap has ~10^9 bins). The index
    stride c + g comes straight out of the GEMM that builds the histograms.
    The table is built only when a chunk looks up more bins than it has entries
    (a long history); one run's few lookups evaluate T directly, with the same
    operations, so the numbers are the same and a probe run does not carry the
    table (6 MB for a 120-unit run, twice that while it is built)."""

    def __init__(self, n: int, n_l: int, lookups: int) -> None:
        self.n_l = n_l
        self.stride = float(n_l * n + 1)
        self.size = (n + 1) * (n_l * n + 1)
        self.norm = 2.0 * n_l * n
        self.const = math.log2(self.norm) - math.log2(n) / 2 - math.log2(n_l * n) / 2
        self.flat: np.ndarray | None = None
        if lookups > self.size:
            cs = np.arange(n + 1, dtype=float)[:, None]
            self.flat = self._terms(cs, np.arange(n_l * n + 1, dtype=float)).ravel()

    def _terms(self, c: np.ndarray, g: np.ndarray) -> np.ndarray:
        """T(c, g), broadcasting, with one scratch array besides the result."""
        out: np.ndarray = np.add(self.n_l * c, g)
        scratch = np.maximum(out, 1.0)
        np.log2(scratch, out=scratch)
        np.multiply(out, scratch, out=out)  # f(Lc + g)
        np.add(self.n_l * _xlog2x(c), _xlog2x(g), out=scratch)
        np.subtract(scratch, out, out=out)
        return out

    def jsd(self, index: np.ndarray) -> np.ndarray:
        if self.flat is not None:
            terms = self.flat[index.astype(np.int32)]
        else:
            i = index.astype(np.int64)
            c, g = np.divmod(i, int(self.stride))
            terms = self._terms(c.astype(float), g.astype(float))
        out: np.ndarray = np.clip(self.const + terms.sum(axis=0) / self.norm, 0.0, None)
        return out


def _cells(run: np.ndarray, scen: np.ndarray) -> list[tuple[str, list[tuple[str, np.ndarray]]]]:
    """Per group (units contiguous, in unit order): its cells with >= 2 units."""
    if run.size == 0:
        return []
    starts = np.flatnonzero(np.r_[True, run[1:] != run[:-1]])
    out = []
    for a, b in zip(starts, [*starts[1:], len(run)], strict=True):
        sc = scen[a:b]
        cells = [(name, a + np.flatnonzero(sc == name)) for name in sorted(set(sc))]
        cells.append((POOLED, np.arange(a, b)))
        out.append((str(run[a]), [(n, i) for n, i in cells if i.size >= 2]))
    return out


def jsd_rows(units: UnitScores, seeds: Mapping[str, int], *, n_perm: int = N_PERM,
             n_boot: int = N_BOOT) -> list[JSDRow]:
    """Excess JSD per (group, scenario | "all", language | "overall"), each group
    with its seed's draws, in the order group (sorted), scenario (sorted, "all" last),
    language."""
    languages = units.languages
    n_u, n_l, _ = units.scores.shape
    run = np.array(units.groups, dtype=object)[units.group] if n_u else np.zeros(0, object)
    scen = np.array(units.scenarios, dtype=object)[units.scenario] if n_u else run
    b = np.clip((units.scores + 50) // 100, 1, BINS) - 1  # hundredths 100..1000 -> bins
    cell_of = (np.arange(n_u)[:, None, None] * n_l + np.arange(n_l)[None, :, None]) * BINS
    counts = np.bincount((cell_of + b).ravel(), minlength=n_u * n_l * BINS).reshape(
        n_u, n_l, BINS).astype(float)
    langs = [*languages, OVERALL]
    # A group draws its cells' shuffles and bootstrap weights from its seed, cell
    # after cell: cell j's draws depend only on (seed, the sizes of cells 0..j). Groups
    # that share that prefix share the draws, so they are drawn once and evaluated
    # together - the numbers of a run are those it gets alone.
    draws = _Draws(n_l, n_perm, n_boot)
    members: dict[tuple[int, tuple[int, ...]], list[tuple[str, str, np.ndarray]]] = {}
    for run_id, cells in _cells(run, scen):
        seed, sizes = int(seeds.get(run_id, 0)), tuple(i.size for _, i in cells)
        for j, (name, idx) in enumerate(cells):
            members.setdefault((seed, sizes[:j + 1]), []).append((run_id, name, idx))
    tasks = [(part, key[1][-1], *draws.get(*key)) for key, group in members.items()
             for part in (group[k:k + _CHUNK] for k in range(0, len(group), _CHUNK))]
    # One lookup table per cell size, shared by every chunk of that size (read-only);
    # built only where its lookups outnumber its entries (a history, not one run).
    lookups: dict[int, int] = {}
    for part, size, _, _ in tasks:
        lookups[size] = lookups.get(size, 0) + BINS * len(part) * n_l * (n_perm + n_boot + 1)
    tables = {size: _Table(3 * size, n_l, count) for size, count in lookups.items()}

    def evaluate(task: tuple[Any, ...]) -> list[JSDRow]:
        part, size, perm_t, weights_t = task
        cell = np.stack([counts[idx] for _, _, idx in part])  # groups, units, l, bins
        values = _jsd_chunk(cell, perm_t, weights_t, tables[size]).reshape(
            len(part), len(langs), -1)
        return [JSDRow(scenario=name, language=lang, jsd_bits=float(x[0]), ci_lower=float(x[1]),
                       ci_upper=float(x[2]), p_value=float(x[3]), n=size,
                       plugin_bits=float(x[5]), js_distance_bits=float(x[6]),
                       js_distance_nat=float(x[7]), group=str(group))
                for (group, name, _), v in zip(part, values, strict=True)
                for lang, x in zip(langs, v, strict=True)]

    # The draws are made above, in order; evaluating a chunk is deterministic numpy
    # that releases the GIL, so a history's chunks run on every core (their table
    # lookups dominate). One run's few cells stay on this thread: worker threads'
    # malloc arenas would add ~10 MB to a probe run's peak for no time saved.
    if len(tasks) > _SERIAL_TASKS:
        with ThreadPoolExecutor(max_workers=_WORKERS) as pool:
            rows = [r for part in pool.map(evaluate, tasks) for r in part]
    else:
        rows = [r for t in tasks for r in evaluate(t)]
    grp_order = {g: i for i, g in enumerate(sorted(set(run.tolist())))}
    lang_order = {lang: i for i, lang in enumerate(langs)}
    rows.sort(key=lambda r: (grp_order[r.group], r.scenario == POOLED, r.scenario,
                             lang_order[r.language]))
    return rows


class _Draws:
    """The shuffles (as a one-hot matrix) and bootstrap weights of cell j of a group
    with this seed and cell sizes[:j+1], made once: the generator's state after each
    prefix is kept, so a prefix's next cell is drawn as in one group's own run."""

    def __init__(self, n_l: int, n_perm: int, n_boot: int) -> None:
        self.n_l, self.n_perm, self.n_boot = n_l, n_perm, n_boot
        self._state: dict[tuple[int, tuple[int, ...]], Mapping[str, Any]] = {}
        self._made: dict[tuple[int, tuple[int, ...]], tuple[np.ndarray, np.ndarray]] = {}

    def get(self, seed: int, sizes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        key = (seed, sizes)
        if key not in self._made:
            rng = np.random.default_rng(seed)
            if len(sizes) > 1:
                self.get(seed, sizes[:-1])  # the generator's state after the earlier cells
                rng.bit_generator.state = self._state[(seed, sizes[:-1])]
            size, n_l = sizes[-1], self.n_l
            order = np.argsort(rng.random((self.n_perm, size, n_l)), axis=2)
            weights = rng.multinomial(size, np.full(size, 1.0 / size), size=self.n_boot)
            self._state[key] = rng.bit_generator.state
            # The one-hot of the shuffles, written straight into its GEMM layout
            # [(unit, l'), (l, perm)] = 1 where shuffle perm sends l to l': no boolean
            # cube and no transposed copy; float32 holds 0/1 exactly (half the memory).
            cube = np.zeros((size, n_l, n_l, self.n_perm), dtype=np.float32)
            p_i, u_i, l_i = (np.arange(k).reshape([-1 if a == i else 1 for a in range(3)])
                             for i, k in enumerate(order.shape))
            cube[u_i, order, l_i, p_i] = 1.0
            perm_t = cube.reshape(size * n_l, n_l * self.n_perm)
            self._made[key] = (perm_t, np.ascontiguousarray(weights.T, dtype=float))
        return self._made[key]


def _jsd_chunk(cell: np.ndarray, perm_t: np.ndarray, weights_t: np.ndarray,
               table: _Table) -> np.ndarray:
    """The JSD cells of a stack of groups sharing the draws: a row per (group,
    language + overall) with excess, ci_lower, ci_upper, p, n, plug-in, JS distance
    in bits and in nats. perm_t: (unit, l') x (l, perm) one-hot of the shuffles;
    weights_t: unit x bootstrap replicate; table: the T(c, g) of this cell size."""
    n_r, n_u, n_l, bins = cell.shape
    n_perm = perm_t.shape[1] // n_l
    p = cell.sum(axis=1)
    g = p.sum(axis=1)
    plug = jsd_bits(p, g[:, None, :])
    per_unit = cell.sum(axis=3)
    assert (per_unit == 3).all(), "complete units hold 3 scores per language"
    # Permutation null and bootstrap: one GEMM each over every run of the chunk,
    # giving the table index stride c + g directly (integer counts: exact sums).
    # float32 GEMMs (twice as fast) while every index is an integer float32 holds exactly
    ft = np.float32 if table.size < 2**24 else np.float64
    x = cell.transpose(3, 0, 1, 2).reshape(bins * n_r, n_u * n_l).astype(ft)
    # x @ (stride * perm_t + 1) = stride * (x @ perm_t) + (row sums of x): exact integers
    # either way, without a scaled copy of perm_t
    null_idx = x @ perm_t.astype(ft, copy=False)
    null_idx *= table.stride
    null_idx += x.sum(axis=1, keepdims=True)
    null_idx = null_idx.reshape(bins, n_r, n_l, n_perm)
    null = table.jsd(null_idx)
    mixed = table.stride * cell + cell.sum(axis=2, keepdims=True)
    xb = mixed.transpose(3, 0, 2, 1).reshape(bins * n_r * n_l, n_u).astype(ft)
    boot = table.jsd((xb @ weights_t.astype(ft)).reshape(bins, n_r, n_l, -1))  # runs, l, boot
    plug_i = table.jsd(table.stride * p.transpose(2, 0, 1) + g.T[:, :, None])  # as the null

    def with_mean(x: np.ndarray) -> np.ndarray:  # + "overall", the mean over languages
        return np.concatenate([x, x.mean(axis=1, keepdims=True)], axis=1)

    plug_a, plug_ia, null_a, boot_a = (with_mean(v) for v in (plug, plug_i, null, boot))
    nat = np.sqrt(plug * math.log(2))  # scipy's jensenshannon: the natural-log distance
    ge = null_a >= plug_ia[:, :, None]
    close = np.abs(null_a - plug_ia[:, :, None]) < 1e-10
    # A shuffle whose JSD ties the plug-in value to rounding (another histogram of
    # equal JSD) is decided with the exact formula: a tie counts as >=, as it should.
    if close.any():
        rr, pp = np.nonzero(close.any(axis=1))
        c = (null_idx[:, rr, :, pp].astype(np.int64) // int(table.stride)).astype(float)
        c = np.ascontiguousarray(c.transpose(0, 2, 1))
        exact = with_mean(jsd_bits(c, g[rr][:, None, :]))
        ge[rr, :, pp] = np.where(close[rr, :, pp], exact >= plug_a[rr], ge[rr, :, pp])
    # The excess (plug-in minus the permutation null's mean: the plug-in's bias removed)
    # with a normal interval from the bootstrap's spread, E +- 1.96 sd: symmetric about
    # E, so the estimate lies inside it by construction. The basic interval (the
    # replicates' quantiles reflected about E) under-covered a real effect (90.7% for
    # a language-wide leniency at 40 triplets) because the plug-in's resampling
    # distribution is skewed the other way from the estimator's; the normal one holds
    # >= 94% in every cell (docs/benchmarks.md). E and both bounds are then truncated at
    # 0 together, a JSD being >= 0.
    excess = plug_a - null_a.mean(axis=2)
    half = _Z95 * boot_a.std(axis=2)
    lo, hi = excess - half, excess + half
    cols = [np.clip(excess, 0, None), np.clip(lo, 0, None), np.clip(hi, 0, None),
            (1 + ge.sum(axis=2)) / (n_perm + 1),
            np.full(plug_a.shape, float(n_u)), plug_a, np.sqrt(plug_a), with_mean(nat)]
    return np.stack([c.ravel() for c in cols], axis=1)
