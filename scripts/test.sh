#!/usr/bin/env bash
# Every test: toylib's unit tests, then nbval re-executing each chapter against its stored
# outputs. Sets up .venv first. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m pytest -p no:cacheprovider tests "$@"
.venv/bin/python -m pytest --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider book "$@"
