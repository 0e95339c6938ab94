"""Merge the staged languages into a copy of the catalogue (the step that makes them shipped).

    python probes/i18n/merge.py OUT_DIR      # OUT_DIR: a copy of probes/ to merge into

1. options/<scenario>.csv take the option_id format and a column per new
   language (names from i18n/<lang>.csv), and the staged new options
   (i18n/new-options/<scenario>.csv) are appended with their names in all
   14 languages; sources/<scenario>.csv get their source rows.
2. prompts/<lang>.yaml are copied from i18n/prompts/.
3. languages.yaml gains each new language with its local countries.
4. the pairs are redrawn (seed 2024, the catalogue's rule).
Then `monitor catalog validate --catalog OUT_DIR` checks everything
(tests/test_catalog_languages.py does all of this on every test run).
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
NEW = ("es", "pt", "ar", "hi", "id", "it", "tr", "ru")
LOCAL = {"es": ["ES", "MX", "AR", "CO", "CL"], "pt": ["BR", "PT"], "ar": ["SA", "AE", "EG"],
         "hi": ["IN"], "id": ["ID"], "it": ["IT"], "tr": ["TR"], "ru": ["RU"]}


def _read(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        return list(reader.fieldnames or []), list(reader)


def merge(root: Path, staged: Path = HERE) -> None:
    """Merge the staged data in `staged` into the catalogue copy at `root` (in place)."""
    from monitor.catalog.pairs import draw_pairs, write_pairs
    from monitor.catalog.rules import check_languages, check_options

    HERE_ = staged
    names = {lang: {(r["scenario"], r["id"]): r["name"] for r in _read(HERE_ / f"{lang}.csv")[1]}
             for lang in NEW}
    for opt_path in sorted((root / "options").glob("*.csv")):
        scenario = opt_path.stem
        header, rows = _read(opt_path)
        key = header[0]
        old_langs = header[2:]
        out = [{"option_id": r[key], "country": r["country"],
                **{lang: r[lang] for lang in old_langs},
                **{lang: names[lang][(scenario, r[key])] for lang in NEW}} for r in rows]
        _, added = _read(HERE_ / "new-options" / f"{scenario}.csv")
        taken = {r["option_id"] for r in out}
        for r in added:
            assert r["option_id"] not in taken, (scenario, r["option_id"])
            out.append({"option_id": r["option_id"], "country": r["country"],
                        **{lang: r[lang] for lang in (*old_langs, *NEW)}})
        with opt_path.open("w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, ["option_id", "country", *old_langs, *NEW],
                                    lineterminator="\n")
            writer.writeheader()
            writer.writerows(out)
        src_path = root / "sources" / f"{scenario}.csv"
        src_header, src_rows = _read(src_path)
        src_rows += [{"id": r["option_id"], "source": r["source"], "rank": r["rank"],
                      "note": r["note"]} for r in added]
        with src_path.open("w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, src_header, lineterminator="\n")
            writer.writeheader()
            writer.writerows(src_rows)
    for lang in NEW:
        shutil.copy(HERE_ / "prompts" / f"{lang}.yaml", root / "prompts" / f"{lang}.yaml")
    with (root / "languages.yaml").open("a", encoding="utf-8") as fh:
        for lang in NEW:
            fh.write(f"{lang}: [{', '.join(LOCAL[lang])}]\n")
    problems: list = []  # type: ignore[type-arg]
    languages = check_languages(root / "languages.yaml", problems)
    for opt_path in sorted((root / "options").glob("*.csv")):
        options = check_options(opt_path, languages, problems)
        write_pairs(root / "pairs" / opt_path.name,
                    draw_pairs(options, languages["en"], 100, 2024))


if __name__ == "__main__":
    import sys

    merge(Path(sys.argv[1]))
