"""Build the site into _build/html.

    python scripts/build_book.py                  # execute every notebook, then build (the book command)
    python scripts/build_book.py --stored-outputs # build from the outputs stored in the notebooks (CI)

Either way, warnings are errors and a cell that raises fails the build.
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--stored-outputs", action="store_true", help="do not execute the notebooks")
args = parser.parse_args()

jb = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(ROOT), "--warningiserror", "--keep-going"]
if not args.stored_outputs:
    sys.exit(subprocess.call(jb, cwd=ROOT))

# Jupyter Book 1 takes its execution mode from _config.yml only: build from a copy of the
# configuration with execution switched off.
config = (ROOT / "_config.yml").read_text()
if "execute_notebooks: force" not in config:
    sys.exit("scripts/build_book.py: _config.yml no longer says 'execute_notebooks: force'")
with tempfile.TemporaryDirectory() as tmp:
    stored = Path(tmp) / "_config.yml"
    stored.write_text(config.replace("execute_notebooks: force", "execute_notebooks: \"off\""))
    sys.exit(subprocess.call(jb + ["--config", str(stored)], cwd=ROOT))
