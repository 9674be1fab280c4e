"""llama-bench output that is not what whichshot reads (not JSON, a row without a key it reads, more
or fewer rows than the command asks for) is recorded as not measured with one line, never raised:
in a series' brackets, in the verification-cost probe and in the engine-kernel probe. The program
run here prints a fixed text where llama-bench would (the output's shape, not its numbers, is what
is checked); a row as llama-bench -o json writes it is the good case."""

import json
import sys
from pathlib import Path

import pytest

from whichshot.cache import cache_root
from whichshot.measure.bench import BenchPlan, run_bench, run_bracket
from whichshot.measure.kernel_probe import probe_engine_kernel
from whichshot.measure.verify_cost import VerifyPlan, run_verify_probe

ROW = {"build_commit": "abc1234", "n_threads": 2, "n_batch": 2048, "n_ubatch": 512, "n_gpu_layers": 0,
       "flash_attn": -1, "type_k": "f16", "n_prompt": 64, "n_gen": 0, "n_depth": 0,
       "avg_ts": 812.5, "stddev_ts": 3.1, "samples_ts": [810.0, 815.0]}  # fmt: skip
BAD_OUTPUTS = {
    "not json": ("llama-bench: warning: something\n[", "not JSON"),
    "no avg_ts": (json.dumps([{k: v for k, v in ROW.items() if k != "avg_ts"}]), "row 1 has no 'avg_ts'"),
    "text avg_ts": (json.dumps([{**ROW, "avg_ts": "fast"}]), "row 1: 'avg_ts' is 'fast', not a number"),
    "two rows": (json.dumps([ROW, ROW]), "llama-bench gave 2 result row(s) where this command asks for 1"),
    "no rows": ("[]", "llama-bench gave 0 result row(s) where this command asks for 1"),
    "an object": (json.dumps(ROW), "not a list of result objects"),
}


def printing(tmp_path: Path, text: str) -> list[str]:
    """A program that prints `text` on stdout and exits 0, as llama-bench would print its rows."""
    out = tmp_path / "out.txt"
    out.write_text(text)
    script = tmp_path / "llama-bench"
    script.write_text(f"#!{sys.executable}\nimport sys\nsys.stdout.write(open({str(out)!r}).read())\n")
    script.chmod(0o755)
    return [str(script)]


def test_rows_as_llama_bench_writes_them_are_read(tmp_path):
    rows, error = run_bench(printing(tmp_path, json.dumps([ROW])), expected_rows=1)
    assert error is None
    assert rows[0]["test"] == "pp" and rows[0]["avg_tok_s"] == 812.5 and rows[0]["repetitions"] == 2


@pytest.mark.parametrize("case", BAD_OUTPUTS)
def test_unexpected_output_is_an_error_line_not_an_exception(tmp_path, case):
    text, expected = BAD_OUTPUTS[case]
    rows, error = run_bench(printing(tmp_path, text), expected_rows=1)
    assert rows == [] and expected in error and "\n" not in error


@pytest.mark.parametrize("case", ["not json", "no avg_ts", "two rows"])
def test_a_bracket_records_it(tmp_path, case):
    plan = BenchPlan(argv=tuple(printing(tmp_path, BAD_OUTPUTS[case][0])), prompt_tokens=64,
                     output_tokens=8, repetitions=2)  # fmt: skip
    bracket = run_bracket(plan, "before")
    assert bracket["rows"] == [] and BAD_OUTPUTS[case][1] in bracket["error"]


def test_the_verify_probe_records_a_row_count_that_is_not_one_per_width(tmp_path):
    plan = VerifyPlan(argv=tuple(printing(tmp_path, json.dumps([ROW]))), widths=(1, 9), depth_tokens=100,
                      repetitions=2)  # fmt: skip
    probe = run_verify_probe(plan, None)
    assert probe["rows"] == []
    assert probe["error"] == "llama-bench gave 1 result row(s) where this command asks for 2"
    plan = VerifyPlan(argv=tuple(printing(tmp_path, "oops")), widths=(1, 9), depth_tokens=100, repetitions=2)
    assert "not JSON" in run_verify_probe(plan, None)["error"]


@pytest.mark.parametrize("case", ["not json", "no avg_ts", "two rows", "no rows"])
def test_the_kernel_probe_records_it_as_not_measured(tmp_path, case):
    build = {
        "build_id": "b",
        "binaries": {"llama-bench": {"path": printing(tmp_path, BAD_OUTPUTS[case][0])[0]}},
    }
    probe = probe_engine_kernel("llama_cpp", {"kind": "llama_cpp", "threads": 1}, build, "Q4_0", cache_root())
    assert BAD_OUTPUTS[case][1] in probe["not_measured"]
    assert "samples_s" not in probe
