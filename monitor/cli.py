"""The `monitor` command line.

Heavy libraries (litellm, duckdb, pandas, scipy) are imported inside the
command functions only, so `monitor --help` stays fast.
Exit codes (docs/contract.md): 0 ok; 1 breach with --fail-on-breach (a
regression with `compare --fail-on-regression`); 2 usage or configuration
error; 3 the run produced no results; 4 the storage could not be written;
5 `compare`: a country inconclusive; 130 / 143 interrupted by Ctrl-C / SIGTERM.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from pathlib import Path

from monitor.errors import MonitorError

__all__ = ["main"]


def _command(module: str, func: str, *, config: bool = True
             ) -> Callable[[argparse.Namespace], int]:
    """The command `func` of monitor.commands.<module>, imported when it runs: heavy
    libraries load only for the command that needs them, so --help stays fast. With
    `config`, the configuration is validated before the module is imported: a config
    error is one line at once, not after seconds of importing LiteLLM or DuckDB."""
    def run(args: argparse.Namespace) -> int:
        if config:
            _validate(args)
        mod = importlib.import_module(f"monitor.commands.{module}")
        code: int = getattr(mod, func)(args)
        return code
    return run


def _validate(args: argparse.Namespace) -> None:
    """Load the command's configuration once, for its errors only (about 5 ms; the
    command loads it again)."""
    from monitor.config import load_settings

    load_settings(args.config)


def _run(args: argparse.Namespace) -> int:
    _validate(args)
    from monitor.daemon.scheduler import serve
    from monitor.logs import setup_logging

    setup_logging(args.log_level)
    return serve(args.config)


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= value < 2**31:
        raise argparse.ArgumentTypeError("the seed must be between 0 and 2147483647")
    return value


def _csv(text: str) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise argparse.ArgumentTypeError("expected a comma-separated list, e.g. en,zh")
    return items


def build_parser() -> argparse.ArgumentParser:
    from monitor import __version__

    ap = argparse.ArgumentParser(
        prog="monitor",
        description="bias-monitor: measure and watch local-language bias of LLM endpoints.")
    ap.add_argument("--version", action="version", version=f"bias-monitor {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", required=True)

    cat = sub.add_parser("catalog", help="check or summarise the probe catalog")
    cat_sub = cat.add_subparsers(dest="catalog_command", metavar="ACTION", required=True)
    for name, func, text in (
        ("validate", _command("catalog", "catalog_validate", config=False),
         "check every catalog rule; report all problems"),
        ("stats", _command("catalog", "catalog_stats", config=False),
         "counts per scenario x country x language"),
    ):
        p = cat_sub.add_parser(name, help=text, description=text)
        p.add_argument("--catalog", type=Path, default=None, metavar="DIR",
                       help="catalog folder (default: the config's, else the shipped probes/)")
        p.add_argument("--extra", type=Path, action="append", default=[], metavar="DIR",
                       help="an overlay folder with your own scenarios (repeatable)")
        p.add_argument("--config", type=Path, default=None, metavar="PATH",
                       help="take catalog.path and catalog.extra_paths from this config")
        p.set_defaults(func=func)
    ns = cat_sub.add_parser("new-scenario", help="write the files of a new scenario (skeleton)",
                            description="Write options, sources and prompt files of a new "
                                        "scenario into an overlay folder, to fill in; then "
                                        "`monitor catalog pairs NAME --dir DIR`.")
    ns.add_argument("name", metavar="NAME", help="scenario name, e.g. banking")
    ns.add_argument("--dir", type=Path, default=Path("probes-extra"), metavar="DIR",
                    help="the overlay folder (default ./probes-extra)")
    ns.add_argument("--languages", default=None, metavar="en,fr,...",
                    help="the languages it is asked in: en and at least one more "
                         "(default: sampling.languages' default, en,ja,zh,fr,de,ko)")
    ns.set_defaults(func=_command("catalog", "catalog_new_scenario", config=False))
    cp = cat_sub.add_parser("pairs", help="draw the comparison pairs of an overlay scenario",
                            description="Draw the seeded, balanced pairs of a scenario in an "
                                        "overlay folder, for the languages it has: 100, or "
                                        "every distinct pair its options allow when fewer.")
    cp.add_argument("name", metavar="NAME")
    cp.add_argument("--dir", type=Path, default=Path("probes-extra"), metavar="DIR")
    cp.add_argument("--count", type=int, default=None, metavar="N",
                    help="pairs to draw (default: 100, or as many as the options allow)")
    cp.add_argument("--seed", type=int, default=2024, metavar="N")
    cp.set_defaults(func=_command("catalog", "catalog_pairs", config=False))

    cfg = sub.add_parser("config", help="check the configuration")
    cfg_sub = cfg.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    chk = cfg_sub.add_parser("check", help="validate and print the effective configuration "
                             "(secrets masked)")
    chk.add_argument("--config", type=Path, default=None, metavar="PATH")
    chk.set_defaults(func=_command("config", "config_check"))

    pr = sub.add_parser("probe", help="run the probes once and print the bias summary",
                        description="Ask the configured endpoints a sampled set of triplets in "
                        "every language, store the answers and print MD / JSD with CIs.")
    pr.add_argument("--once", action="store_true", required=True,
                    help="run once and exit (the daemon is `monitor run`)")
    pr.add_argument("--config", type=Path, default=None, metavar="PATH")
    pr.add_argument("--endpoint", action="append", metavar="NAME",
                    help="only this endpoint (repeatable; default: all)")
    pr.add_argument("--triplets", type=int, metavar="N", help="triplets in this run")
    pr.add_argument("--languages", type=_csv, metavar="en,zh,...")
    pr.add_argument("--scenarios", type=_csv, metavar="university,...")
    pr.add_argument("--seed", type=_seed, metavar="N", help="sampling seed")
    pr.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    pr.add_argument("--fail-on-breach", action="store_true",
                    help="exit 1 when an MD CI lies beyond thresholds.md_points")
    pr.add_argument("--resume", metavar="RUN_ID", help="complete an interrupted run")
    pr.set_defaults(func=_command("probe", "probe_command"))

    cm = sub.add_parser(
        "compare", help="a candidate against production: paired, sequential, a CI gate",
        description="Ask the candidate and the baseline (production) endpoint the same "
        "triplets, languages, variants and option orders, in batches, and test the paired "
        "per-triplet differences of MD per country until each is a regression, an "
        "improvement or no change beyond --margin, or --max-calls is reached "
        "(docs/statistics.md, 'Comparing two setups'). Exit 0 no regression shown, 1 a "
        "regression with --fail-on-regression, 5 a country inconclusive.")
    cm.add_argument("--config", type=Path, default=None, metavar="PATH")
    cm.add_argument("--baseline", metavar="ENDPOINT",
                    help="production: asked beside the candidate (with --against-baseline: "
                    "whose stored baseline is used, never called)")
    cm.add_argument("--candidate", metavar="ENDPOINT", help="the change under test")
    cm.add_argument("--against-baseline", action="store_true",
                    help="pair the candidate with the stored baseline's own answers, "
                    "re-asking its triplets (of --baseline, else of the candidate's endpoint)")
    cm.add_argument("--languages", type=_csv, metavar="en,zh,...")
    cm.add_argument("--scenarios", type=_csv, metavar="university,...")
    cm.add_argument("--margin", type=float, metavar="X", help="the MD change in points that "
                    "counts (default thresholds.drift_md_points)")
    cm.add_argument("--max-calls", type=int, metavar="N",
                    help="stop asking at N calls, both sides together (default 12000)")
    cm.add_argument("--seed", type=_seed, metavar="N", help="order of the triplets "
                    "(default sampling.seed)")
    cm.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    cm.add_argument("--fail-on-regression", action="store_true",
                    help="exit 1 when a country is a regression")
    cm.add_argument("--out", metavar="DIR", help="write the report page (index.html, "
                    "figures), summary.md (a pull-request comment) and compare.json there")
    cwhich = cm.add_mutually_exclusive_group()
    cwhich.add_argument("--resume", metavar="COMPARE_ID", help="go on with an interrupted "
                        "comparison")
    cwhich.add_argument("--show", metavar="COMPARE_ID", help="print a finished comparison "
                        "again (read-only)")
    cm.set_defaults(func=_command("compare", "compare_command"))

    rn = sub.add_parser("run", help="the daemon: scheduled runs, drift, metrics, Slack alerts")
    rn.add_argument("--config", type=Path, default=None, metavar="PATH")
    rn.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    rn.set_defaults(func=_run)

    ru = sub.add_parser("runs", help="list the stored runs: status, calls, failures, the most "
                        "common error", description="The stored runs, oldest first: id, start, "
                        "status (and why it ended so), calls made of planned, failures, the "
                        "most common error and the usable data (triplets complete of asked, "
                        "share of answers used). Read-only; works while the daemon runs.")
    ru.add_argument("--endpoint", action="append", metavar="NAME",
                    help="only this endpoint (repeatable; default: all)")
    ru.add_argument("--last", type=int, default=20, metavar="N",
                    help="the latest N runs per endpoint (default 20; 0 = all)")
    ru.add_argument("--json", action="store_true", help="one JSON document on stdout")
    ru.add_argument("--config", type=Path, default=None, metavar="PATH")
    ru.set_defaults(func=_command("runs", "runs_main"))

    ex = sub.add_parser("export", help="every stored table as Parquet, partitioned by date and "
                        "endpoint (read-only; also what is readable of a damaged file)")
    ex.add_argument("--parquet", type=Path, required=True, metavar="DIR")
    ex.add_argument("--since", metavar="DATE", help="only data from this date on (YYYY-MM-DD)")
    ex.add_argument("--config", type=Path, default=None, metavar="PATH")
    ex.set_defaults(func=_command("export", "export_command"))

    mg = sub.add_parser("migrate", help="copy a DuckDB history into the PostgreSQL store "
                        "(storage.url_env); the file is left unchanged")
    mg.add_argument("--from", dest="source", type=Path, required=True, metavar="FILE",
                    help="the DuckDB file (storage.path of the monitor that wrote it)")
    mg.add_argument("--config", type=Path, default=None, metavar="PATH")
    mg.set_defaults(func=_command("migrate", "migrate_command"))

    rp = sub.add_parser("report", help="HTML report (headline, figures, tables, evidence) or "
                        "Markdown", description="A headline per endpoint (status, the "
                        "significant countries, drift against the baseline, coverage), then "
                        "MD per country, the language x country deviation heatmap, MD over "
                        "time and JSD per language with CIs, the paper's tables, weakness "
                        "shares, the answers that moved most and the alert history.")
    rwhich = rp.add_mutually_exclusive_group()
    rwhich.add_argument("--run", metavar="RUN_ID", help="one run (default: each endpoint's "
                        "latest finished run, or a later one that failed with its answers "
                        "stored)")
    rwhich.add_argument("--since", metavar="DATE", help="pool the runs started since DATE "
                        "(YYYY-MM-DD or ISO time)")
    rp.add_argument("--endpoint", action="append", metavar="NAME",
                    help="only this endpoint (repeatable; default: all with runs)")
    rp.add_argument("--out", default="report", metavar="DIR",
                    help="output folder (default ./report); '-' with --format md: stdout")
    rp.add_argument("--format", choices=["html", "md"], default="html",
                    help="html (index.html + PNGs, self-contained) or md (Markdown tables)")
    rp.add_argument("--config", type=Path, default=None, metavar="PATH")
    rp.set_defaults(func=_command("report", "report_command"))

    bl = sub.add_parser("baseline", help="set or show the accepted baseline runs")
    bl_sub = bl.add_subparsers(dest="baseline_command", metavar="ACTION", required=True)
    bset = bl_sub.add_parser("set", help="accept runs as the baseline new runs are compared with")
    which = bset.add_mutually_exclusive_group(required=True)
    which.add_argument("--run", action="append", metavar="RUN_ID",
                       help="a run of the baseline (repeatable: a baseline can span runs)")
    which.add_argument("--latest", nargs="?", type=int, const=1, metavar="N",
                       help="the latest N complete runs of each endpoint (default 1)")
    bshow = bl_sub.add_parser("show", help="the baseline and its MD per country")
    bshow.add_argument("--json", action="store_true", help="one JSON document on stdout")
    bcal = bl_sub.add_parser(
        "calibrate", help="one large run that becomes the baseline (resumable)",
        description="Ask each country cell about --triplets-per-cell triplets in one run "
        "(capped at every monitored triplet: one rotation cycle) and accept it as the "
        "baseline when it completes: a precise baseline lets smaller runs page in time "
        "(docs/plan.md). Says what it asks and costs first; Ctrl-C keeps every answer.")
    bcal.add_argument("--triplets-per-cell", type=int, default=1000, metavar="N",
                      help="triplets for the smallest country cell (default 1000)")
    bcal.add_argument("--max-cost-usd", type=float, default=None, metavar="X",
                      help="refuse to start above this estimate, stop asking at it")
    bcal.add_argument("--dry-run", action="store_true", help="say what it would ask; ask nothing")
    bcal.add_argument("--resume", metavar="RUN_ID", help="finish an interrupted calibration")
    for p in (bset, bshow, bcal):
        p.add_argument("--config", type=Path, default=None, metavar="PATH")
        p.add_argument("--endpoint", action="append", metavar="NAME")
        p.set_defaults(func=_command("baseline", "baseline_command"))
    bcal.set_defaults(func=_command("calibrate", "calibrate_command"))

    pl = sub.add_parser("plan", help="triplets per run, CUSUM h and cost to detect a shift",
                        description="Size the runs: the triplets per run, CUSUM h and k, calls "
                        "and cost per day needed to detect a shift of --delta within "
                        "--within-runs runs at a tolerated false-alarm rate (docs/plan.md).")
    pl.add_argument("--config", type=Path, default=None, metavar="PATH")
    pl.add_argument("--endpoint", action="append", metavar="NAME",
                    help="only this endpoint (repeatable; default: all)")
    pl.add_argument("--sd", metavar="X", help="sd of the paired differences (default: "
                    "estimated from the endpoint's baseline runs, else its stored runs)")
    pl.add_argument("--delta", metavar="X", help="smallest MD shift to detect, in points "
                    "(default thresholds.drift_md_points)")
    pl.add_argument("--false-alarms-per-100", metavar="X",
                    help="tolerated false pages per 100 runs "
                         "(default thresholds.false_alarms_per_100, 1)")
    pl.add_argument("--within-runs", metavar="N", help="detection delay wanted (default 3)")
    pl.add_argument("--baseline-triplets", metavar="N",
                    help="size for a fixed baseline of N triplets, e.g. what `monitor baseline "
                    "calibrate --dry-run` would ask (default: a baseline the user set, else the "
                    "automatic one)")
    pl.add_argument("--persistence", metavar="R",
                    help="correlation of a triplet's d between two asks, for the detector "
                    "with the baseline as covariate (default: what the endpoint's runs "
                    "measured, else 0)")
    pl.add_argument("--compare", action="store_true",
                    help="plan `monitor compare` instead: the calls to decide a change of "
                    "--delta per country, live and against the stored baseline")
    pl.add_argument("--max-calls", metavar="N", help="with --compare: the comparison's cap "
                    "(default 12000)")
    pl.add_argument("--json", action="store_true", help="one JSON document on stdout")
    plans = _command("plan", "plan_command"), _command("plan_compare", "plan_compare")
    pl.set_defaults(func=lambda args: plans[bool(args.compare)](args))
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except MonitorError as exc:
        print(f"monitor: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # `monitor catalog stats | head` is not an error
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("monitor: interrupted", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":
    raise SystemExit(main())
