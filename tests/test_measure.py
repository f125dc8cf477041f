"""What a result records about the machine it was measured on (``xc_core.measure.machine``)."""

from __future__ import annotations

from pathlib import Path

from xc_core.measure import machine, simd


def test_the_widest_vector_set_is_read_from_the_flags_line() -> None:
    # one model name ("AMD EPYC") covers machines with and without AVX-512, whose float kernels round differently
    assert simd(["model name\t: AMD EPYC", "flags\t\t: fpu sse4_2 avx avx2 fma"]) == "avx2"
    assert simd(["flags\t\t: fpu sse4_2 avx2 avx512f avx512bw"]) == "avx512"
    assert simd(["flags\t\t: fpu sse4_2"]) == "sse"
    assert simd(["model name\t: an emulator without flags"]) == "unknown"


def test_this_machine_records_its_vector_set_beside_its_model() -> None:
    found = machine()
    flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    assert found["simd"] == ("avx512" if " avx512f" in flags else "avx2" if " avx2" in flags else found["simd"])
    assert found["cores"] >= 1 and found["cpu"]
