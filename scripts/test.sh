#!/usr/bin/env bash
# Every test: toylib's unit tests, and nbval re-executing each chapter against its stored
# outputs, in one pytest run spread over the CPU cores by pytest-xdist: one worker per core
# (TEST_WORKERS=N, or -n N among the arguments, to choose). Each chapter's kernel uses one
# thread, but Sokoban's trains its two policies in two processes more; with a worker more
# than the cores, four processes shared two cores while it trained. Fresh clones on 2 cores,
# 27 November 2026: 9 min 14 s of pytest with one worker per core against 10 min 04 s with
# three that morning; 10 min 14 s against 10 min 56 s that afternoon, on a slower hour.
# --dist loadscope keeps each notebook's cells on one worker, so that they share one kernel,
# in order. The notebooks come first, the longest-running first (scripts/longest_first.py;
# --no-loadscope-reorder keeps that order, where xdist would sort by the number of tests), so
# that no long chapter starts last, and the unit tests fill the gaps. Sets up .venv first.
# Extra arguments go to pytest.
#
# The chapters train on the CPU here, as they did when their outputs were stored
# (TOYLIB_DEVICE=cuda bash scripts/test.sh trains them on a GPU instead). What nbval compares
# does not depend on the CPU's arithmetic (see tests/nbval_sanitize.cfg): to try another,
# ATEN_CPU_CAPABILITY=default (or avx2, avx512) bash scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/env.sh
export TOYLIB_DEVICE=${TOYLIB_DEVICE:-cpu}
echo "device $TOYLIB_DEVICE, PyTorch CPU kernels" \
  "$(.venv/bin/python -c 'import torch; print(torch.backends.cpu.get_cpu_capability())')"
notebooks=$(.venv/bin/python scripts/longest_first.py)  # a failure here stops the script (set -e)
.venv/bin/python -m pytest -n "${TEST_WORKERS:-$(nproc)}" --dist loadscope --no-loadscope-reorder \
  --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider \
  $notebooks tests "$@"
