#!/usr/bin/env bash
# Every test: toylib's unit tests, and nbval re-executing each chapter against its stored
# outputs, in one pytest run spread over the CPU cores by pytest-xdist: one worker more than
# the cores, since each chapter's kernel uses one thread and the slowest chapters should not
# wait for a free core (TEST_WORKERS=N, or -n N among the arguments, to choose).
# --dist loadscope keeps each notebook's cells on one worker, so that they share one kernel,
# in order. The notebooks come first so that their workers start at once and the unit tests
# fill the gaps. Sets up .venv first. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m pytest -n "${TEST_WORKERS:-$(( $(nproc) + 1 ))}" --dist loadscope \
  --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider \
  book tests "$@"
