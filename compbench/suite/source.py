"""Reading a suite file: bytes → UTF-8 text → YAML data with the line of every key and item.

Every problem is a `SuiteIssue` (file, line, field, message). Hostile input is refused before it
costs anything: non-UTF-8 bytes, duplicate keys, and alias bombs (a document whose aliases expand
to more nodes than any suite needs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import ValidationError

MAX_FILE_BYTES = 10 * 1024 * 1024  # a suite is a few kB; a 10 MB "suite" is a mistake
MAX_ALIASES = 1000
MAX_EXPANDED_NODES = 200_000  # nodes the document would have with every alias expanded
# Lists and mappings inside each other: the bundled suites reach 6 levels. PyYAML's parser and
# composer recurse once per level and slow down sharply with depth (a 40 kB `[[[[...` took 40 s to
# be refused), so the depth is counted on the text before the parser sees it.
MAX_NESTING = 64
_BLOCK_SCALAR = re.compile(r"(?:^|[\s:-])[|>][0-9+-]*\s*(?:#.*)?$")


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


class SuiteError(ValueError):
    """A suite failed to load or validate; `issues` lists every problem found."""

    def __init__(self, issues: list[SuiteIssue]) -> None:
        self.issues = issues
        super().__init__("\n".join(str(i) for i in issues))


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
    if len(data) > MAX_FILE_BYTES:
        raise SuiteError([SuiteIssue(file, None, "", f"the file is {len(data):,} bytes; a suite file is at most {MAX_FILE_BYTES:,}")])
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


def _count_aliases(text: str) -> int:
    count = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            count += 1
            if count > MAX_ALIASES:
                break
    return count


def _starts_value(line: str, i: int, flow: int) -> bool:
    """Whether position i of a line is where a YAML value starts: the line's start, after `: `, `- `, `? `,
    or inside a flow collection after `,`, `[`, `{`."""
    j = i - 1
    while j >= 0 and line[j] in " \t":
        j -= 1
    if j < 0 or (flow and line[j] in ",[{"):
        return True
    return line[j] in ":-?" and j + 1 < i  # an indicator is followed by a space


def _line_depths(line: str, flow: int, quote: str | None) -> tuple[int, int, str | None, bool]:
    """Scan one line: (deepest flow depth on it, flow depth at its end, open quote at its end, whether it
    ends in a block scalar indicator). Brackets inside quotes and comments are not counted."""
    deepest, i, n = flow, 0, len(line)
    while i < n:
        c = line[i]
        if quote is not None:
            if c == "\\" and quote == '"':
                i += 2
                continue
            if c == quote:
                if quote == "'" and i + 1 < n and line[i + 1] == "'":  # '' is a quote inside '...'
                    i += 2
                    continue
                quote = None
            i += 1
            continue
        if c == "#" and (i == 0 or line[i - 1] in " \t"):
            break
        if c in "'\"[{" and ((flow and c in "[{") or _starts_value(line, i, flow)):
            # A quote or a bracket inside plain text (`don't`, `a[0]`) is text, not syntax.
            if c in "[{":
                flow += 1
                deepest = max(deepest, flow)
            else:
                quote = c
        elif c in "]}" and flow:
            flow -= 1
        i += 1
    return deepest, flow, quote, flow == 0 and quote is None and bool(_BLOCK_SCALAR.search(line))


def check_nesting(text: str, file: str, limit: int = MAX_NESTING) -> None:
    """SuiteError at the first line where lists and mappings nest deeper than `limit`, found without parsing.

    Counts flow brackets (`[`, `{`) and block indentation levels (each deeper indentation, and each
    `- ` starting a nested sequence on one line), skipping quoted text, comments and block scalars.
    """
    indents: list[int] = []  # indentation of each open block level
    flow, quote = 0, None
    scalar_indent: int | None = None  # inside a block scalar (`|`, `>`): lines indented deeper are text
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        if scalar_indent is not None:
            if not stripped.strip() or indent > scalar_indent:
                continue
            scalar_indent = None
        block = len(indents)
        if flow == 0 and quote is None and stripped and not stripped.startswith("#"):
            columns = [indent]
            rest = stripped
            while rest[:1] == "-" and rest[1:2] in (" ", "\t"):  # `- - - x`: sequences nested on one line
                pad = len(rest) - len(rest[1:].lstrip(" \t")) if rest[1:].strip() else 1
                columns.append(columns[-1] + pad)
                rest = rest[pad:]
            for col in columns:
                while indents and indents[-1] >= col:
                    indents.pop()
                indents.append(col)
            block = len(indents)
        deepest, flow, quote, opens_scalar = _line_depths(line, flow, quote)
        if block + deepest > limit:
            raise SuiteError([SuiteIssue(file, number, "", f"lists and mappings are nested more than {limit} levels deep "
                                         "here; a suite needs a few (refused before parsing)")])
        if opens_scalar:
            scalar_indent = indent
    return None


def parse_yaml(text: str, file: str) -> tuple[Any, LineMap]:
    """The document's data and its line map; every YAML problem is a SuiteError with its line."""
    lines = LineMap(file)
    loader = None
    check_nesting(text, file)
    try:
        if _count_aliases(text) > MAX_ALIASES:
            raise SuiteError([SuiteIssue(file, None, "", f"more than {MAX_ALIASES} YAML aliases (*name): refusing a possible alias bomb")])
        loader = yaml.SafeLoader(text)
        node = loader.get_single_node()
        if node is None:
            raise SuiteError([SuiteIssue(file, None, "", "the file is empty")])
        size = _expanded_size(node, {})
        if size > MAX_EXPANDED_NODES:
            raise SuiteError([SuiteIssue(file, None, "", f"the document expands to {size:,} YAML nodes through its aliases "
                                         f"(limit {MAX_EXPANDED_NODES:,}): refusing a possible alias bomb")])
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
