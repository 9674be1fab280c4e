"""What is read out of a pinned model file (its GGUF metadata, its per-token costs) is parsed once per
file and code version, then read back from the cache."""

from whichshot import hashing
from whichshot.cache import derived_from_file
from whichshot.hashing import package_code_id


def test_a_files_derived_record_is_parsed_once_per_file_then_read_back(tmp_path):
    parsed = []

    def parse() -> dict:
        parsed.append(1)
        return {"parses": len(parsed)}

    first = derived_from_file(tmp_path, "gguf_metadata", "ab" * 32, parse)
    again = derived_from_file(tmp_path, "gguf_metadata", "ab" * 32, parse)
    other_file = derived_from_file(tmp_path, "gguf_metadata", "cd" * 32, parse)
    other_kind = derived_from_file(tmp_path, "model_traffic", "ab" * 32, parse)
    assert first == again == {"parses": 1}
    assert other_file == {"parses": 2} and other_kind == {"parses": 3} and len(parsed) == 3


def test_the_code_id_covers_every_package_it_names_and_a_change_in_shots_parses_again(monkeypatch, tmp_path):
    both = package_code_id("prepare", "shots")
    prepare_only = package_code_id("prepare")
    assert both == package_code_id("shots", "prepare") and both != prepare_only
    parsed = []

    def parse() -> dict:
        parsed.append(1)
        return {"parses": len(parsed)}

    derived_from_file(tmp_path, "gguf_metadata", "ab" * 32, parse)
    real = hashing.sha256_file
    monkeypatch.setattr(hashing, "sha256_file", lambda f: "edited" if f.parent.name == "shots" else real(f))
    assert package_code_id("prepare", "shots") != both and package_code_id("prepare") == prepare_only
    assert derived_from_file(tmp_path, "gguf_metadata", "ab" * 32, parse) == {"parses": 2}
