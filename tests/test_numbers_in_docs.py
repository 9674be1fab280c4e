"""Every number README.md, docs/*.md and the reference runs' NOTES.md state is one a committed output
holds (tools/check_numbers.py), and the check itself catches a wrong one."""

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
_SPEC = importlib.util.spec_from_file_location("check_numbers", REPO / "tools" / "check_numbers.py")
check_numbers = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(check_numbers)


@pytest.mark.parametrize("markdown", check_numbers.default_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_stated_number_is_printed_by_a_committed_output(markdown):
    assert check_numbers.unsupported(markdown) == []


def test_the_readme_every_doc_and_every_note_are_checked():
    files = set(check_numbers.default_files())
    docs = set((REPO / "docs").glob("*.md"))
    assert docs and REPO / "README.md" in files and docs <= files
    assert set((REPO / "results" / "reference").rglob("NOTES.md")) <= files


def test_a_doc_paragraph_naming_a_reference_run_is_checked_against_that_run():
    paragraph = "On the 2-core VM (`results/reference/cpu_default/`) it took 951.4 s."
    sources = check_numbers.sources_for(REPO / "docs" / "any.md", paragraph)
    assert sources and all(check_numbers.REFERENCE / "cpu_default" in p.parents for p in sources)
    assert check_numbers.sources_for(REPO / "docs" / "any.md", "Every 0.25 s.") == check_numbers.sources_for(
        REPO / "README.md", "Every 0.25 s."
    )


def test_prose_numbers_are_claims_and_code_dates_versions_and_names_are_not():
    text = (
        "Warm 2.93x on the H200 (sm_90, Q4_1, 8B) with `--threads 8`, run 2026-12-02 23:34 with "
        "torch 2.13.0 and Python 3.11; 1,895 tok/s.\n```sh\nsnakemake --cores 16\n```\n"
    )
    assert [written for _line, written, _p in check_numbers.claims(text)] == ["2.93", "1,895"]


def test_a_number_the_data_does_not_hold_is_caught(tmp_path):
    import pandas as pd

    run = tmp_path / "run"
    run.mkdir()
    pd.DataFrame({"value": [2.9312, 1895.4]}).to_parquet(run / "figures.parquet")
    printed = check_numbers.printed_by(check_numbers.run_outputs(run))
    assert check_numbers.supported("2.93", printed) and check_numbers.supported("1,895", printed)
    assert not check_numbers.supported("2.80", printed)
    assert check_numbers.supported("293", printed)  # 2.93 as a percentage
