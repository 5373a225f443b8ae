#!/usr/bin/env bash
# The book: sets up .venv, executes every chapter and builds the site into _build/html.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/env.sh
.venv/bin/python scripts/build_book.py "$@"
echo "The site is in _build/html/index.html, its Colab edition in _build/colab/book"
