"""Build the site: read every suite's results, name their folders and the model pages, write every file."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from compbench.files import write_atomic
from compbench.site.names import safe_name
from compbench.site.pages import index_page, model_page
from compbench.site.read import SiteError, SuiteSite, read_suite

__all__ = ["SiteError", "SiteResult", "build_site"]


@dataclass(frozen=True)
class SiteResult:
    """What was written: the index, and the suites and model pages it links."""

    index: Path
    suites: list[SuiteSite]
    models: dict[str, str]  # model (leaderboard row) → its page's file stem
    files: list[Path]


def _slug(s: SuiteSite, taken: set[str]) -> str:
    """The suite's folder: its name (and profile), made a safe file name, and unique in the site."""
    base = safe_name(s.name + (f"--{s.profile}" if s.profile else ""))
    slug, n = base, 1
    while slug.lower() in taken:
        n += 1
        slug = f"{base}-{n}"
    taken.add(slug.lower())
    return slug


def build_site(sources: Sequence[Path], out: Path) -> SiteResult:
    """Write one static site over the results at `sources` (results directories or bundles) into `out`:
    index.html, <suite>/index.html (its leaderboard, and its history plots where its store has ≥ 2 runs) and
    models/<model>.html. SiteError when a source holds no results."""
    if not sources:
        raise SiteError("no results given; name results directories (results/<suite>) or bundles")
    seen: dict[Path, str] = {}
    suites: list[SuiteSite] = []
    taken: set[str] = {"models", "index.html"}
    for source in sources:
        resolved = Path(source).resolve()
        if resolved in seen:
            raise SiteError(f"{source}: given twice (as {seen[resolved]}); name each results directory or bundle once")
        seen[resolved] = str(source)
        s = read_suite(Path(source), home="../index.html")
        s.slug = _slug(s, taken)
        suites.append(s)
    models: dict[str, str] = {}
    stems: set[str] = set()
    for s in suites:
        for name in s.models:
            if name not in models:
                stem = safe_name(name)
                while stem.lower() in stems:  # names differing only in case share a file on macOS and Windows
                    stem = safe_name(stem + "\x00" + name)
                stems.add(stem.lower())
                models[name] = stem
    files = []
    for s in suites:
        files.append(write_atomic(out, f"{s.slug}/index.html", s.leaderboard))
        files += [write_atomic(out, f"{s.slug}/{p.name}.png", p.png) for p in s.history]
    for name, stem in models.items():
        entries = [(s, s.models[name]) for s in suites if name in s.models]
        files.append(write_atomic(out, f"models/{stem}.html", model_page(name, entries)))
    index = write_atomic(out, "index.html", index_page(suites, models))
    return SiteResult(index, suites, models, [index, *files])
