"""Shots tables of older schema versions read as the current one (whichshot.shots.upgrade). Version 1
had no warm-up axis: each engine kind of then did its own default warm-up, which a frozen table says
in the engines' own words (the engines registry of today is not asked)."""

import pandas as pd

from tests.reference_energy import REFERENCE
from whichshot.engine.base import NO_WARMUP, ONE_DECODE, UNKNOWN_WARMUP
from whichshot.shots.axes import DEFAULT_WARMUP
from whichshot.shots.upgrade import VERSION_1_WARMUPS, read_shots, upgrade_shots

VERSION_1_RUN = REFERENCE / "h200" / "cross_engine" / "shots.parquet"  # llama.cpp and transformers


def test_the_kinds_of_version_1_did_their_own_default_warmup():
    assert VERSION_1_WARMUPS == {"llama_cpp": ONE_DECODE, "transformers": NO_WARMUP, "openai": UNKNOWN_WARMUP}


def test_a_version_1_table_reads_with_each_kinds_default_warmup():
    assert set(pd.read_parquet(VERSION_1_RUN)["schema_version"].fillna(1)) == {1}
    shots = read_shots(VERSION_1_RUN)
    assert (shots["engine_warmup"] == DEFAULT_WARMUP).all()
    ran = shots.groupby("engine_kind")["engine_warmup_run"].unique()
    assert {kind: list(values) for kind, values in ran.items()} == {
        "llama_cpp": [ONE_DECODE],
        "transformers": [NO_WARMUP],
    }


def test_a_kind_unknown_at_version_1_has_no_warmup_said():
    recorded = pd.read_parquet(VERSION_1_RUN).head(2).assign(engine_kind="echo")
    assert upgrade_shots(recorded)["engine_warmup_run"].isna().all()


def test_a_version_9_table_reads_with_what_its_speeds_divided_by():
    from tests.shot_tables import cell, series, table

    timed = {"output_tokens": 8, "decode_span_s": 0.1}
    old = table(series(cell(), [timed, timed])).assign(schema_version=9, engine_attached=[False, True])
    shots = upgrade_shots(old)
    assert shots["decode_tokens"].tolist() == [7, 7]  # output_tokens - 1, version 9's rule
    assert shots["prefill_tokens"].tolist() == shots["prompt_tokens"].tolist() == [64, 64]
    assert shots["engine_on_this_machine"].tolist() == [True, None]  # an attached server's: not recorded


# Version 9, CUDA, every layer offloaded.
OFFLOADED_RUN = REFERENCE / "h100" / "offline_bundle" / "shots.parquet"


def test_an_older_table_reads_with_what_it_did_not_record_as_not_recorded():
    """Version 11 records the GPU layers, the draft model's pin and the server settings' sha256; an
    older row of a run that offloaded every layer must not read as 0 layers (nor as no draft)."""
    assert set(pd.read_parquet(OFFLOADED_RUN)["schema_version"]) == {9}
    shots = read_shots(OFFLOADED_RUN)
    assert len(shots) > 0
    for column in ("gpu_layers", "draft_model_sha256", "settings_sha256"):
        assert shots[column].isna().all(), column
