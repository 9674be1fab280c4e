import json

from whichshot.atomic import JsonlJournal, promote_together


def test_journal_appears_complete_only_after_promote(tmp_path):
    journal = JsonlJournal(tmp_path / "job.jsonl")
    journal.append({"series_position": 1})
    assert not journal.final_path.exists()
    promote_together([journal])
    lines = journal.final_path.read_text().splitlines()
    assert [json.loads(line) for line in lines] == [{"series_position": 1}]
    assert not journal.partial_path.exists()


def test_journal_drops_a_torn_last_line(tmp_path):
    journal = JsonlJournal(tmp_path / "job.jsonl")
    journal.append({"series_position": 1})
    with open(journal.partial_path, "a") as handle:
        handle.write('{"series_position": 2, "tru')  # killed mid-write
    records = journal.read_existing()
    assert records == [{"series_position": 1}]
    journal.rewrite(records)
    journal.append({"series_position": 2})
    assert [r["series_position"] for r in journal.read_existing()] == [1, 2]
