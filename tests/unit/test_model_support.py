"""What is settled before weights load, and the legacy loop for remote-code models.

The remote-code model is written in ``tests/support/legacy_remote_model`` the way pre-Cache
repositories are (tuple ``past_key_values``, no SDPA, no chat template, ``**kwargs`` swallowing
unknown keywords) and loaded from disk with ``trust_remote_code=True``; the Baichuan2-shaped one
and what loading it needs are in ``test_remote_code.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from bloomqg.generation.hf import model_support
from bloomqg.inputs.chat import ChatRequest, DecodingParams
from bloomqg.generation.hf.generator import HFTextGenerator
from bloomqg.generation.hf.model_support import ModelSupportError
from tests.support.tiny_models import LEGACY_MODEL_CODE, save_legacy_remote_model, save_standin

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = str(LEGACY_MODEL_CODE / "chat_template.jinja")


@pytest.fixture(scope="module")
def legacy_dir(tmp_path_factory) -> Path:
    return save_legacy_remote_model(tmp_path_factory.mktemp("remote") / "tinylegacy")


@pytest.fixture
def no_weight_loading(monkeypatch):
    """Fail the test if weights start loading: errors must come before that."""
    def refuse(*args, **kwargs):
        raise AssertionError("weights were loaded before the error")
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", refuse)


def reqs() -> list[ChatRequest]:
    return [ChatRequest(f"r{i}", ({"role": "user", "content": content},))
            for i, content in enumerate(["w1 w2 w3 w4", "w5", "w6 w7", "w8 w9 w10 w11 w12 w13"])]


def full_recompute_greedy(generator: HFTextGenerator, request: ChatRequest, steps: int) -> str:
    """Greedy decoding of one prompt with no cache at all: the whole sequence every step."""
    ids = generator.encode(request)
    kept = []
    with torch.inference_mode():
        for _ in range(steps):
            token = int(generator.model(input_ids=torch.tensor([ids + kept])).logits[0, -1].argmax())
            if token in generator.stop_ids:
                break
            kept.append(token)
    return generator.tokenizer.decode(kept, skip_special_tokens=True).strip()


def test_remote_code_model_runs_the_legacy_loop_and_matches_full_recompute(legacy_dir):
    generator = HFTextGenerator(legacy_dir, trust_remote_code=True, chat_template=TEMPLATE,
                                dtype="float32", batch_size=4)
    plan = generator.plan
    assert (plan.code, plan.decode_loop, plan.attn_implementation) == ("remote", "legacy", "eager")
    # absolute positions counted from the cache: left padding is not exact, rows run alone
    assert plan.cache_keyword == "past_key_values" and not plan.takes_position_ids
    assert generator.resolve_batch_size(reqs(), DecodingParams(max_new_tokens=10)) == 1
    assert generator.provenance["chat_template"] == TEMPLATE
    got = generator.complete(reqs(), DecodingParams(do_sample=False, max_new_tokens=10))
    assert [c.text for c in got] == [full_recompute_greedy(generator, r, 10) for r in reqs()]
    assert all(c.n_completion_tokens for c in got)


def test_remote_code_needs_trust_remote_code_and_says_so(legacy_dir, no_weight_loading):
    with pytest.raises(ModelSupportError, match="ships its own code: set trust_remote_code: true"):
        HFTextGenerator(legacy_dir, chat_template=TEMPLATE, dtype="float32")


def test_missing_chat_template_fails_before_weights(legacy_dir, no_weight_loading):
    with pytest.raises(ModelSupportError, match="no chat template; name one in the model entry"):
        HFTextGenerator(legacy_dir, trust_remote_code=True, dtype="float32")
    with pytest.raises(ModelSupportError, match="not found"):
        HFTextGenerator(legacy_dir, trust_remote_code=True, chat_template="prompts/chat_templates/nope.jinja")


def test_sdpa_asked_of_a_model_without_it_fails_before_weights(legacy_dir, no_weight_loading):
    with pytest.raises(ModelSupportError, match="does not support SDPA"):
        HFTextGenerator(legacy_dir, trust_remote_code=True, chat_template=TEMPLATE, attn_implementation="sdpa")


def test_native_standin_loads_from_disk_with_the_cached_loop(tmp_path):
    folder = save_standin("qwen2", tmp_path / "qwen2")
    generator = HFTextGenerator(folder, dtype="float32", batch_size=2)
    assert (generator.plan.code, generator.plan.decode_loop, generator.plan.attn_implementation) == (
        "native", "cached", "sdpa")
    assert generator.plan.cache_keyword in ("cache", "past_key_values")
    assert generator.complete(reqs()[:2], DecodingParams(do_sample=False, max_new_tokens=3))[0].text


def test_unknown_model_type_names_the_version(tmp_path, no_weight_loading):
    folder = save_standin("llama", tmp_path / "future")
    config = folder / "config.json"
    config.write_text(config.read_text().replace('"model_type": "llama"', '"model_type": "llama99"'))
    with pytest.raises(ModelSupportError, match=f"transformers {transformers.__version__} does not know model type 'llama99'"):
        HFTextGenerator(folder, dtype="float32")


def test_tokenizer_extras_are_named():
    error = ImportError("This tokenizer requires the SentencePiece library (sentencepiece) but it was not found")
    found = model_support.tokenizer_dependency_error("baichuan-inc/Baichuan2-7B-Chat", error)
    if model_support._installed("sentencepiece"):
        assert found is None  # installed: the error is something else and is re-raised as is
    else:
        assert found is not None and "pip install -e '.[tokenizers]'" in str(found)
    assert model_support.tokenizer_dependency_error("m", ValueError("unrelated")) is None


def test_shipped_baichuan2_template_renders_its_turn_markers():
    from jinja2 import Environment

    template = Environment().from_string((REPO / "prompts/chat_templates/baichuan2.jinja").read_text())
    text = template.render(messages=[{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}],
                           add_generation_prompt=True)
    assert text == "S<reserved_106>Q<reserved_107>"


def test_cache_keyword_follows_the_forward_signature():
    class NewStyle:
        def forward(self, input_ids=None, cache=None): ...

    class OldStyle:
        def forward(self, input_ids=None, past_key_values=None): ...

    class Neither:
        def forward(self, input_ids=None, **kwargs): ...

    assert model_support.cache_keyword(NewStyle) == "cache"
    assert model_support.cache_keyword(OldStyle) == "past_key_values"
    with pytest.raises(ModelSupportError, match="takes neither"):
        model_support.cache_keyword(Neither)
