"""The book's notebooks, the longest-running first, by the run whose outputs each one stores
(its cells' execution times): the order in which the book command and the test command start
them. With several notebooks at once on a few cores, the last one to start sets when the
whole run ends; starting the longest first lets the short ones fill in around it.

    .venv/bin/python scripts/longest_first.py     # the notebooks of _toc.yml, one path per line
"""

import datetime
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def stored_seconds(path: Path) -> float:
    """How long the run that stored the notebook's outputs took, from its first cell's start to
    its last cell's reply (0 for a notebook stored without execution times, or not an .ipynb)."""
    if path.suffix != ".ipynb":
        return 0.0
    times = [c.get("metadata", {}).get("execution", {}) for c in json.loads(path.read_text(encoding="utf8"))["cells"]]
    starts = [t["iopub.execute_input"] for t in times if "iopub.execute_input" in t]
    ends = [t["shell.execute_reply"] for t in times if "shell.execute_reply" in t]
    if not starts or not ends:
        return 0.0
    stamp = datetime.datetime.fromisoformat
    return max(0.0, (stamp(max(ends)) - stamp(min(starts))).total_seconds())


def longest_first(paths: list[Path]) -> list[Path]:
    """`paths` by stored run time, the longest first (ties in the order given)."""
    return sorted(paths, key=stored_seconds, reverse=True)


def main() -> None:
    from sphinx_external_toc.parsing import parse_toc_yaml

    site_map = parse_toc_yaml(ROOT / "_toc.yml")
    notebooks = [ROOT / f"{name}.ipynb" for name in site_map if (ROOT / f"{name}.ipynb").is_file()]
    for path in longest_first(notebooks):
        print(path.relative_to(ROOT))


if __name__ == "__main__":
    main()
