"""`compbench run` and `compbench report`: run a suite and write its report, or rebuild the report from the store."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from compbench.cli.common import EXIT_FAILED, EXIT_INTERRUPTED, _err, _load, _plan, _print_outcome, _print_skipped, _say_loaded


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
    _print_skipped(skipped, plan.request.formats, published.digest_cached)
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

    from compbench import session
    from compbench.bundle import open_results
    from compbench.report import terminal
    from compbench.report.publish import parse_formats

    formats = parse_formats(args.format)
    # The view is closed before an error is shown: a message about a bundle names the bundle, not its temporary copy.
    with open_results(Path(args.results)) if args.results else nullcontext() as view:
        loaded, out_dir, source, config, said = _report_config(args, view)
        plan = session.plan(session.RunRequest(loaded, profile=config.profile, results=source, formats=formats,
                                               stored_only=True, report_dir=out_dir, config=config))
        skipped: list[str] = []
        published = session.report(plan, skipped=skipped)
    outcome, paths = published.outcome, published.paths
    verdicts = outcome.verdicts
    print(said)
    terminal.print_report_end(out_dir, loaded, outcome.records, verdicts, paths, every_error=args.verbose, table=not args.quiet)
    terminal.print_fit_warnings(loaded, outcome.records)
    print(f"{outcome.headline()}; {len(paths)} report files in {out_dir}")
    _print_skipped(skipped, formats)
    _print_outcome(outcome)
    return outcome.exit_code



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
