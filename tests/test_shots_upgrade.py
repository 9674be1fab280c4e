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


VERSION_9_RUN = REFERENCE / "h100" / "offline_bundle" / "shots.parquet"  # CUDA, every layer offloaded


def test_a_version_9_table_reads_with_what_it_did_not_record_as_not_recorded():
    """Version 10 records the GPU layers, the draft model's pin and the plan's sha256; a version 9 row
    of a run that offloaded every layer must not read as 0 layers (the schema's default)."""
    assert set(pd.read_parquet(VERSION_9_RUN)["schema_version"]) == {9}
    shots = read_shots(VERSION_9_RUN)
    assert len(shots) > 0
    for column in ("gpu_layers", "draft_model_sha256", "plan_sha256"):
        assert shots[column].isna().all(), column
