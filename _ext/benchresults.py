"""The benchmark's numbers on the book's pages, read from its result files when the book is
built (`toylib.results`; `benchmarks/run.py` writes them to `benchmarks/results/`).

- `{bench}` shows one number of a result file in the prose:

      10 seeds, {bench}`maze:ordinary:count` meet every target, in {bench}`maze:ordinary:train`

  (`toylib.results.resolve` lists what it can show).
- `bench-table` shows a chapter's table, one pair of columns per arithmetic path, and folds
  away how to measure it again (the commands) and where it was measured:

      ```{bench-table} life/any_size
      :paths: ordinary native
      ```

- `bench-rows` shows a study's table as its script wrote it (`benchmarks/maze_embed.py`):

      ```{bench-rows} maze-embed
      :path: ordinary
      ```

- `{post}` marks a figure quoted from a chapter's source post ("the post's {post}`97.7 %`"):
  the only number the prose may type (tests/test_notebooks.py checks), shown as written.

A result file the page names and the repository lacks stops the build with an error naming it.
"""

from __future__ import annotations

from pathlib import Path

from docutils import nodes
from sphinx.util.docutils import SphinxDirective, SphinxRole

from toylib import results


def folder(env) -> Path:
    return Path(env.app.confdir) / "benchmarks" / "results"


def _depend(env, chapter: str, paths, preset: str | None = None) -> None:
    """Rebuild the page when one of its result files changes."""
    for path in paths:
        env.note_dependency(str(folder(env) / f"{'-'.join([chapter, *([preset] if preset else []), path])}.json"))


class BenchRole(SphinxRole):
    def run(self):
        try:
            text = results.resolve(self.text, folder(self.env))
        except ValueError as exc:
            msg = self.inliner.reporter.error(f"bench: {exc}", line=self.lineno)
            return [self.inliner.problematic(self.rawtext, self.rawtext, msg)], [msg]
        who, path = self.text.split(":")[:2]
        chapter, _, preset = who.partition("/")
        _depend(self.env, chapter, [path], preset or None)
        return [nodes.inline(self.rawtext, text, classes=["toy-bench"])], []


class PostRole(SphinxRole):
    def run(self):
        return [nodes.inline(self.rawtext, self.text, classes=["toy-post"])], []


def _cell(text: str, tag=nodes.entry) -> nodes.Element:
    entry = tag()
    entry += nodes.paragraph(text=text)
    return entry


class BenchTable(SphinxDirective):
    required_arguments = 1  # chapter[/preset]
    option_spec = {"paths": lambda arg: arg.split(), "every-row": lambda arg: True}

    def run(self):
        chapter, _, preset = self.arguments[0].partition("/")
        paths = self.options.get("paths", ["ordinary", "native"])
        try:
            header, rows, records = results.table(chapter, paths, preset or None, folder(self.env),
                                                  every_row="every-row" in self.options)
        except ValueError as exc:
            raise self.error(f"bench-table: {exc}") from None
        _depend(self.env, chapter, paths, preset or None)
        return [_table(header, rows),
                _fold([(results.path_label(r) + f", seeds {results.seeds_text(r)}", r["command"], _where(r))
                       for r in records])]


def _table(header, rows) -> nodes.table:
    table = nodes.table(classes=["toy-bench"])
    group = nodes.tgroup(cols=len(header))
    table += group
    group += [nodes.colspec(colwidth=1) for _ in header]
    head, body = nodes.thead(), nodes.tbody()
    group += [head, body]
    for part, lines in ((head, [header]), (body, rows)):
        for cells in lines:
            row = nodes.row()
            row += [_cell(c) for c in cells]
            part += row
    return table


def _fold(lines) -> nodes.Element:
    """A folded note "Measure these again": per line, (label, command, where and when)."""
    note = nodes.admonition(classes=["dropdown", "toy-reproduce"])
    note += nodes.title(text="Measure these again")
    items = nodes.bullet_list()
    for label, command, where in lines:
        para = nodes.paragraph()
        para += nodes.Text(f"{label}: " if label else "")
        para += nodes.literal(text=command)
        para += nodes.Text(f" ({where})")
        item = nodes.list_item()
        item += para
        items += item
    note += items
    return note


def _where(r) -> str:
    device = "on the CPU" if r["device"] == "cpu" else f"on {r['device']}"
    return (f"run on {results.date_text(r)}: {r['cpu']}, {r['cores']} cores, one thread per model {device}, "
            f"PyTorch {r['torch']}, commit {r['commit'][:7] or 'unknown'}")


class BenchRows(SphinxDirective):
    required_arguments = 1  # the study's name
    option_spec = {"path": lambda arg: arg.strip()}

    def run(self):
        name, path = self.arguments[0], self.options.get("path", "native")
        try:
            record = results.load_study(name, path, folder(self.env))
        except ValueError as exc:
            raise self.error(f"bench-rows: {exc}") from None
        self.env.note_dependency(str(folder(self.env) / f"{name}-{path}.json"))
        return [_table(record["header"], record["rows"]), _fold([("", record["command"], _where(record))])]


def setup(app):
    app.add_directive("bench-rows", BenchRows)
    app.add_role("bench", BenchRole())
    app.add_role("post", PostRole())
    app.add_directive("bench-table", BenchTable)
