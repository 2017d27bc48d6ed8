"""The commands over recorded results: `history`, `compare`, `bundle`, `site`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from compbench.cli.common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, _err, _load


HISTORY_FORMATS = ("md", "json", "csv")


def cmd_history(args: argparse.Namespace) -> int:
    """A metric of a (model, task), or a model family's, across the suite's recorded runs: a table and a plot."""
    from compbench.bundle import open_results
    from compbench.files import write_atomic
    from compbench.history import history_of, to_csv, to_json, to_markdown
    from compbench.history.plot import write_history_plot
    from compbench.suite import load_suite

    suite = load_suite(args.suite).name if Path(args.suite).is_file() else args.suite
    results = Path(args.results) if args.results else Path("results") / suite
    with open_results(results) as view:
        history = history_of(view.directory, str(results), suite, args.model, args.task, args.metric, args.last)
    text = {"md": to_markdown, "json": to_json, "csv": to_csv}[args.format](history)
    if args.output:
        print(f"wrote {write_atomic(Path(args.output).parent, Path(args.output).name, text)}", file=sys.stderr)
    else:
        print(text, end="")
    if args.plot:
        print(f"wrote {write_history_plot(history, Path(args.plot))}", file=sys.stderr)
    return EXIT_OK


COMPARE_FORMATS = ("md", "json", "github")


def cmd_compare(args: argparse.Namespace) -> int:
    """Pair two runs' cells and say which regressed, were fixed, are new or gone; exit 1 when --fail-on says so."""
    from compbench.compare import compare_sides, github_summary, load_side, to_json, to_markdown
    from compbench.files import write_atomic

    formats = [f.strip() for f in (args.format or "").split(",") if f.strip()]
    unknown = [f for f in formats if f not in COMPARE_FORMATS]
    if unknown:
        _err(f"--format {','.join(unknown)}: not a compare format; use any of {', '.join(COMPARE_FORMATS)}, comma-separated")
        return EXIT_USAGE
    results = Path(args.results) if args.results else None
    comparison = compare_sides(load_side(args.a, results), load_side(args.b, results))
    markdown = to_markdown(comparison)
    print(markdown, end="")
    out = Path(args.out)
    for fmt in dict.fromkeys(formats):
        if fmt == "github":
            target = github_summary(comparison)
            print(f"GitHub step summary: {target}" if target else
                  "compbench: note: --format github: $GITHUB_STEP_SUMMARY is not set (not in a GitHub Actions job); "
                  "nothing written for it", file=sys.stderr)
        else:
            path = write_atomic(out, f"compare.{fmt}", markdown if fmt == "md" else to_json(comparison))
            print(f"wrote {path}", file=sys.stderr)
    return EXIT_FAILED if comparison.fails(args.fail_on) else EXIT_OK


def cmd_bundle(args: argparse.Namespace) -> int:
    """Write one file holding a suite's results: its store (every run and record), the suite file, summary.json, hashes."""
    from compbench.bundle import write_bundle

    loaded = _load(args)
    results = Path(args.results) if args.results else Path("results") / loaded.name
    manifest = write_bundle(results, loaded, Path(args.output), current=args.current)
    left = (f"; {manifest['superseded_left_out']} superseded records and "
            f"{len(manifest['runs_left_out'].split())} runs that reported them left out" if args.current else "")
    print(f"wrote {args.output}: suite {loaded.name!r}, {manifest['records']} records of {results / 'store'}{left} "
          f"(bundle format {manifest['bundle_format']}, compbench {manifest['compbench_version']}, "
          f"suite sha256 {manifest['suite_sha256'][:12]})")
    return EXIT_OK


def cmd_site(args: argparse.Namespace) -> int:
    """Build one static HTML site over several suites' results (directories or bundles)."""
    from compbench.site import build_site

    site = build_site([Path(p) for p in args.results], Path(args.output))
    print(f"wrote {site.index}: {len(site.suites)} suite(s), {len(site.models)} model page(s), "
          f"{sum(len(s.history) for s in site.suites)} history plot(s); open it in a browser")
    return EXIT_OK
