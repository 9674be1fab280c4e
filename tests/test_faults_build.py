"""The engine build fails: a wrong source checksum, a CMake flag that breaks the configure step.
Each runs the real build code in a scratch cache (the pinned sdist linked in, so nothing is
downloaded), fails within seconds, before any compiling, and leaves no build taken as complete."""

import copy
import time

import pytest

from tests.fault_kit import SMOKE, real_engine
from whichshot.errors import ChecksumMismatch, WhichshotError

pytestmark = pytest.mark.e2e


@pytest.fixture
def scratch_cache(tmp_path):
    """A cache holding only the pinned sdist of the real cache (linked, read as is)."""
    real_sources = real_engine().model_path.parent.parent / "sources"
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "sources").symlink_to(real_sources)
    return cache


def _spec(**source_changes):
    spec = copy.deepcopy(SMOKE["engines"]["llama_cpp"])
    spec["source"].update(source_changes)
    return spec


def _leftovers(cache):
    """Whatever the failed build left besides the linked sources and its lock file."""
    return sorted(
        str(p.relative_to(cache))
        for p in cache.rglob("*")
        if not p.name.endswith(".lock") and p.name != "engines" and "sources" not in p.parts
    )


def test_source_checksum_mismatch_stops_the_build_before_unpacking(scratch_cache):
    started = time.monotonic()
    with pytest.raises(ChecksumMismatch) as caught:
        real_engine().engine.build(_spec(sha256="0" * 64), scratch_cache, 2)
    message = str(caught.value)
    assert message.startswith("llama-cpp-python==0.3.36 sdist: sha256 of ")
    assert "config pins " + "0" * 64 in message and "\n" not in message
    assert _leftovers(scratch_cache) == []
    assert time.monotonic() - started < 60


def test_bad_cmake_flag_fails_at_configure_with_cmakes_reason(scratch_cache):
    spec = _spec()
    spec["cmake_extra_flags"] = ["-DCMAKE_CXX_COMPILER=no-such-compiler"]
    started = time.monotonic()
    with pytest.raises(WhichshotError) as caught:
        real_engine().engine.build(spec, scratch_cache, 2)
    message = str(caught.value)
    assert message.startswith("engine build step failed (cmake -S exited with 1): CMake Error")
    assert "no-such-compiler" in message and "\n" not in message
    assert _leftovers(scratch_cache) == []  # no build.json, no binaries, scratch tree removed
    assert time.monotonic() - started < 120


def test_x86_builds_name_each_instruction_set_and_leave_amx_off():
    from engines.llama_cpp import cpu_arch_flags

    sapphire_rapids = {
        "sse4_2",
        "f16c",
        "fma",
        "bmi2",
        "avx",
        "avx2",
        "avx512f",
        "avx512cd",
        "avx512vl",
        "avx512dq",
        "avx512bw",
        "avx512_vnni",
        "amx_tile",
        "amx_int8",
        "amx_bf16",
    }
    flags = cpu_arch_flags(sapphire_rapids)
    if not flags:
        return  # not an x86 machine: ggml's native detection is used as it is
    assert flags[0] == "-DGGML_NATIVE=OFF"
    assert "-DGGML_AVX512=ON" in flags and "-DGGML_AVX512_VNNI=ON" in flags
    assert "-DGGML_AVX512_BF16=OFF" in flags  # not in this CPU's list
    assert {"-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF"} <= set(flags)
    assert "-DGGML_AVX=OFF" in cpu_arch_flags({"sse4_2"})
