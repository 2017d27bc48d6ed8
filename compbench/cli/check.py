"""`compbench check` and `compbench baseline record`: a run compared with, or recorded as, a baseline."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from compbench.cli.common import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, _err, _load, _plan, _print_outcome


def _run_for_check(args: argparse.Namespace, baseline_suite: str | None = None):  # -> (LoadedSuite, RunSummary, SuiteOutcome) | int
    """Load the suite, refuse bad input before anything trains, then run (or read cached) cells (no report)."""
    from compbench import session
    from compbench.bundle import open_results

    loaded = _load(args, args.profile)
    if baseline_suite is not None and baseline_suite != loaded.name:
        _err(f"baseline {args.baseline} is for suite {baseline_suite!r}, but --suite {args.suite} is suite "
             f"{loaded.name!r}; nothing was run (record a baseline for {loaded.name!r} with `compbench baseline record`)")
        return EXIT_USAGE
    out_dir = Path(args.results) if args.results else Path("results") / loaded.name
    with open_results(out_dir) as view:  # a bundle as a directory: a temporary copy, so the bundle is never written
        plan = _plan(args, loaded, seed_start=args.seed_start, results=view.directory,
                     tasks=tuple(args.task) if args.task else None)
        result = session.run(plan)
        print(f"{loaded.name}: {result.facts.n_run} cells run, {result.facts.n_cached} reused from the cache "
              + (f"(the bundle {view.label}; cells run here are not kept in it)" if view.is_bundle else f"({out_dir / 'store'})"))
    return plan.suite, result.summary, result.outcome


def _unrecordable(base) -> int | None:  # base: Baseline
    """EXIT_FAILED (after naming them) when a baseline would be hollow or record failed cells, else None."""
    if not base.cells:
        _err(f"no ok cells: refusing to write a baseline of suite {base.suite!r} that checks nothing")
        return EXIT_FAILED
    problems = base.problems()
    if problems:
        shown = problems[:20] + ([f"... and {len(problems) - 20} more"] if len(problems) > 20 else [])
        _err(f"refusing to record a baseline with {len(problems)} failed cell(s) (fix them or drop their models):\n  "
             + "\n  ".join(shown))
        return EXIT_FAILED
    return None


def cmd_baseline_record(args: argparse.Namespace) -> int:
    """Run (or read cached) cells and write their score distributions as a baseline."""
    from compbench.check import baseline_from_records

    result = _run_for_check(args)
    if isinstance(result, int):
        return result
    loaded, summary, outcome = result
    if summary.interrupted:
        return EXIT_INTERRUPTED
    base = baseline_from_records(loaded.name, outcome.records, summary.device, args.profile)
    refused = _unrecordable(base)
    if refused is not None:
        return refused
    base.write(Path(args.out))
    print(f"wrote baseline {args.out}: {len(base.cells)} cells")
    if args.verbose:
        for cell in sorted(base.cells):
            print(f"  {cell}")
    if not outcome.passed:  # recorded as measured; the suite's own verdict is still said, as run says it
        print(outcome.headline(), file=sys.stderr)
        _print_outcome(outcome)
    return outcome.exit_code


def cmd_check(args: argparse.Namespace) -> int:
    """Compare a run with a baseline; exit 1 when a cell regressed, failed, lost seeds, or is missing or new,
    or when the suite's own outcome fails (a failed expectation, as `run` would report it)."""
    from compbench.check import Baseline, baseline_from_records, cell_summaries, compare, format_rows, gate_by_fdr
    from compbench.history import parse_history_spec
    from compbench.suite import resolve_bundled

    if parse_history_spec(args.baseline) is not None:
        baseline = _history_reference(args)  # the trailing runs, read before this check adds its own
        if isinstance(baseline, int):
            return baseline
    else:
        # A bare name is a bundled baseline, by --suite's rule (a same-named ./baselines/NAME.json is an
        # ambiguity, refused); the file found is said, and every later use (--update too) is of that path.
        found = resolve_bundled("baselines", args.baseline, "--baseline")
        if str(found) != args.baseline:
            print(f"baseline {args.baseline!r} from {found}", file=sys.stderr)
            args.baseline = str(found)
        baseline = Baseline.read(Path(args.baseline))  # refuses empty and malformed baselines (exit 2)
        baseline.check_profile(Path(args.baseline), args.profile)  # and one of another profile, before anything runs
    result = _run_for_check(args, baseline.suite)
    if isinstance(result, int):
        return result
    loaded, summary, outcome = result
    if summary.interrupted:
        return EXIT_INTERRUPTED
    from compbench.report.terminal import print_fit_warnings

    print_fit_warnings(loaded, outcome.records)  # a warning: the exit code is the comparison's and the outcome's
    rows = compare(baseline, cell_summaries(outcome.records), k=args.k, allow_new=args.allow_new)
    if args.fdr is not None:
        rows = gate_by_fdr(rows, args.fdr)
    if args.verbose or any(r.verdict != "ok" or r.kse_verdict not in ("", "ok") for r in rows):
        print(format_rows(rows, only_notable=not args.verbose, fdr=args.fdr))
    tested = sum(math.isfinite(r.p_value) for r in rows)
    print(f"gate: Benjamini–Hochberg at q = {args.fdr:g} over {tested} one-sided Welch p-values, each metric's floor "
          "kept (the k·SE verdict shown beside)" if args.fdr is not None else
          f"gate: k·SE ({f'k = {args.k:g}' if args.k else 'k per metric, 2.5 by default'}) with each metric's floor")
    failed = [r for r in rows if r.failed]
    for r in failed:
        print(f"  {r.line()}")
    code = EXIT_FAILED if failed or not outcome.passed else EXIT_OK
    if args.update:
        new = baseline_from_records(loaded.name, outcome.records, summary.device, args.profile)
        refused = _unrecordable(new)
        if refused is None:
            new.write(Path(args.baseline))
            print(f"updated {args.baseline}: {len(new.cells)} cells")
            failed = []
        code = refused or outcome.exit_code
    print(outcome.headline())
    count = {v: sum(r.verdict == v for r in rows) for v in ("REGRESSED", "CHANGED", "missing", "new", "error", "non-finite", "fewer-seeds", "n/a")}
    n_cells = len({r.cell for r in rows})
    print(f"check {loaded.name} against {args.baseline}: {n_cells} cells, {len(rows)} comparisons, "
          f"{count['REGRESSED']} regressed, {count['CHANGED']} changed, {count['missing']} missing, {count['new']} new"
          f"{' (allowed)' if args.allow_new and count['new'] else ''}, {count['error']} with errors, "
          f"{count['non-finite']} non-finite, {count['fewer-seeds']} with fewer seeds, {count['n/a']} not applicable: "
          f"{'FAILED' if failed or not outcome.passed else 'passed'}{' (baseline updated)' if args.update and not failed else ''}")
    _print_outcome(outcome)
    return code


def _history_reference(args: argparse.Namespace):  # -> Baseline | int
    """`check --baseline history:N`'s reference: the trailing N runs of the results directory (or bundle)."""
    from compbench.bundle import open_results
    from compbench.history import commit_label, history_baseline, parse_history_spec
    from compbench.suite import load_suite

    if args.update:
        _err(f"--update writes a baseline file; --baseline {args.baseline} reads past runs and has none to write")
        return EXIT_USAGE
    name = load_suite(args.suite, profile=args.profile).name
    results = Path(args.results) if args.results else Path("results") / name
    with open_results(results) as view:
        baseline, runs = history_baseline(view.directory, str(results), name, args.profile,
                                          parse_history_spec(args.baseline) or 0)
    print(f"reference: {len(baseline.cells)} cells over {len(runs)} run(s) of {results}: "
          + ", ".join(f"{r.id} ({commit_label(r)})" for r in runs), file=sys.stderr)
    return baseline
