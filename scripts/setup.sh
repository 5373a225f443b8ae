#!/usr/bin/env bash
# Creates (or refreshes) .venv with the pinned environment and toylib from this checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  # the pinned packages and the notebooks need Python 3.11 or newer: say so, not a pip error later
  if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "The book needs Python 3.11 or newer; '$PYTHON' is $("$PYTHON" --version 2>/dev/null || echo "not found")." >&2
    echo "Run with PYTHON=python3.11 (or newer) in front of the command." >&2
    exit 1
  fi
  "$PYTHON" -m venv .venv
fi
# Skip the install when requirements.txt has not changed since the last one.
stamp=.venv/.requirements.sha256
want=$(sha256sum requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
  echo "$want" > "$stamp"
fi
