"""The benchmark's result files (toylib.results): written as run.py writes them, read as the
book's pages read them, and every number the pages take from them found there."""

import json
import re
from pathlib import Path

import pytest

from toylib import results
from toylib.targets import Target, share_target, time_target, with_floor

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"


def targets(exact: float, attention: float, seconds: float) -> list[Target]:
    return [share_target("exact next state", exact, 1.0), share_target("attention on the neighbours", attention, 0.99),
            with_floor(share_target("solvability", attention, 0.99), attention, 0.9, "the post's figure"),
            Target("a detail", "-", "3", None), time_target(seconds, 180)]


@pytest.fixture
def folder(tmp_path):
    record = results.start("life", "cpu", profile="ordinary", command="python benchmarks/run.py --chapters life")
    for seed, (exact, attention, seconds) in enumerate([(1.0, 0.995, 40.2), (1.0, 0.985, 200.0), (1.0, 0.9951, 9.6)]):
        results.add_seed(record, seed, seconds, targets(exact, attention, seconds))
    results.write(record, tmp_path / results.file_name(record))
    return tmp_path


def test_a_record_names_its_run_and_judges_each_seed_as_the_chapter_does(folder):
    record = results.load(folder / "life-ordinary.json")
    assert record["path"] == "ordinary" and record["command"].endswith("--chapters life")
    assert record["date"] and record["cpu"] and record["kernels"].startswith("ATen")
    # seed 1 misses attention (a target of the model); its time over budget is the machine's
    assert [s["every_target"] for s in record["seeds"]] == [True, False, True]
    assert record["seeds"][1]["missed"] == ["attention on the neighbours", "solvability"]
    assert record["seeds"][1]["over"] == ["training time"]
    assert results.count(record) == (2, 3) and results.seeds_text(record) == "0 to 2"


def test_what_a_page_shows_is_read_from_the_file(folder):
    show = lambda spec: results.resolve(spec, folder)  # noqa: E731
    assert show("life:ordinary:count") == "2 of 3"
    assert show("life:ordinary:train") == "10 to 200 s"
    assert show("life:ordinary:misses") == "seed 1"
    assert show("life:ordinary:range:attention") == "98.50 % to 99.51 %"
    assert show("life:ordinary:met:attention") == "2 of 3"
    assert show("life:ordinary:floor:solvability") == "3 of 3"
    assert show("life:ordinary:range:exact") == "100.00 %"  # one value, said once
    assert show("life:ordinary:goal:attention") == "99 %"  # the goal ">= 99 %", by its figure


@pytest.mark.parametrize("spec, problem", [
    ("life:ordinary", "chapter"), ("life:ordinary:speed", "unknown bench value"),
    ("life:ordinary:range", "needs a measure"), ("life:ordinary:count:exact", "takes no measure"),
    ("life:ordinary:range:t", "3 targets of life contain"), ("life:ordinary:floor:exact", "has no floor"),
    ("life:native:count", "no result file life-native.json"), ("life:gpu2:count", "unknown path")])
def test_a_spec_the_files_cannot_answer_is_refused_by_name(folder, spec, problem):
    with pytest.raises(ValueError, match=problem):
        results.resolve(spec, folder)


def test_the_results_table_shows_what_some_seed_missed_and_counts_the_rest(folder):
    header, rows, _ = results.table("life", ["ordinary"], folder=folder)
    assert header == ["", "goal", "ordinary (" + results.path_label(results.load(folder / "life-ordinary.json"))
                      .split("(")[1]]
    assert rows[0] == ["every target", "", "2 of 3 seeds"] and rows[1] == ["training per seed", "", "10 to 200 s"]
    assert ["attention on the neighbours", ">= 99 %", "2 of 3: 98.50 % to 99.51 %"] in rows
    assert ["solvability", ">= 99 %, floor 90 %", "2 of 3: 98.50 % to 99.51 %"] in rows
    assert rows[-1] == ["the other 1 targets", "", "met by every seed"]
    _, every, _ = results.table("life", ["ordinary"], folder=folder, every_row=True)
    assert len(every) == 2 + 3


def test_a_file_that_lacks_what_the_book_reads_is_refused(tmp_path):
    (tmp_path / "life-ordinary.json").write_text(json.dumps({"chapter": "life"}))
    with pytest.raises(ValueError, match="lacks"):
        results.find("life", "ordinary", folder=tmp_path)
    (tmp_path / "maze-native.json").write_text("{")
    with pytest.raises(ValueError, match="cannot read"):
        results.find("maze", "native", folder=tmp_path)


def test_a_command_names_one_chapter_and_no_output_folder():
    words = ["--profile", "ordinary", "--chapters", "life,maze", "--out=/tmp/x", "--set", "lr=0.1"]
    assert results.command(words, "maze") == "python benchmarks/run.py --chapters maze --profile ordinary --set lr=0.1"
    record = results.start("tictactoe", "cpu", profile="ordinary", changes={"train_on_val": False, "weight_decay": 0.5})
    assert results.file_name(record) == "tictactoe-train_on_val=False-weight_decay=0.5-ordinary.json"


# ----------------------------------------------------------------------------- the book's own files
ROLE = re.compile(r"\{bench\}`([^`]+)`")
DIRECTIVE = re.compile(r"```\{bench-(table|rows)\} (\S+)\n((?::[\w-]+:[^\n]*\n)*)")


def page_texts() -> dict[str, str]:
    texts = {p.name: p.read_text() for p in BOOK.glob("*.md")}
    for nb in BOOK.glob("*.ipynb"):
        texts[nb.name] = "\n".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"]
                                   if c["cell_type"] == "markdown")
    return texts


def test_every_benchmark_number_a_page_shows_is_in_a_result_file_of_the_repository():
    specs = [(page, spec) for page, text in page_texts().items() for spec in ROLE.findall(text)]
    assert len(specs) > 40
    shown = {spec: results.resolve(spec) for _, spec in specs}
    assert all(shown.values())
    tables = [(kind, name, options) for text in page_texts().values() for kind, name, options in DIRECTIVE.findall(text)]
    assert {name for kind, name, _ in tables if kind == "table"} >= {"life", "life/any_size", "sequences", "tictactoe",
                                                                      "maze", "sokoban"}
    for kind, name, options in tables:
        if kind == "table":
            paths = (re.findall(r":paths: ([^\n]*)", options) or ["ordinary native"])[0].split()
            chapter, _, preset = name.partition("/")
            results.table(chapter, paths, preset or None)
        else:
            results.load_study(name, (re.findall(r":path: (\S+)", options) or ["native"])[0])


def test_every_result_file_covers_ten_seeds_from_a_commit():
    for path in results.FOLDER.glob("*.json"):
        record = json.loads(path.read_text())
        assert re.fullmatch(r"[0-9a-f]{40}", record["commit"]), path.name
        if "seeds" in record:
            assert [s["seed"] for s in record["seeds"]] == list(range(10)), path.name


def test_the_maze_chapter_s_words_on_its_embedding_table_hold_for_its_file():
    """"on every seed the model fed raw numbers solves more test mazes than the one fed
    embeddings, and neither solves half of them" (the maze chapter, under the table)."""
    study = results.load_study("maze-embed", "ordinary")
    solved = {}
    for inputs, seed, share, *_ in study["rows"]:
        solved[inputs.startswith("raw"), seed] = float(share.rstrip(" %"))
    seeds = {seed for _, seed in solved}
    assert seeds and all(solved[True, s] > solved[False, s] for s in seeds)
    assert max(solved.values()) < 50


def test_seeds_run_in_two_processes_merge_into_one_record(folder, tmp_path):
    whole = results.load(folder / "life-ordinary.json")
    first = {**whole, "command": "python benchmarks/run.py --chapters life --seeds 2", "seeds": whole["seeds"][:2]}
    rest = {**whole, "command": "python benchmarks/run.py --chapters life --first-seed 2 --seeds 1",
            "seeds": whole["seeds"][2:], "date": "2030-01-01T00:00:00+00:00"}
    merged = results.merge([rest, first], "python benchmarks/run.py --chapters life")
    assert [s["seed"] for s in merged["seeds"]] == [0, 1, 2] and results.count(merged) == (2, 3)
    assert merged["date"].startswith("2030") and merged["parts"] == [rest["command"], first["command"]]
    with pytest.raises(ValueError, match="a seed is in two records"):
        results.merge([first, first], "x")
    with pytest.raises(ValueError, match=r"differ in \['path'\]"):
        results.merge([first, {**rest, "path": "native"}], "x")
