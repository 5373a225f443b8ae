"""Execute chapter notebooks in place, storing their outputs, as the book's build runs them:
the kernel in the notebook's folder, the cell timeout of _config.yml, a failing cell an error,
and no saved widget state (see scripts/build_book.py).

    .venv/bin/python scripts/execute_notebook.py book/life.ipynb [book/maze.ipynb ...]

(`jupyter execute --inplace` would save the widgets' state into the notebook's metadata, and
tests/test_notebooks.py refuses a notebook that holds it.)
"""

import sys
import time
from pathlib import Path

import nbformat
import yaml
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent


def main(paths: list[str]) -> None:
    if not paths:
        sys.exit(__doc__)
    timeout = (yaml.safe_load((ROOT / "_config.yml").read_text()).get("execute") or {}).get("timeout", 30)
    for name in paths:
        path = Path(name).resolve()
        nb = nbformat.read(path, as_version=4)
        start = time.time()
        NotebookClient(nb, timeout=timeout, kernel_name="python3", store_widget_state=False,
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        nb.metadata.pop("widgets", None)
        nbformat.write(nb, path)
        print(f"{name}: executed in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
