"""CPU profiles (toylib.device.PROFILES): the ordinary one computes with AVX2 kernels in
PyTorch and in oneDNN alike, whatever this CPU has; the scripts select it by TOYLIB_PROFILE."""

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from toylib.device import PROFILES, cpu_kernels, profile_env

ROOT = Path(__file__).resolve().parent.parent
X86 = platform.machine().lower() in ("x86_64", "amd64")

# a convolution, as Sokoban's encoder runs them, with oneDNN saying which code it ran
CONVOLVE = """
import torch
print(torch.backends.cpu.get_cpu_capability(), flush=True)
torch.nn.functional.conv2d(torch.rand(4, 32, 8, 8), torch.rand(32, 32, 3, 3), padding=1)
"""


def run_python(code: str, env: dict[str, str]) -> list[str]:
    """stdout and stderr of `code` run with `env` over this environment less any profile's
    variables (the test command itself may run under one)."""
    base = {k: v for k, v in os.environ.items() if not any(k in p for p in PROFILES.values())}
    done = subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True,
                          check=True)
    return (done.stdout + done.stderr).splitlines()


def test_profiles_name_their_variables():
    assert profile_env("native") == {}
    ordinary = profile_env("ordinary")
    assert ordinary["ATEN_CPU_CAPABILITY"] == "avx2" and ordinary["DNNL_MAX_CPU_ISA"] == "AVX2"
    ordinary["ATEN_CPU_CAPABILITY"] = "changed"  # a copy: the profile itself stays
    assert PROFILES["ordinary"]["ATEN_CPU_CAPABILITY"] == "avx2"
    with pytest.raises(ValueError, match="unknown CPU profile 'fast'; the profiles are native, ordinary"):
        profile_env("fast")
    assert cpu_kernels().startswith("ATen ")


@pytest.mark.skipif(not X86, reason="AVX2 and AVX-512 are x86 vector units")
def test_ordinary_profile_runs_avx2_kernels():
    lines = run_python(CONVOLVE, {**profile_env("ordinary"), "ONEDNN_VERBOSE": "1"})
    assert lines[0] in ("AVX2", "DEFAULT")  # DEFAULT on an x86 CPU without AVX2
    convolutions = [line for line in lines if ",exec," in line and "convolution" in line]
    assert convolutions, lines
    assert not any("avx512" in line for line in convolutions), convolutions


@pytest.mark.skipif(not X86, reason="AVX2 and AVX-512 are x86 vector units")
def test_a_time_row_names_the_profile_it_ran_under():
    code = "import torch; from toylib.device import where; torch.set_num_threads(1); print(where())"
    assert run_python(code, profile_env("ordinary"))[0].endswith(", 1 thread, the ordinary profile (AVX2)")
    assert run_python(code, {"ATEN_CPU_CAPABILITY": "default"})[0].endswith("kernels, not the ordinary profile")
    native = run_python(code, {})[0]  # an AVX-512 CPU says so; an AVX2 one computes as the profile does
    assert native.endswith(("AVX-512 kernels, faster than the ordinary profile", "the ordinary profile (AVX2)"))


@pytest.mark.skipif(not X86, reason="AVX2 and AVX-512 are x86 vector units")
def test_capping_aten_alone_leaves_onednn_as_it_was():
    """Why the profile caps oneDNN too: ATEN_CPU_CAPABILITY does not reach the convolutions."""
    native = run_python(CONVOLVE, {"ONEDNN_VERBOSE": "1"})
    aten_only = run_python(CONVOLVE, {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_VERBOSE": "1"})

    def kernels(lines):
        return {field for line in lines if ",exec," in line and "convolution" in line
                for field in line.split(",") if field.startswith(("jit:", "brg", "gemm:", "ref:"))}

    assert kernels(aten_only) == kernels(native)


def test_the_shell_exports_of_a_profile():
    exports = subprocess.run([sys.executable, "-m", "toylib.device", "ordinary"], capture_output=True, text=True,
                             check=True).stdout.splitlines()
    assert exports == [f"export {k}={v}" for k, v in PROFILES["ordinary"].items()]
    bad = subprocess.run([sys.executable, "-m", "toylib.device", "fast"], capture_output=True, text=True)
    assert bad.returncode != 0 and "unknown CPU profile 'fast'" in bad.stderr


@pytest.mark.skipif(not (ROOT / ".venv/bin/python").exists(), reason="scripts/env.sh runs .venv's Python")
def test_scripts_select_a_profile_by_name():
    script = 'set -e; source scripts/env.sh; echo "$ATEN_CPU_CAPABILITY $DNNL_MAX_CPU_ISA"'
    ordinary = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, check=True,
                              env={**os.environ, "TOYLIB_PROFILE": "ordinary"})
    assert ordinary.stdout.split() == ["avx2", "AVX2"]
    bad = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "TOYLIB_PROFILE": "fast"})
    assert bad.returncode != 0 and "unknown CPU profile" in bad.stderr


def test_a_benchmark_runs_again_under_its_profile_and_names_its_kernels(tmp_path):
    """benchmarks/notebooks.py, run with --profile ordinary, computes (and records) with the
    profile's kernels in its own process too: `device.run_again_with` restarts it with them."""
    script = tmp_path / "again.py"
    script.write_text("import os, sys\nfrom toylib.device import PROFILES, run_again_with\n"
                      "run_again_with(PROFILES['ordinary'], __file__, sys.argv[1:])\n"
                      "from toylib.device import cpu_kernels\nprint(cpu_kernels(), sys.argv[1:])\n")
    out = run_python(f"import runpy, sys; sys.argv = [{str(script)!r}, 'a', 'b']; runpy.run_path({str(script)!r})", {})
    kernels, _, args = out[-1].partition(" [")
    assert kernels in ("ATen AVX2, oneDNN AVX2", "ATen DEFAULT, oneDNN AVX2") and args == "'a', 'b']"
