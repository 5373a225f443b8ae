#!/usr/bin/env bash
# Every test: toylib's unit tests, and nbval re-executing each chapter against its stored
# outputs, in one pytest run spread over the CPU cores by pytest-xdist: one worker per core
# (TEST_WORKERS=N, or -n N among the arguments, to choose). Each chapter's kernel uses one
# thread, but Sokoban's trains its two policies in two processes more; with a worker more
# than the cores, four processes shared two cores while it trained, and the whole run was
# slower (the Results page has the times).
# --dist loadscope keeps each notebook's cells on one worker, so that they share one kernel,
# in order. The notebooks come first, the longest-running first (scripts/longest_first.py;
# --no-loadscope-reorder keeps that order, where xdist would sort by the number of tests), so
# that no long chapter starts last, and the unit tests fill the gaps. Sets up .venv first.
# Extra arguments go to pytest.
#
# The chapters train on the CPU here, as they did when their outputs were stored
# (TOYLIB_DEVICE=cuda bash scripts/test.sh trains them on a GPU instead). What nbval compares
# does not depend on the CPU's arithmetic (see tests/nbval_sanitize.cfg): to try another,
# TOYLIB_PROFILE=ordinary bash scripts/test.sh (AVX2 kernels in PyTorch, oneDNN and MKL, as
# CI runs it), or ATEN_CPU_CAPABILITY=default (or avx2, avx512) for PyTorch's own alone.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/env.sh
export TOYLIB_DEVICE=${TOYLIB_DEVICE:-cpu}
echo "device $TOYLIB_DEVICE, CPU kernels" \
  "$(.venv/bin/python -c 'from toylib.device import cpu_kernels; print(cpu_kernels())')"
notebooks=$(.venv/bin/python scripts/longest_first.py)  # a failure here stops the script (set -e)
.venv/bin/python -m pytest -n "${TEST_WORKERS:-$(nproc)}" --dist loadscope --no-loadscope-reorder \
  --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider \
  $notebooks tests "$@"
