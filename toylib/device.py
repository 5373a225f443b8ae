"""Device choice, seeding and CPU profiles, in one place for the whole book.

    python -m toylib.device ordinary    # the shell exports that select the ordinary profile
"""

from __future__ import annotations

import contextlib
import os
import platform
import random
import sys
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import torch


def pick_device(prefer: str | None = None) -> torch.device:
    """CUDA if there is one, else Apple's MPS, else the CPU.

    `prefer` ("cpu", "cuda", "mps") overrides the choice, and so does the environment
    variable TOYLIB_DEVICE, which lets a reader with a GPU reproduce the CPU numbers.
    """
    choice = prefer or os.environ.get("TOYLIB_DEVICE")
    if choice:
        if choice not in ("cpu", "cuda", "mps"):
            raise ValueError(f"device must be 'cpu', 'cuda' or 'mps', got {choice!r}")
        return torch.device(choice)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def seed_everything(seed: int, deterministic: bool = True) -> np.random.Generator:
    """Seed Python, NumPy and torch (every device), and return a NumPy generator from `seed`.

    Chapters draw their data from the returned generator rather than from global state, so
    that data and initial weights can be reproduced independently of each other.

    With `deterministic`, torch uses its deterministic kernels. Without them two runs of the
    same seed differ in the ninth decimal after a few steps on a CPU (some backward passes
    accumulate in parallel, in whatever order threads finish), and over thousands of steps
    that grows into a different model. Ops with no deterministic kernel only warn.
    """
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds CUDA and MPS
    if deterministic:
        # cuBLAS needs this to be deterministic; it only takes effect before CUDA starts
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(deterministic, warn_only=True)
    return np.random.default_rng(seed)


@contextlib.contextmanager
def cpu_threads(n: int) -> Iterator[None]:
    """Run a block with `n` CPU threads for torch, then put the previous number back."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"threads must be a positive integer, got {n!r}")
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextlib.contextmanager
def flush_denormals() -> Iterator[None]:
    """Run a block with the CPU rounding denormal numbers (below about 1e-38) to zero, then
    turn that off again. Once a softmax puts next to nothing on most keys, the gradients fill
    with denormals, which x86 CPUs handle several times slower than ordinary numbers: a Life
    run measured 0.10 to 0.16 s a step with them and 0.026 s without, on the same path (the
    metrics agree to the digits printed). Off is torch's default, so the other chapters'
    arithmetic is untouched."""
    torch.set_flush_denormal(True)  # returns False where the CPU cannot: then nothing changes
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


def cpu_cores() -> int:
    """The CPU cores this process may run on (a container or `taskset` may allow fewer than
    the machine has)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows have no affinity call
        return os.cpu_count() or 1


# The CPU most learners have: AVX2 vector units and no AVX-512 (most laptops, many cloud CPUs,
# every Apple machine). PyTorch's own kernels (ATen), oneDNN's (the convolutions) and MKL's
# (matrix products) each pick their code by the CPU they find, so capping one is not enough:
# ATEN_CPU_CAPABILITY alone leaves oneDNN on AVX-512. Each variable is read once, when the
# library loads, so a profile is chosen before Python starts (the scripts' TOYLIB_PROFILE,
# the benchmarks' --profile). On an AVX2 CPU the ordinary profile changes nothing.
PROFILES: dict[str, dict[str, str]] = {
    "native": {},  # whatever this CPU does best
    "ordinary": {"ATEN_CPU_CAPABILITY": "avx2", "DNNL_MAX_CPU_ISA": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2",
                 "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
}


def profile_env(name: str) -> dict[str, str]:
    """The environment variables of the CPU profile `name` (see PROFILES)."""
    if name not in PROFILES:
        raise ValueError(f"unknown CPU profile {name!r}; the profiles are {', '.join(PROFILES)}")
    return dict(PROFILES[name])


def run_again_with(variables: Mapping[str, str], script: str, argv: Sequence[str]) -> None:
    """Where this process lacks any of `variables` (a profile's, `profile_env`), run `script`
    with `argv` again in its place, in a process that has them: PyTorch, oneDNN and MKL read
    them once, when they load, so this process could not take them up. Returns only where
    nothing was missing (the benchmarks call it first, so that they and every process they
    start compute with the profile, and their result files name its kernels)."""
    if any(os.environ.get(k) != v for k, v in variables.items()):
        os.execve(sys.executable, [sys.executable, script, *argv], {**os.environ, **variables})


def cpu_name() -> str:
    """The CPU's model, as the system names it ("AMD EPYC 9B14"), or the machine's kind."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_kernels() -> str:
    """Which vector kernels this process computes with: ATen's (as torch reports them) and the
    ceiling set on oneDNN's, e.g. "ATen AVX2, oneDNN AVX2"."""
    onednn = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or "best"
    return f"ATen {torch.backends.cpu.get_cpu_capability()}, oneDNN {onednn}"


def where(device: torch.device | str | None = None) -> str:
    """Where this process computes, for a reader beside a time: the GPU's name, or the CPU's
    with its threads and its kernels against the ordinary profile, e.g. "AMD EPYC 9B14, 1
    thread, the ordinary profile (AVX2)" or "..., AVX-512 kernels, faster than the ordinary
    profile". Without `device`, the one `pick_device` chooses."""
    device = torch.device(device) if device is not None else pick_device()
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} GPU"
    if device.type != "cpu":
        return device.type
    threads = torch.get_num_threads()
    aten = torch.backends.cpu.get_cpu_capability()  # "AVX2", "AVX512", "DEFAULT", ...
    onednn = (os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or "").upper()
    if aten == "AVX2" and (onednn.startswith("AVX2") or not _has_avx512()):
        kernels = "the ordinary profile (AVX2)"
    elif aten.startswith("AVX512"):
        kernels = "AVX-512 kernels, faster than the ordinary profile"
    elif aten == "AVX2":  # PyTorch's own kernels capped, oneDNN's convolutions still on AVX-512
        kernels = "AVX2 kernels (oneDNN's on AVX-512), near the ordinary profile"
    else:  # "DEFAULT": ATen's kernels without vector extensions
        kernels = f"ATen's {aten.lower()} kernels, not the ordinary profile"
    return f"{cpu_name()}, {threads} thread{'s' if threads != 1 else ''}, {kernels}"


def _has_avx512() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " avx512f" in line for line in f)
    except OSError:
        return False


def setup(threads: int = 1, prefer: str | None = None) -> torch.device:
    """What every chapter does first: choose the device (see `pick_device`) and set torch's
    CPU threads.

    One thread, by default: the book's models have a few thousand to a few hundred thousand
    weights, for which a second thread on a 2-core machine gains little and can lose much
    (the threads wait on each other), and the book executes its chapters side by side, one
    per core. One thread also repeats the same arithmetic on every run of a machine. With a
    GPU the CPU's threads are left as they are: what the CPU still computes there (data,
    search) may use every core."""
    device = pick_device(prefer)
    if not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be a positive integer, got {threads!r}")
    if device.type == "cpu":
        torch.set_num_threads(threads)
    return device


if __name__ == "__main__":  # python -m toylib.device PROFILE: its exports, for a shell to eval
    import sys

    if len(sys.argv) != 2:
        sys.exit(f"usage: python -m toylib.device PROFILE, one of {', '.join(PROFILES)}")
    try:
        exports = profile_env(sys.argv[1])
    except ValueError as e:
        sys.exit(str(e))
    print("".join(f"export {key}={value}\n" for key, value in exports.items()), end="")
