"""Publish a suite's results: verdicts, tables, plots and files, from a run or rebuilt from the store."""

from __future__ import annotations

import hashlib
import json
import operator
import os
from array import array
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compbench.records import CellRecord, as_records
from compbench.files import OutputError, is_temporary, read_contained, remove_contained, sha256_contained, write_atomic
from compbench.report.file_status import unchanged
from compbench.errors import CompbenchError
from compbench.report.writers import DEFAULT_FORMATS, REPORTERS, ReportContext
from compbench.claims import Verdict
from compbench.outcome import SUMMARY_FILE
from compbench.report.run_config import CONFIG_KEYS, RunConfig
from compbench.suite import LoadedSuite

if TYPE_CHECKING:  # the annotation only: compbench.outcome's functions are imported late, where used
    from compbench.outcome import SuiteOutcome

# Written when compbench first claims a results directory (check_owner): it writes only into its own.
MARKER_FILE = ".compbench"
MANIFEST_FILE = ".report/manifest.json"  # a folder: the results dir lists only the report's files
INPUTS_CACHE = ".report/inputs.json"  # the inputs digest of the last report, by its stored rows (cached_inputs_digest)
# Each report file's status when its sha256 was last checked (report.file_status): of this machine's copy, so not in the
# manifest, which is published with the report.
STATUS_CACHE = ".report/status.json"
_ARRAYS = ("predictions", "theory_predictions")


class NoResultsError(CompbenchError, RuntimeError):
    """There are no stored results to report."""


class ReportFormatError(CompbenchError, ValueError):
    """An unknown report format was asked for."""


class ForeignResultsError(OutputError):
    """The results directory holds another suite's report; publishing there would overwrite it."""


def parse_formats(text: str) -> tuple[str, ...]:
    """'md,csv' → ('md', 'csv'); names are registered report writers (unknown: an error with a suggestion)."""
    from compbench.registry import UnknownNameError

    formats = tuple(dict.fromkeys(f.strip() for f in text.split(",") if f.strip()))
    if not formats:
        raise ReportFormatError(f"no report format in {text!r}; choose from {', '.join(REPORTERS.names())}")
    for f in formats:
        try:
            REPORTERS.get(f)
        except UnknownNameError as exc:
            raise ReportFormatError(str(exc).replace("unknown report writer", "unknown report format")) from None
    return formats


def publish(
    out_dir: Path,
    loaded: LoadedSuite,
    records: list[CellRecord],
    summary: dict[str, Any],
    *,
    verdicts: list[Verdict],
    formats: tuple[str, ...] = DEFAULT_FORMATS,
    skipped: list[str] | None = None,
    selected: frozenset[tuple[str, str]] | None = None,
    source: Path | None = None,
) -> list[Path]:
    """Run the report writers asked for over the records and the verdicts judged on them; the paths written.

    md: leaderboard.md; csv: leaderboard.csv, theory.csv, records.csv, expectations.csv; html: one
    self-contained leaderboard.html (tables and plots inline); png: plots/*.png and plots/*.svg;
    predictions: predictions.parquet; predictions-csv: predictions.csv; plus any writer a plugin registers.
    `verdicts`: the outcome's verdicts (`compbench.outcome`, the one place expectations are judged), so the report
    states what the command exits with.
    A writer whose inputs hash to what `.report/manifest.json` recorded, and whose files all still
    have the sha256 it recorded, is not run again; its name is appended to `skipped`. The run
    summary (wall time, cells run and cached, date, commit) is not an input: a page keeps
    describing the run that produced its numbers. A results directory holds one suite's report:
    another suite's is refused (ForeignResultsError) before anything is written.
    `selected`: the (model, task) pairs a partial run selected (`SuiteOutcome.selected`): a plot
    that shows any other cell is never deleted by this report (None: the report is of the whole suite).
    `source`: the folder the records were read from, when not `out_dir` (`compbench report` from a bundle).
    """
    return _publish(out_dir, loaded, records, summary, verdicts=verdicts, formats=formats, skipped=skipped,
                    selected=selected, source=source)[0]


# What summary.json keeps of a run's summary (beside the suite's name): docs/reference/output-files.md names each.
SUMMARY_KEYS = ("device", "executor", "workers", "executor_reason", "wall_time", "n_run", "n_cached", "n_failed", "n_skipped",
                "n_missing", "n_stale", "interrupted", "selection", *CONFIG_KEYS)


def _publish(
    out_dir: Path, loaded: LoadedSuite, records: list[CellRecord], summary: dict[str, Any], *,
    verdicts: list[Verdict], formats: tuple[str, ...], skipped: list[str] | None,
    selected: frozenset[tuple[str, str]] | None, source: Path | None,
) -> tuple[list[Path], bool]:
    """`publish`, and whether the inputs digest came from its cache (cached_inputs_digest)."""
    records = as_records(records)
    check_owner(out_dir, loaded)
    # The suite's name is written whatever the summary says: it is what claims the directory.
    kept = {"suite": loaded.name, **{k: summary[k] for k in SUMMARY_KEYS if k in summary}}
    write_atomic(out_dir, SUMMARY_FILE, json.dumps(kept, indent=2))
    ctx = _Context(out_dir, loaded, records, verdicts, summary, formats, selected=selected, source=source)
    inputs, cached = cached_inputs_digest(out_dir, loaded, records, verdicts, formats, selected)
    manifest = _read_manifest(out_dir)
    written: dict[str, list[Path]] = {}
    to_run: list[str] = []
    statuses = _read_json(out_dir, STATUS_CACHE)
    known = dict(statuses)
    for name in formats:
        entry = manifest.get(name)
        if isinstance(entry, dict) and entry.get("digest") == writer_digest(inputs, name, REPORTERS.get(name)) \
                and unchanged(out_dir, entry, statuses):
            written[name] = [out_dir / f for f in entry["files"]]
            if skipped is not None:
                skipped.append(name)
        else:
            to_run.append(name)
    if statuses != known:
        write_atomic(out_dir, STATUS_CACHE, json.dumps(statuses))
    if _draws_plots(to_run, formats) and _can_fork():
        from compbench.report.plots import plots_state
        from compbench.runner.threads import usable_cores

        plots_dir = out_dir if "png" in formats else None
        state = plots_state(plots_dir, loaded, records, selected)
        if state.current is not None:
            ctx.plots = state.current  # still current: read back, nothing drawn
        else:
            ctx.drawing = _PlotWorker(plots_dir, loaded, records, selected, state, usable_cores())
    try:
        # The writers that never look at the plots run first, while the plots are being drawn.
        for name in sorted(to_run, key=lambda n: n not in _WITHOUT_PLOTS):
            writer = REPORTERS.get(name)
            before = manifest.pop(name, None)  # a writer stopped halfway must not be trusted next time
            _write_manifest(out_dir, manifest)
            paths_of = writer.write(ctx)
            _remove_retired(out_dir, writer, before, manifest)
            written[name] = paths_of
            beside = [p.with_suffix(".svg") for p in paths_of if p.suffix == ".png" and p.with_suffix(".svg").is_file()]
            files, beside_files = [_relative(out_dir, p) for p in paths_of], [_relative(out_dir, p) for p in beside]
            manifest[name] = {"digest": writer_digest(inputs, name, writer), "files": files,
                              "beside": beside_files,  # a plot's SVG is written with its PNG
                              "sha256": {f: sha256_contained(out_dir, f) for f in (*files, *beside_files)}}
            _write_manifest(out_dir, manifest)
    finally:
        if ctx.drawing is not None:
            ctx.drawing.stop()
    return [p for name in formats for p in written.get(name, [])], cached


def _remove_retired(out_dir: Path, writer: Any, before: Any, manifest: dict[str, Any]) -> None:
    """Remove the files this writer wrote last time (its manifest entry `before`) under a name it no longer writes
    (`writer.retired`: names from its code, never from the manifest), unless another writer's entry lists them."""
    listed = set(before.get("files", [])) if isinstance(before, dict) and isinstance(before.get("files"), list) else set()
    others = {f for entry in manifest.values() if isinstance(entry, dict) and isinstance(entry.get("files"), list)
              for f in entry["files"]}
    for name in getattr(writer, "retired", ()):
        if name in listed and name not in others:
            remove_contained(out_dir, name)


# Built-in writers that do not read ctx.plots (a plugin's writer may: it runs after them).
_WITHOUT_PLOTS = ("csv", "predictions", "predictions-csv")


def _draws_plots(to_run: list[str], formats: tuple[str, ...]) -> bool:
    """Whether a writer about to run needs the plots: png and html always, md when it links them."""
    return any(n in ("png", "html") or (n == "md" and "png" in formats) for n in to_run)


def _can_fork() -> bool:
    """A second process drawing the plots pays only where it can be forked (no pickling) and has a core of its own
    (runner.threads.usable_cores: affinity and cgroup quota, the cores the drawing processes are counted by)."""
    import multiprocessing

    from compbench.runner.threads import usable_cores

    return usable_cores() > 1 and "fork" in multiprocessing.get_all_start_methods() and \
        multiprocessing.get_start_method(allow_none=True) in (None, "fork")


def _draw(conn: Any, out_dir: Path | None, loaded: LoadedSuite, records: list[CellRecord], shard: int, shards: int,
          parent: int | None = None, inherited: tuple[Any, ...] = (), counter: Any = None,
          reusable: dict[str, str] | None = None) -> None:
    """In a forked process: draw (and with out_dir, write) one share of the plots (`counter`, `reusable`: see
    draw_share), send it back, or the traceback.

    It dies with `parent` (a `kill -9` of the report leaves no process drawing), closing `inherited`
    (its copy of the pipe's read end, which kept a send to a dead parent blocked for ever) first.
    """
    import traceback

    from compbench.runner.orphan import die_with_parent

    die_with_parent(parent, inherited)

    try:
        from compbench.report.plots import draw_share

        result: tuple[str, Any] = ("ok", draw_share(out_dir, loaded, records, shard, shards, counter, reusable))
    except OutputError as exc:  # a full disk, a link where a plot goes: the parent says so in one line
        result = ("output", str(exc))
    except BaseException:  # noqa: BLE001 — the parent raises it, with this traceback
        result = ("error", traceback.format_exc())
    conn.send(result)
    conn.close()


class _PlotWorker:
    """The report's plots drawn in forked processes, one per usable core, while this one writes the files that do not need them.

    Drawing is most of a fresh report (about 12 s of 17 for kernel-limits: 21 figures as PNG and
    SVG); the predictions and CSV files take the rest. With one usable core (runner.threads.usable_cores)
    none is forked: this process draws after the tables (`_can_fork`), as a second would only share its core.
    Each process draws the next plot no other has taken (a shared counter), so one that drew quick
    plots goes on to the rest; this one then writes
    the plots' manifest (`report.plots.finish_plots`), so the files are those one process drawing
    them all would write.
    """

    def __init__(self, out_dir: Path | None, loaded: LoadedSuite, records: list[CellRecord],
                 selected: frozenset[tuple[str, str]] | None, state: Any, shards: int) -> None:
        import multiprocessing

        from compbench.runner.orphan import inherited_ends, parent_of_children

        mp = multiprocessing.get_context("fork")
        self.out_dir, self.loaded, self.selected, self.state = out_dir, loaded, selected, state
        self.procs: list[tuple[Any, Any]] = []
        counter = mp.Value("q", 0)
        for k in range(shards):
            conn, child = mp.Pipe(duplex=False)
            proc = mp.Process(target=_draw, daemon=True, name=f"compbench-plots-{k}", args=(
                child, out_dir, loaded, records, k, shards, parent_of_children(mp), inherited_ends(mp, conn), counter,
                state.reusable))
            proc.start()
            child.close()
            self.procs.append((proc, conn))
        self._result: list[Any] | None = None

    def result(self) -> list[Any]:
        """The plots (waiting for them); a failure in a drawing process is raised here with its traceback."""
        if self._result is not None:
            return self._result
        from compbench.report.plots import finish_plots

        drawn: list[Any] = []
        for proc, conn in self.procs:
            try:
                kind, payload = conn.recv()
            except EOFError:
                proc.join()
                raise RuntimeError(f"a process drawing the report's plots died (exit code {proc.exitcode})") from None
            proc.join()
            if kind == "output":
                raise OutputError(payload)
            if kind != "ok":
                raise RuntimeError(f"drawing the report's plots failed (in its own process):\n{payload}")
            drawn.extend(payload)
        self._result = finish_plots(self.out_dir, self.loaded, self.state, drawn, self.selected)
        return self._result

    def stop(self) -> None:
        """Stop the drawing processes that still run (this one is stopping early) and close the pipes."""
        for proc, conn in self.procs:
            if proc.is_alive():
                proc.kill()
            proc.join()
            conn.close()


@dataclass
class _Context(ReportContext):
    """The writers' context, whose plots may come from a _PlotWorker."""

    drawing: _PlotWorker | None = None

    @cached_property
    def plots(self) -> list[Any]:
        """The report's plots (drawn once), from the drawing process when there is one."""
        if self.drawing is not None:
            return self.drawing.result()
        return ReportContext.plots.func(self)  # type: ignore[attr-defined]


def inputs_digest(loaded: LoadedSuite, records: list[CellRecord], verdicts: list[Verdict], formats: tuple[str, ...],
                  selected: frozenset[tuple[str, str]] | None = None) -> str:
    """A hash of what every report writer reads: the loaded suite, every record (metrics and predictions), the
    verdicts, and a partial run's selection (the plots it may delete; a whole report after it removes what it left)."""
    h = _hash_besides_records(loaded, formats, selected)
    for r in records:
        h.update(_record_text(r).encode())
        for k in _ARRAYS:
            h.update(_array_bytes(getattr(r, k)))
    h.update(_verdicts_text(verdicts))
    return h.hexdigest()


def _hash_besides_records(loaded: LoadedSuite, formats: tuple[str, ...],
                          selected: frozenset[tuple[str, str]] | None) -> Any:
    """A sha256 fed with every input of the report but the records and verdicts: versions, the report's code, the suite."""
    from compbench import __version__

    h = hashlib.sha256(__version__.encode())
    for lib in ("numpy", "pandas", "matplotlib", "pyarrow"):
        h.update(f"{lib}={_lib_version(lib)}".encode())
    for src in sorted(Path(__file__).parent.glob("*.py")):  # the report's own code: a fixed bug redraws
        h.update(src.read_bytes())
    h.update(repr((loaded.suite, loaded.models, sorted(loaded.task_kinds.items()), formats,
                   None if selected is None else sorted(selected))).encode())
    from compbench.report.findings import predicts  # the Findings quote each claim's description: an edit redraws

    h.update(repr([predicts(e) for e in loaded.suite.expectations]).encode())
    return h


def _verdicts_text(verdicts: list[Verdict]) -> bytes:
    return json.dumps([v.__dict__ for v in verdicts], sort_keys=True, default=str).encode()


def cached_inputs_digest(out_dir: Path, loaded: LoadedSuite, records: list[CellRecord], verdicts: list[Verdict],
                         formats: tuple[str, ...], selected: frozenset[tuple[str, str]] | None = None) -> tuple[str, bool]:
    """`inputs_digest`, and whether it came from out_dir's INPUTS_CACHE rather than from the records' contents.

    Hashing every record's predictions is most of what a warm report costs, and needs them decoded. A record read
    unchanged from the store is known by its row's token (`CellRecord.stored_row`: a row is never rewritten), so the
    digest is cached under a key of the tokens, everything else `inputs_digest` hashes, and the code that turns a row
    into a record; a record changed in memory or not stored has no token, and then the digest is computed.
    """
    rows = [r.stored_row for r in records]
    if any(row is None for row in rows):
        return inputs_digest(loaded, records, verdicts, formats, selected), False
    h = _hash_besides_records(loaded, formats, selected)
    for package in ("records", "store"):  # how a row is read into a record
        for src in sorted((Path(__file__).parent.parent / package).glob("*.py")):
            h.update(src.read_bytes())
    h.update("\n".join(row.token for row in rows if row is not None).encode())
    h.update(_verdicts_text(verdicts))
    key = h.hexdigest()
    cache = _read_json(out_dir, INPUTS_CACHE)
    if cache.get("key") == key and isinstance(cache.get("digest"), str):
        return cache["digest"], True
    digest = inputs_digest(loaded, records, verdicts, formats, selected)
    write_atomic(out_dir, INPUTS_CACHE, json.dumps({"key": key, "digest": digest}))
    return digest, False


# Every field a report reads, but the arrays (hashed as bytes) and what only feeds scoring (samples)
# or identifies the run (params and determinism are covered by the key and the code hash).
_DIGEST_FIELDS = ("key", "suite", "task", "family", "encoding", "model", "group", "adapter", "seed", "device", "kind",
                  "n_outputs", "n_classes", "n_train", "n_test", "wall_time", "theory_kernel", "theory_objective",
                  "theory_note", "version", "code", "scoring", "threads")


_digest_fields = operator.attrgetter(*_DIGEST_FIELDS)


def _record_text(r: CellRecord) -> str:
    """What of a record the report writers read, as text (a digest input; cheaper than JSON with sorted keys)."""
    return repr((_digest_fields(r), r.status.value, r.message, sorted(r.metrics.items()), sorted(r.not_applicable.items()),
                 sorted(r.sweep.items()), sorted(r.info.items()), r.per_output)) + "\n"


def writer_digest(inputs: str, name: str, writer: object) -> str:
    """One writer's digest: the shared inputs, its name, and the source of the module that defines it."""
    import inspect

    h = hashlib.sha256(f"{inputs}:{name}".encode())
    try:
        h.update(Path(inspect.getfile(type(writer))).read_bytes())
    except (OSError, TypeError):  # a writer defined interactively has no file: its name must do
        h.update(type(writer).__qualname__.encode())
    return h.hexdigest()


def _array_bytes(values: Any) -> bytes:
    """A record's predictions as bytes, exactly: a flat list, a list of rows (a vector output per cell), else JSON (a
    None among the numbers, deeper nesting); a tag and a length before each part, so that no two inputs, nor the
    predictions and theory hashed one after the other, give the same bytes."""
    if values is None:
        return b"-"
    try:
        return b"1" + _sized(array("d", values).tobytes())
    except (TypeError, ValueError, OverflowError):
        pass
    try:  # rows: as JSON, slot-decoder's 2.2 million outputs took ~1 s a report
        return b"2" + _sized(b"".join(_sized(array("d", row).tobytes()) for row in values))
    except (TypeError, ValueError, OverflowError):  # slower, still exact
        return b"j" + _sized(json.dumps(list(values), default=str).encode())


def _sized(data: bytes) -> bytes:
    return len(data).to_bytes(8, "little") + data


def _lib_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "-"


def _read_json(out_dir: Path, relative: str) -> dict[str, Any]:
    """A JSON object from a file of the results directory; {} when missing, damaged, a link or not an object."""
    data = read_contained(out_dir, relative)
    try:
        doc = json.loads(data) if data is not None else {}
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _read_manifest(out_dir: Path) -> dict[str, Any]:
    return _read_json(out_dir, MANIFEST_FILE)  # none yet, or damaged: every writer runs


def _write_manifest(out_dir: Path, manifest: dict[str, Any]) -> None:
    write_atomic(out_dir, MANIFEST_FILE, json.dumps(manifest, indent=1, sort_keys=True))


def check_owner(out_dir: Path, loaded: LoadedSuite, *, claim: bool = True) -> None:
    """The gate of a results directory a report goes into: compbench's own folder (claim_results_dir),
    and not holding another suite's report (its summary.json names another suite: it would be overwritten)."""
    owner = _read_json(out_dir, SUMMARY_FILE).get("suite")
    if isinstance(owner, str) and owner and owner != loaded.name:
        raise ForeignResultsError(
            f"{out_dir}: holds the report of suite {owner!r} ({SUMMARY_FILE}); writing suite {loaded.name!r}'s report "
            f"there would overwrite its leaderboard and delete its plots; nothing of the report was written: use "
            f"another results directory (--results results/{loaded.name}), or remove {out_dir / SUMMARY_FILE} to hand "
            f"the directory over to {loaded.name!r}")
    claim_results_dir(out_dir, loaded, claim=claim)


def claim_results_dir(out_dir: Path, loaded: LoadedSuite, *, claim: bool = True) -> None:
    """The one rule of every command that writes a results directory: compbench writes only into its own.

    A folder is compbench's when it is missing or empty, holds the marker `.compbench` (written
    here, when compbench first claims it, before any other file of it), or holds what compbench
    wrote before the marker existed: a summary.json naming a suite, or a store. Anything else is a
    folder of the user's (`--results .` would replace their records.csv and plots) and is refused,
    as are `/`, the home directory and the suites' folders, whatever they hold. `claim`: write the
    marker (making the folder) if missing.
    """
    _refuse_special(out_dir, loaded)
    if out_dir.exists() and not out_dir.is_dir():
        raise ForeignResultsError(f"{out_dir}: is not a folder; pass a folder for the results "
                                  f"(--results results/{loaded.name})")
    # Listed before the marker is looked for: two runs started together claim one folder, and a concurrent run
    # writes its marker before anything else, so whatever of its files this listing shows, the look below finds
    # its marker (looked for first, a marker written between the look and the listing made the folder "foreign").
    # Another run's half-written marker (its temporary) is not the user's either.
    held = sorted(p.name for p in out_dir.iterdir() if not is_temporary(p.name)) if out_dir.is_dir() else []
    if read_contained(out_dir, MARKER_FILE) is not None:
        return
    owner = _read_json(out_dir, SUMMARY_FILE).get("suite")
    # A store file, whatever its state: the store itself refuses one that is not a compbench store (its message).
    ours = isinstance(owner, str) and bool(owner) or os.path.lexists(out_dir / "store" / "records.sqlite")
    if not ours and held:
        shown = ", ".join(held[:3]) + (f" and {len(held) - 3} more" if len(held) > 3 else "")
        raise ForeignResultsError(
            f"{out_dir}: is not a compbench results directory (it holds {shown}); compbench writes only into an "
            f"empty folder or one it made, so none of your files is replaced; nothing was written: pass a new "
            f"folder (--results results/{loaded.name})")
    if claim:
        write_atomic(out_dir, MARKER_FILE, json.dumps({"compbench": "results directory", "suite": loaded.name}))


def _refuse_special(out_dir: Path, loaded: LoadedSuite) -> None:
    """Refuse `/`, the home directory and the suites' folders as a results directory, whatever they hold."""
    from compbench.suite import bundled_dir

    try:
        where = out_dir.resolve()
        special = {Path(where.anchor): "the file system's root", Path.home().resolve(): "your home directory"}
    except (OSError, RuntimeError):  # no home, or a link loop: the writes below report the path
        return
    if loaded.path is not None:
        special[Path(loaded.path).resolve().parent] = f"the folder of the suite file {Path(loaded.path).name}"
    try:
        special[bundled_dir("suites").resolve()] = "the bundled suites' folder"
    except (OSError, ValueError):
        pass
    if where in special:
        raise ForeignResultsError(
            f"{out_dir}: is {special[where]}; compbench never writes a report there (it would mix its files with "
            f"yours, and replace any of the same name); nothing was written: pass a folder of its own "
            f"(--results results/{loaded.name})")


def _relative(out_dir: Path, path: Path) -> str:
    try:
        return str(Path(path).relative_to(out_dir))
    except ValueError:
        return str(path)




@dataclass
class Published:
    """What `publish_run` did: the outcome its report states, the files, and why it kept a fuller report."""

    outcome: Any  # compbench.outcome.SuiteOutcome: the run's, or after a partial run the whole suite's
    paths: list[Path]
    kept: list[str]  # cells a fuller report in the directory shows that the store lacks: nothing was written
    digest_cached: bool = False  # the report's inputs digest came from its cache (cached_inputs_digest)


def publish_run(
    out_dir: Path, whole: LoadedSuite, ran: Any, facts: dict[str, Any], *, formats: tuple[str, ...] = DEFAULT_FORMATS,
    skipped: list[str] | None = None, profile: str | None = None, tasks: Any = None,
) -> Published:
    """The report of a run (`compbench run`, `evaluate(report=True)`); `ran` is the run's outcome.

    After a partial run (`--task`, `--model`; `ran.partial`) the report is of `whole`, the suite
    before selection, from the store (`compbench.outcome.whole_outcome`): the cells the run did not
    select are shown as the store holds them, missing when it holds none, and their plots are never
    deleted. When the report already in `out_dir` shows a cell outside the selection that the
    store lacks (a results directory published without its store), it is fuller than anything this
    run could write: it is left as it was (`Published.kept` names those cells).
    """
    from compbench.outcome import CellState, whole_outcome

    outcome = ran
    if ran.partial:
        outcome = whole_outcome(whole, ran, out_dir, profile=profile, device=facts.get("device"), tasks=tasks)
        kept = _shown_not_stored(out_dir, outcome)
        if kept:
            return Published(outcome, [], kept)
    facts = {**facts, "n_missing": outcome.count(CellState.MISSING), "n_stale": outcome.count(CellState.STALE)}
    paths, cached = _publish(out_dir, whole, outcome.records, facts, verdicts=outcome.verdicts, formats=formats,
                             skipped=skipped, selected=outcome.selected, source=None)
    return Published(outcome, paths, [], cached)


def _shown_not_stored(out_dir: Path, outcome: Any) -> list[str]:
    """Cells (unselected) that the report in out_dir lists in records.csv with a result but `outcome` lacks."""
    import csv
    import io

    from compbench.outcome import CellState

    data = read_contained(out_dir, "records.csv")
    if not data:
        return []
    missing = {(c.model, c.task, str(c.seed)) for c in outcome.cells
               if c.state is CellState.MISSING and (c.model, c.task) not in (outcome.selected or ())}
    try:
        rows = list(csv.DictReader(io.StringIO(data.decode("utf-8", "replace"))))
    except csv.Error:  # damaged: nothing it shows can be counted on
        return []
    return [f"{r['model']} on {r['task']} seed {r['seed']}" for r in rows
            if (r.get("model"), r.get("task"), r.get("seed")) in missing and r.get("status") in ("ok", "error", "skipped")]


def expected_cells(loaded: LoadedSuite) -> list[tuple[str, str, str]]:
    """(model id, sweep group, task id) for every cell the suite asks for, in suite order."""
    return [(m.id, m.group, t.id) for m in loaded.models for t in loaded.tasks_for(m)]


def stored_summary(source: Path, outcome: Any, config: RunConfig | None = None) -> dict[str, Any]:
    """The run summary a report of stored results states: summary.json of `source` as the last run wrote it, with the
    configuration reported (`config`, None: as recorded) and the cell counts of `outcome` (a SuiteOutcome with records)."""
    from compbench.outcome import CellState

    records = outcome.records
    summary = _read_json(source, SUMMARY_FILE)
    if config is not None:
        summary.update(config.facts())
    if records:
        summary.setdefault("device", records[0].device)
    summary["n_failed"] = sum(r.failed for r in records)
    summary["n_skipped"] = sum(r.skipped for r in records)
    summary["n_missing"] = outcome.count(CellState.MISSING)
    summary["n_stale"] = outcome.count(CellState.STALE)
    stale = [c.record for c in outcome.cells if c.state is CellState.STALE and c.record is not None]
    summary["computed_by"] = ", ".join(sorted({f"compbench {r.version}" if r.version else "compbench 0.1.0 (record schema 1)"
                                               for r in stale}))
    return summary
