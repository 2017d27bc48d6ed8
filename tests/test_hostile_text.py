"""Text compbench did not write (#35 item 13): a suite's description and a model's error message may hold
markdown links and images (`javascript:`, remote ones) and terminal escape sequences; leaderboard.md
shows them as inert text and the terminal receives no control sequence, while their words remain."""

from __future__ import annotations

import pytest
from tiny_suites import kernel_suite

from compbench.cli import main

pytest.importorskip("torch")
markdown_it = pytest.importorskip("markdown_it")

ESCAPES = "\\e]0;pwned\\a\\e[31mred\\x9b2J"  # YAML escapes: OSC retitle, CSI colour, a C1 CSI clearing the screen
DESCRIPTION = f'"see [x](javascript:alert(1)) and ![i](http://evil/x.png) <javascript:alert(1)> {ESCAPES} words"'
BOOM = '''\
import torch


class Boom(torch.nn.Module):
    def __init__(self, in_shape, n_out):
        super().__init__()
        self.layer = torch.nn.Linear(in_shape[0], n_out)

    def forward(self, x):
        raise RuntimeError("bad \\x1b]0;pwned\\x07\\x1b[31mred [y](javascript:alert(2)) ![z](http://evil/y.png)\\x9b2J end")
'''


def _rendered(markdown: str) -> str:
    return markdown_it.MarkdownIt("commonmark").enable("table").render(markdown)


def test_links_images_and_escape_sequences_from_suite_and_model_are_inert(tmp_path, capsys):
    (tmp_path / "boom.py").write_text(BOOM, encoding="utf-8")
    suite = tmp_path / "s.yaml"
    suite.write_text(kernel_suite("hostile", "leak", relu=False).replace("seeds: 1\n", f"seeds: 1\ndescription: {DESCRIPTION}\n"),
                     encoding="utf-8")
    out = tmp_path / "out"
    code = main(["run", "--suite", str(suite), "--model", f"{tmp_path / 'boom.py'}:Boom", "--task", "add",
                 "--results", str(out), "--format", "md,html"])
    assert code == 1  # Boom's cell failed
    terminal = capsys.readouterr()
    for text in (terminal.out, terminal.err):
        assert not any(c in text for c in "\x1b\x07\x9b"), repr(text)
    assert "RuntimeError: bad red [y](javascript:alert(2))" in terminal.out  # the words, shown as text

    board = (out / "leaderboard.md").read_text(encoding="utf-8")
    assert not any(c in board for c in "\x1b\x07\x9b"), repr(board)
    html = _rendered(board)
    assert "<a " not in html and "<img" not in html, html
    assert "see [x](javascript:alert(1)) and ![i](http://evil/x.png) &lt;javascript:alert(1)&gt; red words" in html
    assert "RuntimeError: bad red [y](javascript:alert(2)) ![z](http://evil/y.png) end" in html

    page = (out / "leaderboard.html").read_text(encoding="utf-8")
    assert "javascript:alert(1)" in page and 'href="javascript' not in page and 'src="http' not in page
    assert not any(c in page for c in "\x1b\x07\x9b"), "a control sequence reached leaderboard.html"
    assert "red words" in page
