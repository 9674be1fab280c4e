"""The document workloads built from the user's text by the real engine's tokenizer (issue 43): a
Chinese article with one paragraph per line makes a needle and a recall document (the draft is sized
by this model's own characters per token, not an English guess), and a text too short in the model's
tokens is refused with one line naming its file, its length and the minimum."""

from pathlib import Path

import pytest

from tests.fault_kit import real_engine, server_settings
from whichshot.errors import WhichshotError
from whichshot.prepare.user_texts import pin_of
from whichshot.prepare.workload_prompts import build_workload_prompts
from whichshot.prepare.workloads import make_passphrase

pytestmark = pytest.mark.e2e

CHINESE = Path(__file__).parent / "fixtures" / "user_texts" / "chinese_one_paragraph_per_line.txt"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    real = real_engine()
    log = tmp_path_factory.mktemp("tokenizer") / "server.log"
    running = real.engine.start(real.build, real.model_path, server_settings(), log)
    yield running
    running.stop()


def workloads(path: Path, names: list[str], document_tokens: int) -> dict:
    return {"names": names, "text_kinds": ["real"], "texts": {"path": str(path), "sha256": pin_of(path)},
            "document_tokens": document_tokens, "seed": 0}  # fmt: skip


@pytest.mark.parametrize("separator", ["\n", "\n\n"], ids=["a paragraph per line", "blank-line paragraphs"])
def test_chinese_text_makes_a_needle_and_a_recall_document(server, tmp_path, separator):
    text = CHINESE.read_text(encoding="utf-8")
    assert "\n\n" not in text and len(server.tokenize(text)) > 2 * 512  # room for the needle's draft
    article = tmp_path / "article.txt"
    article.write_text(separator.join(text.splitlines()) + "\n", encoding="utf-8")
    built = build_workload_prompts(server, workloads(article, ["needle", "verbatim_recall"], 512), True, None)
    needle = built["needle-real"]
    assert needle["text"].count(make_passphrase(0)) == 1
    assert needle["prompt_tokens"] > 512 and needle["source"]["corpus"] == "user_files"
    recall = built["verbatim_recall-real"]["checks"]["reference_text"]
    assert 256 <= len(server.tokenize(recall)) <= 512
    assert all(line in text.splitlines() for line in recall.split("\n\n"))  # whole lines of the article


@pytest.mark.parametrize(("workload", "least"), [("needle", 512), ("verbatim_recall", 256)])
def test_a_text_too_short_in_the_models_tokens_is_refused_with_its_length_and_the_minimum(
    server, tmp_path, workload, least
):
    short = tmp_path / "short.txt"
    short.write_text("\n".join(CHINESE.read_text(encoding="utf-8").splitlines()[:3]) + "\n", encoding="utf-8")
    with pytest.raises(WhichshotError) as refused:
        build_workload_prompts(server, workloads(short, [workload], 512), True, None)
    said = str(refused.value)
    assert said.startswith(f"{workload}: workloads.texts: {short}: ") and "\n" not in said
    tokens = int(said.split(" tokens in this model's tokenizer")[0].split()[-1])
    assert (
        0 < tokens < least
        and f"fewer than {'document_tokens=512' if workload == 'needle' else least}" in said
    )
