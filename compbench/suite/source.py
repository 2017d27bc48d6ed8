"""Reading a suite file: bytes → UTF-8 text → YAML data with the line of every key and item.

Every problem is a `SuiteIssue` (file, line, field, message). Hostile input is refused before it
costs anything: a file over the size limit (before parsing), non-UTF-8 bytes, duplicate keys, and,
while parsing, more nesting, nodes or aliases than a suite needs; alias bombs (a document whose
aliases expand to more nodes than any suite needs) before they are expanded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import ValidationError

from compbench.errors import CompbenchError
from compbench.limits import SUITE_FILE_BYTES, YAML_ALIASES, YAML_EXPANDED_NODES, YAML_NESTING, YAML_NODES


@dataclass(frozen=True)
class SuiteIssue:
    """One problem in a suite file, located by line and field path."""

    file: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        text = f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        # One issue, one line: a control character quoted from the file (a line break, \x1e) is escaped.
        return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


class SuiteError(CompbenchError, ValueError):
    """A suite failed to load or validate; `issues` lists every problem found."""

    def __init__(self, issues: list[SuiteIssue]) -> None:
        self.issues = issues
        super().__init__("\n".join(str(i) for i in issues))

    def message(self) -> str:
        """One `error: FILE:LINE: field: message` line per issue, as every command prints them."""
        return "\n".join(f"error: {issue}" for issue in self.issues)


def format_loc(loc: tuple[Any, ...]) -> str:
    """('models', 0, 'params', 'lr') → 'models[0].params.lr'."""
    out = ""
    for part in loc:
        if not isinstance(part, int):
            # A key with control characters (a line break, \x1e) is shown escaped: one issue, one line.
            part = str(part) if str(part).isprintable() else ascii(str(part))
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def decode_suite(data: bytes, file: str) -> str:
    """UTF-8 text (a BOM is allowed); anything else is a SuiteError saying what the bytes look like."""
    check_size(len(data), "bytes", file)
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise SuiteError([SuiteIssue(file, None, "", "the file is UTF-16 text (it starts with a UTF-16 byte-order mark); "
                                     "compbench reads UTF-8: convert it, e.g. `iconv -f UTF-16 -t UTF-8 FILE > NEW`")])
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        looks = "binary data" if b"\x00" in data[:4096] else "text in another encoding (e.g. Latin-1)"
        raise SuiteError([SuiteIssue(file, line, "", f"not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start} "
                                     f"looks like {looks}; compbench reads suite files as UTF-8")]) from None
    if "\x00" in text:
        line = text.count("\n", 0, text.index("\x00")) + 1
        raise SuiteError([SuiteIssue(file, line, "", "the file contains NUL bytes: it is binary data, not a YAML suite")])
    return text


class LineMap:
    """Line numbers of every key/item of a YAML document, by path."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.lines: dict[tuple[Any, ...], int] = {}
        self.issues: list[SuiteIssue] = []

    def record(self, node: yaml.Node, path: tuple[Any, ...], seen: set[int] | None = None) -> None:
        """Walk the node tree once; an aliased node is walked at its first place only."""
        seen = set() if seen is None else seen
        self.lines.setdefault(path, node.start_mark.line + 1)
        if id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, int] = {}
            for key_node, value_node in node.value:
                key = key_node.value
                if isinstance(key_node, yaml.ScalarNode) and key_node.tag.endswith(":int"):
                    try:
                        key = int(key)
                    except ValueError:
                        pass
                line = key_node.start_mark.line + 1
                if isinstance(key_node, yaml.ScalarNode) and key in first:
                    self.issues.append(SuiteIssue(self.file, line, format_loc(path + (key,)),
                                                  f"duplicate key {key!r} (first given at line {first[key]}); give each key once"))
                elif isinstance(key_node, yaml.ScalarNode):
                    first[key] = line
                self.lines[path + (key,)] = line
                self.record(value_node, path + (key,), seen)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self.record(item, path + (i,), seen)

    def line(self, loc: tuple[Any, ...]) -> int | None:
        """The line of the deepest known prefix of `loc`."""
        for n in range(len(loc), -1, -1):
            if tuple(loc[:n]) in self.lines:
                return self.lines[tuple(loc[:n])]
        return None

    def issue(self, loc: tuple[Any, ...], message: str) -> SuiteIssue:
        """A SuiteIssue at `loc`."""
        return SuiteIssue(self.file, self.line(loc), format_loc(loc), message)


def _expanded_size(node: yaml.Node, memo: dict[int, int]) -> int:
    """Nodes of the document with every alias expanded (memoised per node: linear time)."""
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = 1  # a cycle counts once (safe_load would refuse it anyway)
    size = 1
    if isinstance(node, yaml.MappingNode):
        size += sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
    elif isinstance(node, yaml.SequenceNode):
        size += sum(_expanded_size(v, memo) for v in node.value)
    memo[key] = size
    return size


def check_size(size: int, unit: str, file: str) -> None:
    """SuiteError if a suite of `size` bytes (or characters) is over the suite-file limit: checked before parsing."""
    if size > SUITE_FILE_BYTES:
        raise SuiteError([SuiteIssue(file, None, "", f"the file is {size:,} {unit}; the limit on a suite file is "
                                     f"{SUITE_FILE_BYTES:,} bytes (a suite is a few kB): refused before parsing")])


class _GuardedLoader(yaml.SafeLoader):
    """SafeLoader whose composer refuses, as it goes, more nesting, nodes or aliases than the limits allow.

    Counted on the parser's events, so an anchor, a tag, flow or block style cannot hide a level;
    PyYAML's composer recurses once per level and its scanner slows down sharply with depth, so
    stopping at the limit is what keeps a hostile file cheap (a 40 kB `[[[[…` is refused in milliseconds).
    """

    def __init__(self, text: str, file: str, nesting: int) -> None:
        super().__init__(text)
        self.file, self.nesting = file, nesting
        self.depth = self.nodes = self.aliases = 0

    def _refuse(self, message: str) -> None:
        mark = self.peek_event().start_mark
        raise SuiteError([SuiteIssue(self.file, mark.line + 1, "", message)])

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:  # type: ignore[override]
        """Count the node about to be composed against the limits, then compose it."""
        self.nodes += 1
        if self.nodes > YAML_NODES:
            self._refuse(f"more than {YAML_NODES:,} YAML nodes (keys, values and list items; the limit on a suite "
                         "file): a suite needs a few thousand at most (refused at this line, while parsing)")
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > YAML_ALIASES:
                self._refuse(f"more than {YAML_ALIASES} YAML aliases (*name): refusing a possible alias bomb")
            return super().compose_node(parent, index)
        if not self.check_event(yaml.SequenceStartEvent, yaml.MappingStartEvent):
            return super().compose_node(parent, index)
        self.depth += 1
        if self.depth > self.nesting:
            self._refuse(f"lists and mappings are nested more than {self.nesting} levels deep here; "
                         "a suite needs a few (refused while parsing, at this level)")
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def load_value(text: str, what: str, nesting: int = YAML_NESTING) -> Any:
    """One YAML value (a command-line argument) read as a suite's values are, within the same limits."""
    check_size(len(text), "characters", what)
    loader = _GuardedLoader(text, what, nesting)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def parse_yaml(text: str, file: str) -> tuple[Any, LineMap]:
    """The document's data and its line map; every YAML problem is a SuiteError with its line."""
    lines = LineMap(file)
    loader = None
    check_size(len(text), "characters", file)
    try:
        loader = _GuardedLoader(text, file, YAML_NESTING)
        node = loader.get_single_node()
        if node is None:
            raise SuiteError([SuiteIssue(file, None, "", "the file is empty")])
        size = _expanded_size(node, {})
        if size > YAML_EXPANDED_NODES:
            raise SuiteError([SuiteIssue(file, None, "", f"the document expands to {size:,} YAML nodes through its aliases "
                                         f"(limit {YAML_EXPANDED_NODES:,}): refusing a possible alias bomb")])
        lines.record(node, ())
        if lines.issues:
            raise SuiteError(lines.issues)
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        msg = " ".join(str(p) for p in (exc.context, exc.problem) if p)
        raise SuiteError([SuiteIssue(file, mark.line + 1 if mark else None, "", f"invalid YAML: {msg}")]) from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        raise SuiteError([SuiteIssue(file, line, "", f"invalid YAML: {exc.reason} (character {exc.character!r})")]) from None
    except yaml.YAMLError as exc:
        raise SuiteError([SuiteIssue(file, None, "", f"invalid YAML: {exc}")]) from None
    except RecursionError:
        raise SuiteError([SuiteIssue(file, None, "", "invalid YAML: nested too deeply")]) from None
    finally:
        if loader is not None:
            loader.dispose()
    return data, lines


def validation_issues(exc: ValidationError, lines: LineMap, prefix: tuple[Any, ...]) -> list[SuiteIssue]:
    """pydantic errors as SuiteIssues at the line of the offending key."""
    out = []
    for err in exc.errors():
        # pydantic inserts union-member tags (e.g. 'list[int]') into loc; keep only real keys,
        # plus a missing field's own name.
        loc = prefix
        parts = err["loc"]
        for j, part in enumerate(parts):
            if isinstance(part, int) or loc + (part,) in lines.lines or (j == len(parts) - 1 and err["type"] == "missing"):
                loc = loc + (part,)
        msg = err["msg"]
        if err["type"] == "value_error":
            msg = msg.removeprefix("Value error, ")  # pydantic's prefix says nothing a user needs
        if err["type"] == "extra_forbidden":
            msg = f"unknown field {parts[-1]!r}"
        out.append(lines.issue(loc, msg))
    return out
