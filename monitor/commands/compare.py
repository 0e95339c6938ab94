"""`monitor compare`: a candidate against production, paired and sequential, as a CI gate.

Exit codes (docs/contract.md): 0 no regression shown (every country decided, or a
regression without --fail-on-regression); 1 a regression and --fail-on-regression;
5 no regression shown but a country inconclusive at the cap; 2 usage or
configuration; 3 no pair could be made (every call failed or went unread); 4 the
storage could not be written; 130 / 143 interrupted (the line gives the resume
command). `--show COMPARE_ID` prints a stored comparison again (read-only).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path

from monitor.catalog import load_catalog
from monitor.commands.probe import resume_hint, terminable
from monitor.compare import (
    Budgets,
    CompareOptions,
    Prepared,
    Result,
    json_document,
    markdown,
    prepare,
    run_comparison,
    show,
    text,
    write_page,
)
from monitor.config import Settings, load_settings
from monitor.context import Context
from monitor.errors import (
    EXIT_BREACH,
    EXIT_INCONCLUSIVE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    NoResultsError,
    StoreWriteError,
    UsageError,
)
from monitor.measure.budget import Allowance
from monitor.measure.calls import ChatClient
from monitor.measure.run import make_client
from monitor.store import Store, open_store
from monitor.vocab import Change, Outcome

__all__ = ["compare_command", "exit_code"]


def exit_code(res: Result, fail_on_regression: bool) -> int:
    if res.outcome == Outcome.REGRESSION and fail_on_regression:
        return EXIT_BREACH
    if any(r.test.change == Change.INCONCLUSIVE for r in res.countries):
        return EXIT_INCONCLUSIVE
    return EXIT_OK


def _budgets(ctx: Context[Store], p: Prepared) -> Budgets:
    now = datetime.now(UTC)
    clients: dict[str, ChatClient] = {}
    allowances: dict[str, Allowance] = {}
    for side in p.sides:
        name = side.endpoint.name
        # one client (one rate limit) and one budget per endpoint, shared when both sides
        # are the same endpoint
        if name not in clients:
            clients[name] = make_client(ctx.catalog, side.endpoint)
            allowances[name] = Allowance.today(ctx.settings.budget, ctx.store, name, now)
    if any(a.spent for a in allowances.values()):
        spent = [n for n, a in allowances.items() if a.spent]
        raise NoResultsError(f"endpoint {', '.join(spent)}: today's budget is spent "
                             "(budget.max_usd_per_day / max_probes_per_day): no call made - "
                             "raise it or wait until midnight UTC")
    return Budgets(clients={s.arm: clients[s.endpoint.name] for s in p.sides},
                   allowances={s.arm: allowances[s.endpoint.name] for s in p.sides})


def _run(ctx: Context[Store], p: Prepared, config_path: Path, settings: Settings
         ) -> Result | int:
    cid = p.comparison.compare_id
    try:
        return asyncio.run(terminable(run_comparison(ctx, p, _budgets(ctx, p))))
    except (KeyboardInterrupt, asyncio.CancelledError) as exc:
        term = isinstance(exc, asyncio.CancelledError)
        print(f"\nmonitor: comparison {'terminated (SIGTERM)' if term else 'interrupted'}; "
              f"answers so far are stored in {settings.storage.path}. Resume with: "
              f"{resume_hint(cid, config_path, 'monitor compare')}", file=sys.stderr)
        return EXIT_TERMINATED if term else EXIT_INTERRUPTED
    except StoreWriteError as exc:
        raise StoreWriteError(f"{exc}; then resume with: "
                              f"{resume_hint(cid, config_path, 'monitor compare')}",
                              mount=exc.mount, free_bytes=exc.free_bytes, run_id=exc.run_id,
                              cause=exc.cause) from None


def _command_line(args: argparse.Namespace, cid: str) -> str:
    return f"monitor compare --show {shlex.quote(cid)}" + (
        f" --config {shlex.quote(str(args.config))}" if args.config else "")


def compare_command(args: argparse.Namespace) -> int:
    settings, config_path = load_settings(args.config)
    catalog = load_catalog(settings.catalog.path, settings.catalog.extra_paths)
    if args.max_calls is not None and args.max_calls < 1:
        raise UsageError(f"--max-calls {args.max_calls}: must be a positive number of calls")
    if args.show:
        from monitor.commands.reading import stored

        store = stored(settings.storage)
        if store is None:
            raise UsageError(f"--show {args.show}: nothing stored yet at "
                             f"{settings.storage.path}")
        res = show(Context(settings, catalog, store), args.show)
    else:
        if not args.candidate and not args.resume:
            raise UsageError("monitor compare: name the candidate with --candidate ENDPOINT "
                             "(or --resume COMPARE_ID, --show COMPARE_ID)")
        with open_store(settings.storage) as store:
            ctx = Context(settings, catalog, store)
            names = [n for n in (args.baseline, args.candidate) if n]
            if not args.resume:
                settings.require_keys([settings.endpoint(n) for n in names], config_path)
            opts = CompareOptions(candidate=args.candidate or "", baseline=args.baseline,
                                  against_baseline=args.against_baseline,
                                  languages=args.languages, scenarios=args.scenarios,
                                  margin=args.margin, max_calls=args.max_calls, seed=args.seed,
                                  resume=args.resume)
            p = prepare(ctx, opts)
            print(f"monitor: comparison {p.comparison.compare_id}: {p.candidate.endpoint.name} "
                  f"against {p.comparison.baseline_endpoint} ({p.comparison.mode}), at most "
                  f"{p.comparison.max_calls} calls", file=sys.stderr)
            got = _run(ctx, p, config_path, settings)
            if isinstance(got, int):
                return got
            res = got
    if res.pairs == 0:
        raise NoResultsError(f"comparison {res.comparison.compare_id} made no pair: no "
                             "triplet was answered in every language by both sides (see "
                             "`monitor runs` for the calls' errors)")
    code = exit_code(res, args.fail_on_regression)
    cid = res.comparison.compare_id
    if args.out:
        out = Path(args.out)
        write_page(res, out)
        (out / "summary.md").write_text(markdown(res, _command_line(args, cid)),
                                        encoding="utf-8")
        (out / "compare.json").write_text(json.dumps(json_document(
            res, str(settings.storage.path), catalog.version, code), indent=2,
            ensure_ascii=False) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(json_document(res, str(settings.storage.path), catalog.version, code),
                         indent=2, ensure_ascii=False))
    else:
        print(text(res))
    return code
