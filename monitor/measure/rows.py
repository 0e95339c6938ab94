"""What a run writes: the row of a call and its scores, and the statistics of the run."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from monitor.catalog import Catalog
from monitor.measure.calls import CallResult
from monitor.measure.parse import ParseResult
from monitor.measure.prompts import Prompt
from monitor.measure.sampling import ProbeSpec
from monitor.stats import LOCALITIES, Summary, nullable
from monitor.store import RunRow, StatRow
from monitor.vocab import POOLED, WEAKNESS_KIND, CallStatus, StatKind

__all__ = ["Record", "call_record", "columns", "stat_rows"]

#: One answered probe: its probe_calls row and its scores rows.
Record = tuple[dict[str, Any], list[dict[str, Any]]]


def call_record(run: RunRow, catalog: Catalog, spec: ProbeSpec, prompt: Prompt,
                res: CallResult, parsed: ParseResult | None) -> Record:
    status = CallStatus.FAILED if not res.ok else (
        parsed.status if parsed else CallStatus.UNPARSEABLE)
    call = {
        "run_id": run.run_id, "triplet_id": spec.triplet.id, "language": prompt.language,
        "endpoint": run.endpoint, "scenario": spec.triplet.scenario,
        "target_id": spec.triplet.target_id, "pair_id": spec.triplet.pair_id,
        "variant": spec.variant, "option_order": ",".join(spec.order),
        "prompt_hash": prompt.hash, "catalog_version": run.catalog_version,
        "status": str(status), "detail": parsed.detail if parsed else None,
        "raw_text": res.text, "error": res.error, "latency_s": res.latency_s,
        "input_tokens": res.input_tokens, "output_tokens": res.output_tokens,
        "cost_usd": res.cost_usd, "model_id": res.model_id, "fingerprint": res.fingerprint,
        "attempts": res.attempts, "created_at": datetime.now(UTC),
        "answer_format": str(res.answer_format),
    }
    scores = []
    if parsed is not None and parsed.status == CallStatus.OK:  # only answered calls have scores
        for label, opt in parsed.options.items():
            oid = prompt.labels[label]
            scores.append({"run_id": run.run_id, "triplet_id": spec.triplet.id,
                           "language": prompt.language, "label": label, "option_id": oid,
                           "country": catalog.option(spec.triplet.scenario, oid).country,
                           "is_target": oid == spec.triplet.target_id, "score": opt.score,
                           "strengths": opt.strengths, "weaknesses": opt.weaknesses})
    return call, scores


def columns(rows: Sequence[dict[str, Any]], cols: tuple[tuple[str, str], ...]
            ) -> dict[str, list[Any]]:
    return {c: [r[c] for r in rows] for c, _ in cols}


def stat_rows(s: Summary) -> list[StatRow]:
    """The run's statistics as run_stats rows (what the exporter and the report read)."""
    rows = [StatRow(kind=StatKind.MD, scenario=r.scenario, key=r.country, value=nullable(r.md),
                    ci_lower=nullable(r.ci_lower),
                    ci_upper=nullable(r.ci_upper), n=r.n, p_value=None,
                    extra=json.dumps({"se": nullable(r.se), "did": nullable(r.did),
                                "did_ci_lower": nullable(r.did_ci_lower),
                                "did_ci_upper": nullable(r.did_ci_upper)})) for r in s.md]
    rows += [StatRow(kind=StatKind.JSD, scenario=r.scenario, key=r.language,
                     value=nullable(r.jsd_bits), ci_lower=nullable(r.ci_lower),
                     ci_upper=nullable(r.ci_upper), n=r.n, p_value=nullable(r.p_value),
                     extra=json.dumps({"plugin_bits": r.plugin_bits,
                                 "js_distance_bits": r.js_distance_bits,
                                 "js_distance_nat": r.js_distance_nat})) for r in s.jsd]
    rows += [StatRow(kind=StatKind.COVERAGE, scenario=POOLED, key=r.language,
                     value=nullable(r.ratio), ci_lower=None, ci_upper=None, n=r.asked)
             for r in s.coverage]
    for w in s.weakness:  # kind weakness_local / weakness_foreign, key = country
        for loc in LOCALITIES:
            rows.append(StatRow(kind=WEAKNESS_KIND[loc], scenario=POOLED, key=w.country,
                                value=nullable(getattr(w, f"share_{loc}")),
                                ci_lower=nullable(getattr(w, f"{loc}_lower")),
                                ci_upper=nullable(getattr(w, f"{loc}_upper")), n=w.n, p_value=None,
                                extra=json.dumps({"language": w.language,
                                            "points": getattr(w, f"points_{loc}")})))
    return rows
