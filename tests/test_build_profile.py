"""The engine build's profile (issue 20): .ninja_log read into per-target and per-object seconds,
recorded in build.json and build_profile.tsv; the generator is no part of the build id."""

import json
from pathlib import Path

import pytest

from engines import build_profile, llama_cpp
from engines.build_profile import (
    NinjaLogError,
    parse_ninja_log,
    profile_table,
    summarize,
)

# A small log as ninja writes it: two objects of ggml-base, one of llama (listed twice: rebuilt, the
# later entry stands), a library, a custom command with two outputs (one step), the executable.
LOG = """# ninja log v7
0\t300\t1796331244519348615\tggml/src/CMakeFiles/ggml-base.dir/ggml.cpp.o\tbcd8588dc176103e
1\t2501\t1796331244826770969\tggml/src/CMakeFiles/ggml-base.dir/ggml-alloc.c.o\tc13d7d24f8b52868
300\t1300\t1796331245000000000\tsrc/CMakeFiles/llama.dir/llama-model.cpp.o\t0000000000000001
2501\t2600\t1796331246000000000\tggml/src/libggml-base.a\t00000000000000a1
2600\t2610\t1796331246100000000\ttools/ui/ui.cpp\t00000000000000b1
2600\t2610\t1796331246100000000\ttools/ui/ui.h\t00000000000000b1
2610\t6610\t1796331247000000000\tsrc/CMakeFiles/llama.dir/llama-model.cpp.o\t0000000000000002
6610\t6900\t1796331248000000000\tbin/llama-server\t00000000000000c1
"""


def test_the_last_entry_of_an_output_wins():
    steps = parse_ninja_log(LOG)
    assert [s.output for s in steps] == [
        "ggml/src/CMakeFiles/ggml-base.dir/ggml.cpp.o",
        "ggml/src/CMakeFiles/ggml-base.dir/ggml-alloc.c.o",
        "ggml/src/libggml-base.a",
        "tools/ui/ui.cpp",
        "tools/ui/ui.h",
        "src/CMakeFiles/llama.dir/llama-model.cpp.o",
        "bin/llama-server",
    ]
    model = steps[5]
    assert (model.start_ms, model.end_ms, model.command_hash) == (2610, 6610, "0000000000000002")
    assert model.seconds == 4.0 and model.target == "llama" and model.kind == "compile"
    assert [s.kind for s in steps] == ["compile", "compile", "link", "other", "other", "compile", "link"]


def test_the_summary_sums_per_target_and_names_the_slowest_objects():
    profile = summarize(parse_ninja_log(LOG), "Ninja", 3, 7.04)
    assert profile["generator"] == "Ninja" and profile["jobs"] == 3 and profile["wall_s"] == 7.0
    assert profile["targets"] == {
        "llama": {"compile_s": 4.0, "objects": 1},
        "ggml-base": {"compile_s": 2.8, "objects": 2},
    }
    assert list(profile["targets"]) == ["llama", "ggml-base"]  # slowest target first
    assert profile["slowest_objects"] == [
        ["src/CMakeFiles/llama.dir/llama-model.cpp.o", 4.0],
        ["ggml/src/CMakeFiles/ggml-base.dir/ggml-alloc.c.o", 2.5],
        ["ggml/src/CMakeFiles/ggml-base.dir/ggml.cpp.o", 0.3],
    ]
    # six commands: the custom command's two outputs are one step of 0.01 s
    assert profile["steps"] == 6 and profile["other_s"] == 0.0 and profile["link_s"] == 0.4
    assert profile["compile_s"] == 6.8 and profile["steps_s"] == 7.2


def test_the_slowest_objects_stop_at_fifteen():
    lines = [f"{i}\t{i + 10 * i}\t0\tCMakeFiles/t.dir/o{i}.cpp.o\th{i}" for i in range(1, 21)]
    profile = summarize(parse_ninja_log("# ninja log v5\n" + "\n".join(lines)), "Ninja", 2, 1.0)
    assert len(profile["slowest_objects"]) == build_profile.SLOWEST_OBJECTS == 15
    assert profile["slowest_objects"][0] == ["CMakeFiles/t.dir/o20.cpp.o", 0.2]
    assert profile["targets"] == {"t": {"compile_s": 2.1, "objects": 20}}


def test_the_table_lists_every_output_slowest_first():
    rows = [line.split("\t") for line in profile_table(parse_ninja_log(LOG)).splitlines()]
    assert rows[0] == ["output", "target", "kind", "start_s", "end_s", "seconds"]
    assert len(rows) == 1 + 7
    assert rows[1] == ["src/CMakeFiles/llama.dir/llama-model.cpp.o", "llama", "compile", "2.610", "6.610",
                       "4.000"]  # fmt: skip
    assert rows[-1][1:3] == ["", "other"] and rows[-1][5] == "0.010"


UNREADABLE = ("", "# ninja log v4\n", "not a log\n", "# ninja log v7\n1\t2\tpath\n",
              "# ninja log v7\na\t2\t0\tx.o\th\n")  # fmt: skip


@pytest.mark.parametrize("text", UNREADABLE)
def test_an_unreadable_log_is_refused_with_the_reason(text):
    with pytest.raises(NinjaLogError):
        parse_ninja_log(text)


def test_without_ninja_the_profile_names_the_generator_and_has_no_table(tmp_path):
    profile, table = llama_cpp._profile(tmp_path, None, 2, 301.26)
    assert profile == {"generator": "Unix Makefiles", "jobs": 2, "wall_s": 301.3} and table is None
    (tmp_path / ".ninja_log").write_text(LOG)
    profile, table = llama_cpp._profile(tmp_path, "/usr/bin/ninja", 2, 7.0)
    assert profile["generator"] == "Ninja" and table.count("\n") == 8


def test_an_unreadable_log_costs_the_profile_not_the_build(tmp_path):
    """The binaries are built by then: a log the parser refuses leaves the profile's basics."""
    profile, table = llama_cpp._profile(tmp_path, "/usr/bin/ninja", 3, 170.04)  # no .ninja_log at all
    assert profile["generator"] == "Ninja" and profile["wall_s"] == 170.0 and "unreadable_log" in profile
    (tmp_path / ".ninja_log").write_text("# ninja log v4\n")
    profile, table = llama_cpp._profile(tmp_path, "/usr/bin/ninja", 3, 170.0)
    assert "v4" in profile["unreadable_log"] and table is None


def test_the_generator_is_no_part_of_the_build_id(monkeypatch):
    """Ninja or make run the same compiler commands: the same identity, the same build id."""
    from tests.pipeline import filled_config

    spec = filled_config("smoke")["engines"]["llama_cpp"]
    with_ninja = llama_cpp.build_identity(spec)
    monkeypatch.setattr(llama_cpp, "ninja_program", lambda: None)
    assert llama_cpp.build_identity(spec) == with_ninja
    assert not any("Ninja" in flag or "MAKE_PROGRAM" in flag for flag in with_ninja["cmake_flags"])


def test_the_pinned_ninja_is_found():
    """whichshot depends on the `ninja` package: a fresh install builds with Ninja, profiled."""
    program = build_profile.ninja_program()
    assert program is not None and Path(program).is_file()


@pytest.mark.e2e
def test_the_real_build_records_its_profile():
    """The build the e2e tests use (built once by conftest, or cached) carries its profile."""
    from tests.fault_kit import real_engine

    build = real_engine().build
    home = Path(build["binaries"]["llama-server"]["path"]).parent.parent
    assert json.loads((home / "build.json").read_text()) == build
    profile = build["profile"]
    assert profile["generator"] == "Ninja" and profile["wall_s"] > 0
    assert {"ggml-base", "ggml-cpu", "llama", "llama-common", "server-context"} <= set(profile["targets"])
    assert len(profile["slowest_objects"]) == build_profile.SLOWEST_OBJECTS
    rows = (home / llama_cpp.PROFILE_TABLE).read_text().splitlines()
    assert rows[0].split("\t") == list(build_profile.TSV_HEADER)
    assert len(rows) - 1 >= profile["steps"]
    assert {row.split("\t")[0] for row in rows[1:]} >= {"bin/llama-server", "bin/llama-bench"}


@pytest.mark.e2e
def test_the_unity_hook_batches_the_host_libraries_and_leaves_ggml_alone(tmp_path):
    """Configure only (seconds, nothing compiled): the build graph of the pinned source has unity
    batches for the server's host-side libraries, the files that break a batch compiled alone, and
    ggml's kernels in their own translation units."""
    from tests.pipeline import filled_config
    from whichshot import pypi
    from whichshot.cache import cache_root

    spec = filled_config("smoke")["engines"]["llama_cpp"]
    sdist = pypi.download(spec["source"]["package"], spec["source"]["version"], cache_root() / "sources",
                          sdist=True)  # fmt: skip
    src = llama_cpp._extract_vendored(sdist, tmp_path)
    build_dir = tmp_path / "build"
    llama_cpp._run(llama_cpp.configure_argv(src, build_dir, spec, build_profile.ninja_program()))
    graph = (build_dir / "build.ninja").read_text()
    for target in llama_cpp.UNITY_TARGETS:
        assert f"CMakeFiles/{target}.dir/Unity/unity_0_cxx.cxx.o" in graph
    alone = (
        "common/CMakeFiles/llama-common.dir/json.cpp.o",
        "tools/mtmd/CMakeFiles/mtmd.dir/mtmd-helper.cpp.o",
        "tools/mtmd/CMakeFiles/mtmd.dir/mtmd-helper-gen.cpp.o",
    )
    assert all(f"build {output}:" in graph for output in alone)
    assert "common/CMakeFiles/llama-common.dir/arg.cpp.o" not in graph  # in a batch now
    for kernels in ("ggml-base", "ggml-cpu"):
        assert f"CMakeFiles/{kernels}.dir/Unity" not in graph
        assert f"CMakeFiles/{kernels}.dir/" in graph
