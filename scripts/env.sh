# Sourced by scripts/book.sh and scripts/test.sh: the environment the chapters' kernels inherit.
#
# glibc's malloc gives every freed block over 128 KiB straight back to the kernel, so each
# training step's tensors are mapped and zeroed afresh: page faults took about 6 % of the test
# command's CPU (98 s of system time in 25.6 min). Keeping freed memory in the process for
# reuse made training 6 to 16 % faster here (Sokoban, maze, Life), and changes no arithmetic:
# PyTorch aligns every tensor the same way wherever its memory comes from. Elsewhere than
# glibc these are ignored. Set either variable to choose another value.
export MALLOC_MMAP_THRESHOLD_=${MALLOC_MMAP_THRESHOLD_:-1073741824}  # 1 GiB
export MALLOC_TRIM_THRESHOLD_=${MALLOC_TRIM_THRESHOLD_:-1073741824}

# TOYLIB_PROFILE=ordinary: compute with the kernels of the CPU most learners have (AVX2, no
# AVX-512) in PyTorch, oneDNN and MKL alike, whatever this CPU has (toylib/device.py, PROFILES).
if [ -n "${TOYLIB_PROFILE:-}" ]; then
  exports=$(.venv/bin/python -m toylib.device "$TOYLIB_PROFILE")  # an unknown profile stops here
  eval "$exports"
fi
