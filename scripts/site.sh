#!/usr/bin/env bash
# The site as GitHub Pages publishes it (.github/workflows/pages.yml runs this, and so does CI):
# sets up .venv, builds _build/html from the outputs stored in the notebooks, with warnings as
# errors, and checks what was built before anyone publishes it (tests/test_site.py: source files
# that download, maths from the site's own MathJax, nothing from another host, and, where
# Chromium is present, maths typeset offline, search snippets typeset, animation icons drawn and
# dark mode readable; tests/test_figures.py: every figure's labels at least 9 px on a phone 412 px
# wide). No notebook runs here: the stored outputs are the ones that nbval compares with a fresh
# run (scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python scripts/build_book.py --stored-outputs
TOYBOOK_SITE=$PWD/_build/html .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_site.py tests/test_figures.py
echo "The site is in _build/html/index.html"
