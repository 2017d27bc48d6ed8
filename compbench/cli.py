"""The `compbench` command: run, report, check, baseline, compare, history, bundle, site, list, show, validate."""

from __future__ import annotations

import argparse
import math
import os
import re
import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from compbench.limits import MAX_SEED

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def _err(msg: str) -> None:
    print(f"compbench: {msg}", file=sys.stderr)


def _load(args: argparse.Namespace, profile: str | None = None):  # -> LoadedSuite
    """Load the suite a command names and say which file it is (a bare name is a bundled suite)."""
    from compbench.suite import load_suite

    loaded = load_suite(args.suite, profile=profile)
    _say_loaded(loaded, profile)
    return loaded


def _say_loaded(loaded, profile: str | None, where: str | None = None) -> None:  # loaded: LoadedSuite
    """Say on stderr which suite file a command loaded (`where`: the bundle that carries it), and with which profile."""
    shown = f" with profile {profile!r}" if profile else ""
    origin = f"{where} (its suite file {Path(str(loaded.path)).name})" if where else loaded.path
    print(f"suite {loaded.name!r} from {origin}{shown}", file=sys.stderr)


def _print_outcome(outcome) -> None:  # outcome: compbench.outcome.SuiteOutcome
    """The outcome's problems on stderr, one line each (nothing when it passes)."""
    for line in outcome.problems():
        print(f"  {line}", file=sys.stderr)
    for line in outcome.warnings:
        print(f"  warning: {line}", file=sys.stderr)


# Numeric flags are checked by argparse, by the same kind of rule as the suite's fields: a bad value
# is a usage error naming the flag (exit 2), never a value silently replaced.
def int_in(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse `type=`: a whole number (ASCII digits) from `low` to `high`."""
    def parse(text: str) -> int:
        if not re.fullmatch(r"[+-]?[0-9]+", text.strip()):
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
        value = int(text)
        if value < low or (high is not None and value > high):
            shown = f"{value:,}" if len(text) < 40 else f"a {len(text)}-digit number"
            raise argparse.ArgumentTypeError(f"must be {'at least' if high is None else 'from'} {low:,}"
                                             + (f" to {high:,}" if high is not None else "") + f", got {shown}")
        return value

    parse.__name__ = "whole number"  # argparse names the type in its own messages
    return parse


def positive_float(text: str) -> float:
    """An argparse `type=`: a finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def unit_interval(text: str) -> float:
    """An argparse `type=`: a number strictly between 0 and 1 (a false-discovery level)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be a number between 0 and 1 (e.g. 0.05), got {text!r}")
    return value


positive_int = int_in(1)
seed_int = int_in(0, MAX_SEED)  # a seed every backend takes (as a suite's seeds: compbench.limits.MAX_SEED)


def _print_report_scope(out_dir: Path, published, partial: bool) -> None:  # published: report.publish.Published
    """After a partial run: say that the report is of the whole suite, or why the report there was kept."""
    if published.kept:
        n = len(published.kept)
        _err(f"the report in {out_dir} was left as it was: it shows {n} cell(s) outside this run's selection that its "
             f"store does not hold (e.g. {published.kept[0]}; a results directory published without its store), so "
             "it is fuller than this run's report would be; run the whole suite there to rewrite it (or `compbench "
             "report` to rewrite it from the store as it is)")
    elif partial:
        whole = published.outcome
        print(f"report: the whole suite as the store holds it ({whole.headline()}); only the selected cells were run")


def _adapter_registry():  # the adapter registry, imported when `list` needs it
    from compbench.adapters import ADAPTERS

    return ADAPTERS


def _plan(args: argparse.Namespace, loaded, **request: Any):  # (args, LoadedSuite, RunRequest fields) -> session.Plan
    """The plan of a command that trains (`run`, `check`, `baseline record`): its arguments as a RunRequest; the
    models it adds are said on stdout. A request compbench refuses raises RequestError (`compbench: ...`, exit 2)."""
    from compbench import session
    from compbench.suite import parse_model_args

    try:
        model_args = parse_model_args(args.model_args or "")
    except ValueError as exc:
        raise session.RequestError("model_args", str(exc), lead=False) from None
    tags = tuple(t.strip() for t in (args.model_tags or "").split(",") if t.strip())
    plan = session.plan(session.RunRequest(
        loaded, profile=args.profile, models=tuple(args.model) if args.model else None, model_args=model_args,
        tags=tags, seeds=args.seeds, device=args.device, threads=args.threads, progress=not args.quiet,
        command=args.command_line, **request))
    _say_added(plan, args.model_args)
    return plan


def _say_added(plan, model_args: str | None) -> None:  # plan: session.Plan
    """One line per model the plan added: its parameters (given, and the suite's added_networks) and its tasks."""
    given_args = plan.request.model_args or {}
    settings = plan.whole.suite.added_networks
    for given, model_id in plan.added.items():
        spec = next(m for m in plan.whole.models if m.id == model_id)
        from_suite = {k: v for k, v in spec.raw_params.items() if k in settings and k not in given_args}
        dropped = sorted(k for k in settings if k not in spec.raw_params) if "networks" in spec.tags else []
        shown = f"parameters {model_args}" if model_args else "its default parameters"
        if from_suite:
            shown += (" and" if model_args else ",") + " the suite's added_networks " + ",".join(f"{k}={v}" for k, v in from_suite.items())
        what = f"adapter {given!r}" if given == model_id else f"model {model_id!r} from {given}"
        print(f"adding {what} with {shown} on every task of {plan.whole.name} whose inputs it takes"
              + (f" (not {', '.join(dropped)}: its adapter does not take them)" if dropped else ""))


def cmd_run(args: argparse.Namespace) -> int:
    """Run a suite, write its report, exit non-zero if an expectation or a cell failed."""
    from compbench import session
    from compbench.report.publish import parse_formats

    formats = parse_formats(args.format)
    plan = _plan(args, _load(args, args.profile), tasks=tuple(args.task) if args.task else None, force=args.force,
                 fail_fast=args.fail_fast, executor=args.executor, workers=args.workers, address=args.address,
                 gpus_per_job=args.gpus_per_cell, cell_timeout=args.cell_timeout,
                 results=Path(args.results) if args.results else None, formats=formats, verbose=args.verbose)
    result = session.run(plan)
    skipped: list[str] = []
    published = session.report(plan, result, skipped)
    return _show_run(args, plan, result, published, skipped)


def _show_run(args: argparse.Namespace, plan, result, published, skipped: list[str]) -> int:  # session's Plan, RunResult, Published
    """What `run` says after a run: the summary line, the leaderboard, the added models' verdicts, the files; its exit code."""
    from compbench import session
    from compbench.outcome import verdict_counts
    from compbench.report import terminal
    from compbench.report.terminal import one_line

    facts, outcome, out_dir = result.facts, result.outcome, plan.out_dir
    verdicts = outcome.verdicts
    print(
        f"{plan.suite.name}: {facts.n_run} cells run, {facts.n_cached} reused from the cache"
        + (f" ({facts.n_rescored} rescored by this compbench's scoring code, not retrained)" if facts.n_rescored else "")
        + f" ({out_dir / 'store'}), {facts.n_failed} failed, {facts.n_skipped} skipped; "
        f"expectations {verdict_counts(verdicts)}; {facts.wall_time:.1f} s on {facts.device}"
        + (f" ({facts.workers} worker process{'es' if facts.workers != 1 else ''})" if facts.executor == "process" else "")
    )
    # The compact leaderboard (not with -q), then each failing expectation and each failed cell's first error;
    # an added model is shown beside the suite's models the store holds (shown, not judged again).
    shown, records = session.shown(plan, result, published.outcome)
    terminal.print_leaderboard(shown, records, verdicts, every_error=args.verbose, table=not args.quiet)
    terminal.print_fit_warnings(shown, records)
    for name in plan.added.values():
        mine = [v for v in verdicts if v.subject == name]
        used = sorted({p for e in plan.suite.suite.expectations for p in e.models if p.startswith("@")})
        why = (f" (no expectation selects it; the suite's claims select by {', '.join(used)}: --model-tags "
               f"{used[0][1:]} puts it under those)" if used else " (no expectation of this suite selects models by tag)")
        print(f"{name}: the suite's claims about it: {verdict_counts(mine)}" + ("" if mine else why))
        for v in mine:
            print(one_line(f"  {v.line()}"))
    _print_report_scope(out_dir, published, plan.partial)
    if not published.kept:
        terminal.print_files(out_dir, published.paths)
    _print_skipped(skipped, plan.request.formats)
    if result.summary.interrupted:
        print("interrupted: finished cells are kept; run the same command again to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    if result.summary.failed_cell is not None:
        print(one_line(f"stopped at the first failed cell (--fail-fast): {result.summary.failed_cell}"), file=sys.stderr)
        print("finished cells are kept; run the same command again to retry it and run the rest", file=sys.stderr)
        _print_outcome(outcome)
        return EXIT_FAILED
    _print_outcome(outcome)
    return outcome.exit_code


def _report_config(args: argparse.Namespace, view):  # (args, ResultsView | None) -> (LoadedSuite, Path, Path, RunConfig, str)
    """The suite as the results' last run asked for it (report.run_config), unless --profile names another profile
    (`default`: none): (suite, folder the report goes to, folder the results are read from, configuration, the line
    that says which configuration the report states). A bundle (`view`) brings its own suite file."""
    from compbench.outcome import SUMMARY_FILE
    from compbench.report.run_config import RecordedConfigError, recorded_config, with_profile
    from compbench.suite import SuiteError, load_suite
    from compbench.suite.schema import DEFAULT_PROFILE

    bundle = view is not None and view.is_bundle
    if not args.suite and not bundle:
        raise RecordedConfigError("report needs --suite NAME (or --results FILE, a bundle, which holds its suite)")
    if bundle and not args.report_dir:
        raise RecordedConfigError(f"--results {view.label} is a bundle, which compbench never writes into; give "
                                  "--report-dir DIR, the folder its report goes to")
    if bundle and Path(args.report_dir).resolve() == Path(view.label).resolve():
        raise RecordedConfigError(f"--report-dir {args.report_dir} is the bundle itself, which compbench never writes "
                                  "into; give a folder for its report")
    suite = str(view.suite_file) if bundle else args.suite
    asked = None if args.profile == DEFAULT_PROFILE else args.profile
    loaded = load_suite(suite, asked)
    if bundle and args.suite and load_suite(args.suite).name != loaded.name:
        raise RecordedConfigError(f"--suite {args.suite} is not the suite of the bundle {view.label} ({loaded.name!r}); "
                                  "leave --suite out: a bundle's report is of the suite it carries")
    if args.profile == DEFAULT_PROFILE and DEFAULT_PROFILE in loaded.suite.profiles:  # the suite's own profile of that name
        asked = DEFAULT_PROFILE
        loaded = load_suite(suite, asked)
    source = view.directory if view is not None else Path("results") / loaded.name
    out_dir = Path(args.report_dir) if args.report_dir else source
    shown = Path(view.label) if view is not None else source  # a bundle by its own name, not its temporary copy's
    recorded = recorded_config(source, loaded.name)
    profile = asked if args.profile is not None or recorded is None else recorded.profile
    if profile != asked:
        try:
            loaded = load_suite(suite, profile)
        except SuiteError as exc:
            raise RecordedConfigError(f"{shown}: its last run used profile {profile!r}, which suite {loaded.name!r} "
                                      f"cannot load ({exc.issues[0].message}); name a profile with --profile") from None
    _say_loaded(loaded, profile, view.label if bundle else None)
    config = with_profile(recorded, profile)
    loaded = config.apply(loaded, shown / SUMMARY_FILE)
    said = f"configuration: {config.describe()}"
    if recorded is not None and recorded.profile != profile:
        said += f", as --profile {args.profile} asks; the last run in {shown} used {recorded.profile_shown}"
    elif recorded is not None:
        said += f", as the last run in {shown} asked"
    return loaded, out_dir, source, config, said


def cmd_report(args: argparse.Namespace) -> int:
    """Rebuild a suite's tables from its stored records (a results directory's, or a bundle's), without training,
    for the configuration its last run asked for."""
    from contextlib import nullcontext

    from compbench.bundle import open_results
    from compbench.report import terminal
    from compbench.report.publish import parse_formats, rebuild

    formats = parse_formats(args.format)
    # The view is closed before an error is shown: a message about a bundle names the bundle, not its temporary copy.
    with open_results(Path(args.results)) if args.results else nullcontext() as view:
        loaded, out_dir, source, config, said = _report_config(args, view)
        skipped: list[str] = []
        outcome, paths = rebuild(out_dir, loaded, formats, skipped, profile=config.profile, config=config, source=source)
    verdicts = outcome.verdicts
    print(said)
    terminal.print_report_end(out_dir, loaded, outcome.records, verdicts, paths, every_error=args.verbose, table=not args.quiet)
    terminal.print_fit_warnings(loaded, outcome.records)
    print(f"{outcome.headline()}; {len(paths)} report files in {out_dir}")
    _print_skipped(skipped, formats)
    _print_outcome(outcome)
    return outcome.exit_code


def _print_skipped(skipped: list[str], formats: tuple[str, ...]) -> None:
    """Say which report writers were not run because their inputs hash to what they last wrote."""
    if not skipped:
        return
    n = len(skipped)
    what = f"{n} writer{'s' if n != 1 else ''} skipped ({', '.join(skipped)}; inputs identical)"
    print(f"report unchanged: {what}" if n == len(formats) else f"report partly rewritten: {what}")


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
        plan = _plan(args, loaded, seed_start=args.seed_start, results=view.directory)
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


def _kinds():  # -> list[(title, Registry)]
    from compbench.adapters import ADAPTERS
    from compbench.claims import CLAIMS
    from compbench.encodings import ENCODINGS
    from compbench.report.writers import REPORTERS
    from compbench.tasks import FAMILIES

    return [("task families", FAMILIES), ("encodings", ENCODINGS), ("adapters", ADAPTERS), ("claims", CLAIMS),
            ("report formats", REPORTERS)]


def _first_line(text: str | None) -> str:
    return (text or "").strip().split("\n")[0].strip()


def _doc_of(obj: object) -> str:
    for attr in ("doc", "__doc__"):
        text = getattr(obj, attr, None)
        if isinstance(text, str) and text.strip():
            return text
    return getattr(type(obj), "__doc__", "") or ""


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
    manifest = write_bundle(results, loaded, Path(args.output))
    print(f"wrote {args.output}: suite {loaded.name!r}, {manifest['records']} records of {results / 'store'} "
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


def cmd_list(args: argparse.Namespace) -> int:
    """List bundled suites and every registered extension (built-in and plugins) with one line each."""
    from compbench.suite import bundled_suites

    print("suites:")
    try:
        for name in bundled_suites():
            print(f"  {name}")
    except FileNotFoundError as exc:  # an install without its suites: say where they were looked for
        print(f"  none: {exc}")
    for title, registry in _kinds():
        print(f"{title}:")
        for entry in registry.entries():
            where = f" [{entry.distribution}]" if entry.distribution else ""
            print(f"  {entry.name:<24} {_first_line(_doc_of(entry.obj))}{where}")
        for prefix in registry.prefixes:
            print(f"  {prefix + '<name>':<24} any model of that library, created on demand")
        if registry is _adapter_registry():
            print(f"  {'FILE.py:Name':<24} a model from a file (or package.module:Name): an Adapter subclass, or any "
                  "nn.Module factory build(in_shape, n_out), trained with its eNTK theory (--model FILE.py:Name)")
        for name, why in sorted(registry.broken.items()):
            print(f"  {name:<24} BROKEN, skipped: {why}")
    print("`compbench show NAME` prints one's parameters with defaults and docs.")
    return EXIT_OK


def _params_lines(model: object) -> list[str]:
    from pydantic import BaseModel

    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return ["  (no parameters)"]
    lines = []
    for name, info in model.model_fields.items():
        default = "required" if info.is_required() else f"default {info.get_default(call_default_factory=True)!r}"
        ann = str(info.annotation).replace("typing.", "")
        ann = ann if "[" in ann or "|" in ann else getattr(info.annotation, "__name__", ann)
        lines.append(f"  {name}: {ann} ({default})" + (f" — {info.description}" if info.description else ""))
    return lines or ["  (no parameters)"]


def cmd_show(args: argparse.Namespace) -> int:
    """Print an extension's parameters with defaults and docs (any kind; ambiguous names show every kind)."""
    shown = 0
    for title, registry in _kinds():
        if args.name not in registry:
            continue
        entry = registry.entry(args.name)
        obj = entry.obj
        kind = {"task families": "task family", "encodings": "encoding", "adapters": "adapter", "claims": "claim"}.get(title, "report format")
        print(f"{args.name} ({kind}; from {entry.source})")
        doc = _doc_of(obj).strip()
        if doc:
            print("  " + doc.replace("\n", "\n  "))
        for attr in ("inputs", "tags", "kinds", "metrics", "produces"):
            value = getattr(obj, attr, None)
            if value and isinstance(value, (tuple, list, str)):
                print(f"  {attr}: {value if isinstance(value, str) else ', '.join(value)}")
        params = getattr(obj, "Params", None) or getattr(obj, "params_model", None)
        print("parameters:")
        print("\n".join(_params_lines(params)))
        shown += 1
    if not shown:
        from compbench.adapters import ADAPTERS

        _err(f"nothing is registered as {args.name!r}; " + ADAPTERS.unknown_message(args.name).split(";", 1)[-1].strip()
             + " — see `compbench list`")
        return EXIT_USAGE
    return EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    """Validate a suite file without running it."""
    from compbench.suite import load_suite

    loaded = load_suite(args.path)
    n_cells = sum(len(loaded.tasks_for(m)) * len(m.seeds) for m in loaded.models)
    if args.quiet:
        return EXIT_OK
    print(
        f"{args.path}: OK: suite {loaded.name!r}, {len(loaded.suite.tasks)} tasks, {len(loaded.models)} models "
        f"(after sweeps), {n_cells} cells, {len(loaded.suite.expectations)} expectations"
    )
    if args.verbose:
        for t in loaded.suite.tasks:
            print(f"  task {t.id}: {t.family}, {loaded.task_kinds[t.id]}")  # every task of a valid suite has its kind
        for m in loaded.models:
            print(f"  model {m.id}: {m.adapter}, {len(m.seeds)} seed(s), on {', '.join(t.id for t in loaded.tasks_for(m))}")
    return EXIT_OK


DEFAULT_FORMATS = ("md", "csv", "html", "png", "predictions")  # = compbench.report.writers.DEFAULT_FORMATS (no import at parse time)


def _limit_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-cells", type=positive_int, metavar="N", help="allow tasks of up to N cells (and N samples per task)")
    p.add_argument("--max-seeds", type=positive_int, metavar="N", help="allow up to N seeds per model")
    p.add_argument("--max-models", type=positive_int, metavar="N", help="allow up to N models after sweep expansion")
    p.add_argument("--max-task-gib", type=positive_int, metavar="N", help="allow an encoding to render up to N GiB of inputs per task")


def _model_options(p: argparse.ArgumentParser) -> None:
    """`--model`, `--model-args`, `--model-tags` of the commands that train (`_add_models`)."""
    p.add_argument("--model", action="append", metavar="GLOB|ADAPTER|FILE.py:Name[=ID]",
                   help="only models whose id or sweep id matches (glob; repeatable); an adapter name that is no model "
                        "of the suite adds that adapter with its default parameters; FILE.py:Name or package.module:Name "
                        "adds that model (an Adapter subclass or an nn.Module factory build(in_shape, n_out)), "
                        "named ID after '=' (a/net.py:Net=net-a) or else Name")
    p.add_argument("--model-args", metavar="K=V,...", help="parameters of an adapter added with --model (e.g. width=64,lr=0.01)")
    p.add_argument("--model-tags", metavar="TAG,...", help="tags of a model added with --model, beside its adapter's (e.g. lazy: the suite's @lazy claims judge it)")


def _threads_option(p: argparse.ArgumentParser) -> None:
    """`--threads N` of the commands that train (compbench.runner.threads)."""
    from compbench.runner.threads import MAX_THREADS

    p.add_argument("--threads", type=int_in(0, MAX_THREADS), metavar="N",
                   help="torch threads per process that trains (default 1 per process, each pool worker included: "
                        "small tensors gain little from more, and lose much on a busy machine); 0: torch's own default")


def _apply_limits(args: argparse.Namespace) -> None:
    from compbench.limits import set_limits

    changes = {}
    if getattr(args, "max_cells", None) is not None:
        changes.update(cells_per_task=args.max_cells, samples_per_task=args.max_cells)
    if getattr(args, "max_seeds", None) is not None:
        changes["seeds"] = args.max_seeds
    if getattr(args, "max_models", None) is not None:
        changes["models"] = args.max_models
    if getattr(args, "max_task_gib", None) is not None:
        changes["task_bytes"] = args.max_task_gib * 2**30
    if changes:
        set_limits(**changes)


def _verbosity(p: argparse.ArgumentParser, quiet: str, verbose: str) -> None:
    """-q/--quiet and -v/--verbose, with what each does for this command.

    Not exclusive: they govern different output (`check -q -v`: no progress display, every comparison).
    """
    p.add_argument("-q", "--quiet", action="store_true", help=quiet)
    p.add_argument("-v", "--verbose", action="store_true", help=verbose)


def _results_option(p: argparse.ArgumentParser, deprecated_out: bool) -> None:
    """`--results DIR`, the one name of the results directory in every command.

    `run` and `report` called it `--out` before; that spelling still works there (same destination),
    so no script breaks, but only `--results` is documented.
    """
    names = ["--results", "--out"] if deprecated_out else ["--results"]
    p.add_argument(*names, dest="results", metavar="DIR",
                   help="results directory holding the store and the report (default results/<suite name>)"
                        + ("; --out is a deprecated alias" if deprecated_out else ""))


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `compbench` command."""
    from compbench import __version__

    parser = argparse.ArgumentParser(prog="compbench", description=__doc__)
    parser.add_argument("--version", action="version", version=f"compbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="train, theory-predict and score every cell of a suite")
    run.add_argument("--suite", required=True, help="suite name (suites/NAME.yaml) or path to a YAML file")
    _model_options(run)
    run.add_argument("--seeds", type=positive_int, help="override the number of seeds (seeds 0..N-1)")
    run.add_argument("--profile", help="apply a named profile of the suite (e.g. 'full' for GPU runs)")
    run.add_argument("--task", action="append", metavar="GLOB",
                     help="only tasks whose id matches (glob; repeatable); like --model, expectations are judged on what ran")
    _results_option(run, deprecated_out=True)
    run.add_argument("--fail-fast", action="store_true",
                     help="stop at the first failed cell (--executor local), keep what finished, write the report, exit 1")
    run.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    run.add_argument("--force", action="store_true", help="recompute the selected cells (all, or those of --model), replacing their stored records")
    run.add_argument("--executor", default="auto", choices=["auto", "local", "process", "ray"],
                     help="where cells run: auto (default: a pool of one-thread workers on every usable core when there is "
                          "enough to compute, else this process), this process, a local process pool (--workers), or Ray")
    run.add_argument("--workers", type=positive_int, default=None,
                     help="process-pool size (--executor auto or process; default one per usable core; at most 2 per usable "
                          "core, and one per cell to run)")
    run.add_argument("--address", help="Ray cluster address (--executor ray; default: start a local instance)")
    run.add_argument("--cell-timeout", type=positive_float, metavar="SECONDS",
                     help="kill a job running longer and record it as an error (--executor process or ray)")
    run.add_argument("--gpus-per-cell", type=positive_float, default=0.25,
                     help="GPU fraction Ray reserves per job on CUDA, so small cells share a GPU (default 0.25)")
    _verbosity(run, "no progress display and no leaderboard table (the summary line, failing expectations and errors only)",
               "a progress line for every finished job, and every failed seed's error")
    run.add_argument("--format", default=",".join(DEFAULT_FORMATS), help=f"report formats, comma-separated (default {','.join(DEFAULT_FORMATS)}; any registered writer)")
    _limit_options(run)
    _threads_option(run)
    run.set_defaults(func=cmd_run)
    rep = sub.add_parser("report", help="rebuild a suite's leaderboard from stored records (no training)")
    rep.add_argument("--suite", help="suite name or path (not needed with a bundle: it holds its suite)")
    _results_option(rep, deprecated_out=True)
    rep.add_argument("--report-dir", metavar="DIR",
                     help="write the report here rather than into the results directory (required when --results is a bundle)")
    _verbosity(rep, "no leaderboard table (the headline, failing expectations and errors only)", "every failed seed's error, not only the first per cell")
    rep.add_argument("--profile", help="report this profile's cells, not those of the profile the last run used (summary.json "
                                      "records it; default: no profile)")
    rep.add_argument("--format", default=",".join(DEFAULT_FORMATS), help=f"report formats, comma-separated (default {','.join(DEFAULT_FORMATS)})")
    rep.set_defaults(func=cmd_report)
    def run_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--suite", required=True, help="suite name or path")
        _results_option(p, deprecated_out=False)
        p.add_argument("--seeds", type=positive_int, help="number of seeds")
        p.add_argument("--seed-start", type=seed_int, help="first seed (with --seeds; default 0)")
        p.add_argument("--profile", help="a named profile of the suite")
        p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
        _model_options(p)
        _threads_option(p)
        _verbosity(p, "no progress display", "every comparison (check) or every recorded cell (baseline record)")

    base = sub.add_parser("baseline", help="record baselines for `compbench check`")
    base_sub = base.add_subparsers(dest="baseline_command", required=True)
    rec = base_sub.add_parser("record", help="run the suite and record per-cell score distributions over seeds")
    run_options(rec)
    rec.add_argument("--out", required=True, help="baseline JSON file to write, e.g. baselines/<family>.json")
    rec.set_defaults(func=cmd_baseline_record)
    chk = sub.add_parser("check", help="fail when a model's scores regress beyond seed noise against a baseline")
    run_options(chk)
    chk.add_argument("--baseline", required=True, help="baseline JSON file, the name of a bundled one (kernel-limits), "
                                                        "or history:N, the trailing N runs in --results")
    chk.add_argument("--fdr", type=unit_interval, metavar="Q",
                     help="gate on Benjamini–Hochberg at level Q over the cells' one-sided Welch p-values (floors kept) "
                          "instead of k·SE, which is shown beside")
    chk.add_argument("--k", type=positive_float, help="tolerance in combined standard errors (default per metric: 2.5)")
    chk.add_argument("--update", action="store_true", help="write the current scores as the new baseline")
    chk.add_argument("--allow-new", action="store_true",
                     help="accept cells the baseline does not have (by default a new cell fails the check)")
    chk.set_defaults(func=cmd_check)
    cmp = sub.add_parser("compare", help="pair two runs' cells (suite, model, task, seed): which regressed, were fixed, "
                                         "are new or gone, and which expectation verdicts flipped")
    cmp.add_argument("a", metavar="A", help="the earlier side: a results directory, or a run id of the store in --results")
    cmp.add_argument("b", metavar="B", help="the later side, likewise")
    cmp.add_argument("--results", metavar="DIR", help="the results directory whose store holds the run ids given as A or B")
    cmp.add_argument("--fail-on", choices=["regressed", "changed"],
                     help="exit 1 when a cell regressed or a verdict now fails (regressed), or on any change (changed)")
    cmp.add_argument("--format", metavar="LIST",
                     help="also write: md (compare.md, PR-comment sized), json (compare.json), github ($GITHUB_STEP_SUMMARY)")
    cmp.add_argument("--out", metavar="DIR", default=".", help="folder for compare.md and compare.json (default: here)")
    cmp.set_defaults(func=cmd_compare)
    his = sub.add_parser("history", help="a metric of a (model, task) or a model family across a suite's recorded runs, "
                                         "one row per run with its commit; --plot draws it")
    his.add_argument("--suite", required=True, help="suite name, or its file (its name is read from it)")
    _results_option(his, deprecated_out=False)
    his.add_argument("--model", action="append", metavar="GLOB", help="only models whose id matches (glob: a family; repeatable)")
    his.add_argument("--task", action="append", metavar="GLOB", help="only tasks whose id matches (glob; repeatable)")
    his.add_argument("--metric", help="the metric to show (default: each task's score, heldout_r2 or heldout_acc)")
    his.add_argument("--last", type=positive_int, metavar="N", help="only the last N runs")
    his.add_argument("--format", choices=HISTORY_FORMATS, default="md", help="md (a table, default), json or csv")
    his.add_argument("-o", "--output", metavar="FILE", help="write the table to FILE instead of printing it")
    his.add_argument("--plot", metavar="FILE", help="also draw it (.png or .svg): runs on the x axis, labelled by commit")
    his.set_defaults(func=cmd_history)
    bnd = sub.add_parser("bundle", help="write one file holding a suite's results (store with every run and record, "
                                        "suite file, summary.json, hashes) that report and compare read like a directory")
    bnd.add_argument("--suite", required=True, help="suite name or path")
    _results_option(bnd, deprecated_out=False)
    bnd.add_argument("-o", "--output", required=True, metavar="FILE", help="the bundle to write (e.g. kernel-limits.cbz)")
    bnd.set_defaults(func=cmd_bundle)
    site = sub.add_parser("site", help="build one static HTML site over several suites' results (directories or bundles)")
    site.add_argument("results", nargs="+", metavar="DIR_OR_BUNDLE", help="results directories (results/<suite>) or bundles")
    site.add_argument("-o", "--output", required=True, metavar="DIR", help="the folder the site is written to")
    site.set_defaults(func=cmd_site)
    lst = sub.add_parser("list", help="bundled suites and every registered task family, encoding, adapter, claim, report format")
    lst.set_defaults(func=cmd_list)
    show = sub.add_parser("show", help="an adapter's, task family's, encoding's, claim's or report format's parameters")
    show.add_argument("name")
    show.set_defaults(func=cmd_show)
    val = sub.add_parser("validate", help="check a suite file without running it")
    val.add_argument("path")
    _verbosity(val, "no output when the suite is valid (the exit code says it)", "list the models and tasks")
    _limit_options(val)
    val.set_defaults(func=cmd_validate)
    return parser


@contextmanager
def _fewer_full_collections() -> Iterator[None]:
    """Fewer full garbage collections while a command runs (the previous thresholds are restored).

    A run holds every record of the suite (15 000 for kernel-limits, each with its prediction
    lists) for its whole life, and each full collection walks all of them: four of them were
    about 0.3 s of a 2 s cached run. Young objects are still collected as usual; a full
    collection now waits for ten times as many younger ones (CPython: threshold2 10 → 100).
    """
    import gc

    before = gc.get_threshold()
    gc.set_threshold(before[0], before[1], 100)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `compbench` console script."""
    try:
        args = build_parser().parse_args(argv)
        args.command_line = shlex.join(["compbench", *(sys.argv[1:] if argv is None else argv)])  # the runs table's
        _apply_limits(args)
        from compbench.runner.memory import keep_freed_memory

        keep_freed_memory()  # training's large blocks are reused, not page-faulted back in every step
        with _fewer_full_collections():
            code = _dispatch(args)
        sys.stdout.flush()  # a closed pipe is met here, not in the interpreter's exit flush
        from compbench.runner.interrupt import EXIT_TERMINATED, ignore_further_interrupts

        if argv is None and code in (EXIT_INTERRUPTED, EXIT_TERMINATED):
            # The command line's process exits now: a further Ctrl-C must not traceback on the way out.
            ignore_further_interrupts()
        return code
    except BrokenPipeError:
        # The reader went away (`compbench list | head -1`). As the Python docs advise: point stdout
        # at devnull so the exit flush cannot fail again, and leave without a traceback.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):  # stdout is no file (captured in-process)
            pass
        return EXIT_FAILED


def _dispatch(args: argparse.Namespace) -> int:
    """Run the chosen command; exit codes for the errors every command can meet."""
    from compbench.errors import CompbenchError
    from compbench.runner.interrupt import EXIT_TERMINATED, sigterm_as_interrupt, terminated

    # SIGTERM (a CI job cancelled, `kill`) stops the run like Ctrl-C; the exit code says which it was.
    with sigterm_as_interrupt():
        try:
            code = args.func(args)
        except CompbenchError as exc:  # every error compbench raises on purpose says its line and its exit code
            print(exc.message(), file=sys.stderr)
            return exc.exit_code
        except KeyboardInterrupt:  # outside a run's own handling (e.g. while writing the report)
            print("interrupted: finished cells are kept; run the same command again to resume", file=sys.stderr)
            code = EXIT_INTERRUPTED
        return EXIT_TERMINATED if code == EXIT_INTERRUPTED and terminated() else code


if __name__ == "__main__":
    sys.exit(main())
