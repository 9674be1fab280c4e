"""What is read out of a pinned model file (its GGUF metadata, its per-token costs) is parsed once per
file and code version, then read back from the cache."""

from whichshot.cache import derived_from_file


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
