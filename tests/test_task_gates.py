"""Task gates on real recorded outputs (tests/fixtures/recorded_outputs.json: the engine's own text
and token ids from reference runs, with their prompts' checks): a loop, an edit done, an edit made
with the rest of the file changed, an edit never made, an exact recall, a near-exact recall and a
near miss."""

import json
from pathlib import Path

import pytest

from whichshot.shots.quality_fields import quality_fields
from whichshot.shots.task_gates import RECALL_NEAR_EXACT

CASES = {
    case["case"]: case
    for case in json.loads((Path(__file__).parent / "fixtures" / "recorded_outputs.json").read_text())[
        "cases"
    ]
}


def checked(name: str) -> dict:
    case = CASES[name]
    prompt = {"workload": case["workload"], "checks": case["checks"]}
    return quality_fields(case["output_token_ids"], case["output_text"], [], prompt)


def test_a_recorded_loop_is_flagged_and_fails_explain():
    fields = checked("loop")
    assert fields["loop_detected"] is True and fields["loop_period_tokens"] == 50
    assert fields["self_repetition"] > 0.5  # the loop starts after an opening that does not repeat
    assert fields["task_done"] is False and "loop" in fields["task_gate"]


def test_an_edit_done_passes():
    fields = checked("edit_done")
    assert (fields["edit_made"], fields["edit_intact"], fields["task_done"]) == (True, True, True)
    assert fields["loop_detected"] is False


def test_an_edit_made_with_the_rest_of_the_file_changed_fails():
    fields = checked("edit_made_rest_changed")
    assert (fields["edit_made"], fields["edit_intact"], fields["task_done"]) == (True, False, False)


def test_an_edit_never_made_fails():
    fields = checked("edit_not_made")
    assert fields["edit_made"] is False and fields["task_done"] is False


def test_an_exact_recall_passes():
    fields = checked("recall_exact")
    assert (
        fields["recall_exact"] is True and fields["recall_similarity"] == 1.0 and fields["task_done"] is True
    )


def test_a_near_exact_recall_passes_by_its_stated_measure():
    fields = checked("recall_near_exact")
    assert fields["recall_exact"] is False
    assert RECALL_NEAR_EXACT <= fields["recall_similarity"] < 1.0
    assert fields["task_done"] is True


def test_a_recall_missing_its_last_paragraph_is_a_near_miss():
    fields = checked("recall_near_miss")
    assert fields["recall_exact"] is False
    assert 0.9 < fields["recall_similarity"] < RECALL_NEAR_EXACT
    assert fields["task_done"] is False


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_recorded_output_gets_every_repetition_column(name: str):
    fields = checked(name)
    assert 0.0 <= fields["self_repetition"] <= 1.0 and fields["loop_detected"] is not None
    assert fields["task_gate"]
