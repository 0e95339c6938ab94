"""Draw the fixed comparison pairs of a scenario (seeded, reproducible).

    python -m monitor.catalog.pairs [--catalog DIR] [--scenario NAME] [--count 100] [--seed 2024]

(the shipped catalogue; a team's own scenario: `monitor catalog pairs NAME --dir DIR`).

How a pair set is drawn, and why it never holds a repeated pair: monitor.catalog.draw.
The tests redraw the shipped pairs and require the same file.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from monitor.catalog.draw import DEFAULT_SEED, draw_pairs
from monitor.catalog.load import default_catalog_dir
from monitor.catalog.records import Problem
from monitor.catalog.rules import MIN_PAIRS, check_languages, check_options, draw_command

__all__ = ["DEFAULT_COUNT", "DEFAULT_SEED", "draw_pairs", "main", "write_pairs"]

DEFAULT_COUNT = MIN_PAIRS


def write_pairs(path: Path, rows: list[tuple[str, str, str]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(["pair_id", "english_option_id", "non_english_option_id"])
        writer.writerows(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m monitor.catalog.pairs", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--catalog", type=Path, default=default_catalog_dir())
    ap.add_argument("--scenario", action="append", help="default: every options/*.csv")
    ap.add_argument("--count", type=int, default=DEFAULT_COUNT)
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = ap.parse_args(argv)
    if not (args.catalog / "languages.yaml").is_file():
        print(f"{args.catalog}: not a probe catalog (no languages.yaml); a team's own "
              "scenario is drawn with `monitor catalog pairs NAME --dir DIR`", file=sys.stderr)
        return 2
    problems: list[Problem] = []
    languages = check_languages(args.catalog / "languages.yaml", problems)
    names = args.scenario or sorted(p.stem for p in (args.catalog / "options").glob("*.csv"))
    for name in names:
        path = args.catalog / "options" / f"{name}.csv"
        if not path.is_file():
            print(f"{path}: no such scenario in the catalog; a team's own scenario is drawn "
                  f"with `{draw_command(name, Path('DIR'), overlay=True)}`", file=sys.stderr)
            return 2
        options = check_options(path, languages, problems)
        if problems:
            for p in problems:
                print(p, file=sys.stderr)
            return 2
        try:
            rows = draw_pairs(options, languages["en"], args.count, args.seed)
        except ValueError as exc:
            print(f"{path}: {exc}", file=sys.stderr)
            return 2
        out = args.catalog / "pairs" / f"{name}.csv"
        out.parent.mkdir(exist_ok=True)
        write_pairs(out, rows)
        print(f"wrote {len(rows)} pairs to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
