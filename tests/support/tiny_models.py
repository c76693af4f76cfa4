"""Tiny random-weight models of the paper's architectures, and a word-level chat tokenizer.

Nothing is downloaded: each model is built from a config with random weights, the tokenizer
from a word list, so equivalence tests of the decode loop run on any transformers version the
project supports, in seconds, on a CPU.  Two remote-code models are loaded from disk with
``trust_remote_code``: ``BAICHUAN2_MODEL_CODE`` is written the way Baichuan2-7B-Chat's repository
is (rotary tables built in ``__init__``, no ``position_ids``), ``LEGACY_MODEL_CODE`` the way
pre-Cache repositories with learned absolute positions are.
"""

from __future__ import annotations

import functools
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

LEGACY_MODEL_CODE = Path(__file__).parent / "legacy_remote_model"
BAICHUAN2_MODEL_CODE = Path(__file__).parent / "baichuan2_remote_model"
SPECIAL_TOKENS = ["<pad>", "<unk>", "<|im_start|>", "<|im_end|>", "system", "user", "assistant"]
WORDS = [f"w{i}" for i in range(120)]
VOCAB_SIZE = len(SPECIAL_TOKENS) + len(WORDS)
CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|> {{ m['role'] }} {{ m['content'] }} <|im_end|> {% endfor %}"
    "{% if add_generation_prompt %}<|im_start|> assistant {% endif %}"
)

#: Shapes every tiny model shares: two layers, grouped-query attention, head_dim 16.
SMALL = {"vocab_size": VOCAB_SIZE, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512,
         "pad_token_id": 0, "bos_token_id": None, "eos_token_id": 3}


def chat_tokenizer(*, with_template: bool = True, vocab_size: int | None = None) -> Any:
    """A whitespace word-level tokenizer over :data:`WORDS` with a ChatML-like template.

    ``vocab_size`` extends the word list so every id a model of that vocabulary can emit
    decodes (benchmarks with 7B-shaped random models).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = WORDS if vocab_size is None else [f"w{i}" for i in range(vocab_size - len(SPECIAL_TOKENS))]
    vocab = {token: index for index, token in enumerate(SPECIAL_TOKENS + words)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins words with spaces
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", pad_token="<pad>",
                                        eos_token="<|im_end|>", additional_special_tokens=["<|im_start|>"])
    if with_template:
        tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer


#: Printable ASCII, one token per character, after the special tokens (:func:`char_tokenizer`).
CHARS = [chr(code) for code in range(32, 127)]
CHAR_VOCAB_SIZE = len(SPECIAL_TOKENS) + len(CHARS)


def char_tokenizer() -> Any:
    """A character-level tokenizer with the ChatML-like template: any English or JSON text
    encodes without ``<unk>`` (the rubric's answers, Bloom levels, unit names), one token a
    character, so options of different lengths take different numbers of tokens."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: index for index, token in enumerate(SPECIAL_TOKENS + CHARS)}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", pad_token="<pad>",
                                        eos_token="<|im_end|>", additional_special_tokens=["<|im_start|>"])
    tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer


def _config(name: str, **extra: Any) -> Callable[[], Any]:
    def build() -> Any:
        import transformers

        return getattr(transformers, name)(**{**SMALL, "head_dim": 16, **extra})
    return build


#: The model types ``configs/paper.yaml`` runs natively, as tiny configs. ``qwen2-sliding`` is
#: Qwen2 with its sliding-window layers on (above layer 1, a window of 6 tokens).
ARCHITECTURES: dict[str, Callable[[], Any]] = {
    "llama": _config("LlamaConfig"),
    "qwen2": _config("Qwen2Config"),
    "qwen2-sliding": _config("Qwen2Config", use_sliding_window=True, sliding_window=6, max_window_layers=1),
    "glm": _config("GlmConfig", partial_rotary_factor=0.5),
    "glm4": _config("Glm4Config", partial_rotary_factor=0.5),
    "internlm3": _config("InternLM3Config"),
}


def available_architectures() -> list[str]:
    """Architectures the installed transformers implements (InternLM3 is native from 5.23)."""
    import transformers

    names = {"llama": "LlamaConfig", "qwen2": "Qwen2Config", "qwen2-sliding": "Qwen2Config",
             "glm": "GlmConfig", "glm4": "Glm4Config", "internlm3": "InternLM3Config"}
    return [arch for arch in ARCHITECTURES if hasattr(transformers, names[arch])]


def tiny_model(architecture: str, *, seed: int = 0, dtype: Any = None, vocab_size: int | None = None) -> Any:
    """A random-weight causal LM of ``architecture`` in eval mode (fp32 unless ``dtype``);
    ``vocab_size`` replaces the word tokenizer's (:data:`CHAR_VOCAB_SIZE` for :func:`char_tokenizer`)."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    config = ARCHITECTURES[architecture]()
    if vocab_size is not None:
        config.vocab_size = vocab_size
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", dtype=dtype or torch.float32)
    # random weights are near uniform; a wider init gives decisive argmaxes (no float ties)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() > 1:
                parameter.normal_(0.0, 0.3)
    return model.eval()


def save_standin(architecture: str, folder: Path, *, seed: int = 0) -> Path:
    """A loadable model folder (config, random weights, tokenizer with template) of ``architecture``."""
    model = tiny_model(architecture, seed=seed)
    model.save_pretrained(folder)
    chat_tokenizer().save_pretrained(folder)
    return folder


def save_legacy_remote_model(folder: Path, *, seed: int = 0, takes_position_ids: bool = False) -> Path:
    """A remote-code model folder: its own code files, tuple caches, no SDPA, no chat template.

    Learned absolute positions; ``takes_position_ids`` picks the class whose ``forward`` takes
    them (else they count from the cache length, and left padding changes the outputs).
    """
    model_class = "TinyLegacyWithPositionsForCausalLM" if takes_position_ids else "TinyLegacyForCausalLM"
    return save_remote_code_model(
        folder, LEGACY_MODEL_CODE, config=("configuration_tinylegacy", "TinyLegacyConfig"),
        model=("modeling_tinylegacy", model_class), config_kwargs={"vocab_size": VOCAB_SIZE},
        seed=seed)


def save_baichuan2_remote_model(folder: Path, *, seed: int = 0, rotary_tables: str = "attributes",
                                **config_kwargs: Any) -> Path:
    """A remote-code model folder written like Baichuan2-7B-Chat (see its modeling file's docstring)."""
    return save_remote_code_model(
        folder, BAICHUAN2_MODEL_CODE, config=("configuration_baichuan", "BaichuanConfig"),
        model=("modeling_baichuan", "BaichuanForCausalLM"),
        config_kwargs={"vocab_size": VOCAB_SIZE, "hidden_size": 64, "intermediate_size": 128,
                       "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 512,
                       "rotary_tables": rotary_tables, **config_kwargs},
        seed=seed, init_std=0.3)


def _import_remote_code(folder: Path, module: str) -> Any:
    """Import ``module`` from ``folder`` as a package, the way transformers imports remote code."""
    import importlib.util
    import sys

    package = f"remote_build_{abs(hash(str(folder.resolve())))}"
    if package not in sys.modules:
        marker = folder / "__init__.py"
        marker.write_text("")
        spec = importlib.util.spec_from_file_location(package, marker, submodule_search_locations=[str(folder)])
        sys.modules[package] = importlib.util.module_from_spec(spec)
        try:
            return importlib.import_module(f"{package}.{module}")
        finally:
            marker.unlink()
    return importlib.import_module(f"{package}.{module}")


def save_remote_code_model(folder: Path, code: Path, *, config: tuple[str, str], model: tuple[str, str],
                           config_kwargs: dict[str, Any], seed: int = 0, init_std: float | None = None) -> Path:
    """A remote-code model folder: the code files of ``code``, random weights, a tokenizer without
    a chat template.  ``config`` and ``model`` are (module, class) of the copied files."""
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    for source in code.glob("*.py"):
        shutil.copy(source, folder / source.name)
    config_class = getattr(_import_remote_code(folder, config[0]), config[1])
    model_class = getattr(_import_remote_code(folder, model[0]), model[1])
    built = config_class(pad_token_id=0, eos_token_id=3, **config_kwargs)
    auto_map = {"AutoConfig": f"{config[0]}.{config[1]}", "AutoModelForCausalLM": f"{model[0]}.{model[1]}"}
    built.auto_map = auto_map
    torch.manual_seed(seed)
    instance = model_class(built).eval()
    if init_std is not None:  # a wide init gives decisive argmaxes (no float ties)
        with torch.no_grad():
            for parameter in instance.parameters():
                if parameter.dim() > 1:
                    parameter.normal_(0.0, init_std)
    instance.save_pretrained(folder)
    chat_tokenizer(with_template=False).save_pretrained(folder)
    config_path = folder / "config.json"
    saved = json.loads(config_path.read_text())
    saved["auto_map"] = auto_map
    config_path.write_text(json.dumps(saved, indent=2))
    return folder


@functools.lru_cache(maxsize=1)
def baichuan2_classes() -> tuple[Any, Any]:
    """(BaichuanConfig, BaichuanForCausalLM) of the Baichuan2-shaped stand-in, imported from a
    copy of its code (as transformers would import it), for models built in memory."""
    folder = Path(tempfile.mkdtemp(prefix="baichuan2-code-"))
    for source in BAICHUAN2_MODEL_CODE.glob("*.py"):
        shutil.copy(source, folder / source.name)
    return (_import_remote_code(folder, "configuration_baichuan").BaichuanConfig,
            _import_remote_code(folder, "modeling_baichuan").BaichuanForCausalLM)


def baichuan2_model(shapes: dict[str, int], *, device: Any, dtype: Any, seed: int = 0) -> Any:
    """A Baichuan2-shaped stand-in of ``shapes`` with random weights, built in place on ``device``
    (its config names the remote class, so it runs the legacy loop like the real one)."""
    import torch

    config_class, model_class = baichuan2_classes()
    config = config_class(pad_token_id=0, eos_token_id=3, **shapes)
    config.auto_map = {"AutoConfig": "configuration_baichuan.BaichuanConfig",
                       "AutoModelForCausalLM": "modeling_baichuan.BaichuanForCausalLM"}
    previous = torch.get_default_dtype()
    torch.manual_seed(seed)
    torch.set_default_dtype(dtype)  # parameters in dtype; its rotary tables stay float32 as written
    try:
        with torch.device(device):
            model = model_class(config)
    finally:
        torch.set_default_dtype(previous)
    return model.eval()


def load_remote_code_reference(folder: Path) -> Any:
    """The saved remote-code model built the plain way: constructed on the CPU (its ``__init__``
    tables computed for real, not on the meta device), the saved weights loaded into it."""
    from safetensors.torch import load_file

    saved = json.loads((folder / "config.json").read_text())
    config_ref = saved["auto_map"]["AutoConfig"].rsplit(".", 1)
    model_ref = saved["auto_map"]["AutoModelForCausalLM"].rsplit(".", 1)
    config_class = getattr(_import_remote_code(folder, config_ref[0]), config_ref[1])
    model_class = getattr(_import_remote_code(folder, model_ref[0]), model_ref[1])
    model = model_class(config_class.from_pretrained(folder))
    model.load_state_dict(load_file(folder / "model.safetensors"))
    return model.eval()


def generate_reference(generator: Any, requests: Any, max_new_tokens: int) -> list[list[int]]:
    """Greedy continuations from ``model.generate`` over the left-padded batch of all requests.

    ``generator`` is an :class:`~bloomqg.generation.hf.generator.HFTextGenerator` (its tokenisation, stop
    and pad ids); each continuation is cut before its first stop token, as our loop cuts it.
    """
    import torch

    encoded = [generator.encode(r) for r in requests]
    width = max(len(e) for e in encoded)
    ids = torch.full((len(encoded), width), generator.pad_id)
    mask = torch.zeros((len(encoded), width), dtype=torch.long)
    for row, tokens in enumerate(encoded):
        ids[row, width - len(tokens):] = torch.tensor(tokens)
        mask[row, width - len(tokens):] = 1
    device = generator.input_device
    out = generator.model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), do_sample=False,
                                   max_new_tokens=max_new_tokens, eos_token_id=sorted(generator.stop_ids),
                                   pad_token_id=generator.pad_id)
    continuations = []
    for row in out[:, width:].tolist():
        kept = []
        for token in row:
            if token in generator.stop_ids:
                break
            kept.append(token)
        continuations.append(kept)
    return continuations
