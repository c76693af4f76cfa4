"""A tiny causal LM written like pre-Cache remote code, with learned absolute positions.

Like such repositories it takes ``past_key_values`` as a tuple of per-layer ``(key, value)``
tensors and returns the grown tuple, supports no SDPA, ships no chat template, and its
``forward`` swallows keywords it does not know (so a ``cache=`` argument vanishes silently).

``TinyLegacyForCausalLM.forward`` takes no ``position_ids``: positions count from the cache
length, so left padding shifts a row's learned position embeddings and changes its outputs (a
batch of such a model is not exact).  ``TinyLegacyWithPositionsForCausalLM`` takes them.
"""

import math

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.modeling_outputs import CausalLMOutputWithPast

from .configuration_tinylegacy import TinyLegacyConfig


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.heads = config.num_attention_heads
        self.ln1 = nn.LayerNorm(config.hidden_size)
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.proj = nn.Linear(config.hidden_size, config.hidden_size)
        self.ln2 = nn.LayerNorm(config.hidden_size)
        self.mlp = nn.Sequential(nn.Linear(config.hidden_size, config.intermediate_size), nn.GELU(),
                                 nn.Linear(config.intermediate_size, config.hidden_size))

    def forward(self, x, mask, past):
        rows, length, width = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(width, dim=-1)
        shape = (rows, length, self.heads, width // self.heads)
        q, k, v = (t.view(shape).transpose(1, 2) for t in (q, k, v))
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        scores = scores.masked_fill(~mask[:, None], torch.finfo(scores.dtype).min)
        out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(rows, length, width)
        x = x + self.proj(out)
        return x + self.mlp(self.ln2(x)), (k, v)


class TinyLegacyForCausalLM(PreTrainedModel):
    config_class = TinyLegacyConfig
    base_model_prefix = "tinylegacy"
    _supports_sdpa = False
    _no_split_modules = ["Block"]

    def __init__(self, config):
        super().__init__(config)
        self.wte = nn.Embedding(config.vocab_size, config.hidden_size)
        self.wpe = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.num_hidden_layers))
        self.ln_f = nn.LayerNorm(config.hidden_size)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(0.0, 0.5)
            if isinstance(module, nn.Linear) and module.bias is not None:
                module.bias.data.zero_()

    def get_input_embeddings(self):
        return self.wte

    def get_output_embeddings(self):
        return self.lm_head

    def forward(self, input_ids=None, attention_mask=None, past_key_values=None, use_cache=None, **kwargs):
        return self._run(input_ids, attention_mask, past_key_values, None, use_cache)

    def _run(self, input_ids, attention_mask, past_key_values, position_ids, use_cache):
        rows, length = input_ids.shape
        past_length = 0 if past_key_values is None else past_key_values[0][0].shape[2]
        total = past_length + length
        if attention_mask is None:
            attention_mask = torch.ones((rows, total), dtype=torch.long, device=input_ids.device)
        if position_ids is None:
            position_ids = torch.arange(past_length, total, device=input_ids.device)[None].expand(rows, -1)
        keys = attention_mask.bool()[:, None, :]  # (rows, 1, total)
        causal = torch.ones((length, total), dtype=torch.bool, device=input_ids.device).tril(past_length)
        mask = keys & causal[None]
        x = self.wte(input_ids) + self.wpe(position_ids)
        presents = []
        for index, block in enumerate(self.blocks):
            x, present = block(x, mask, None if past_key_values is None else past_key_values[index])
            presents.append(present)
        logits = self.lm_head(self.ln_f(x))
        return CausalLMOutputWithPast(logits=logits, past_key_values=tuple(presents) if use_cache else None)


class TinyLegacyWithPositionsForCausalLM(TinyLegacyForCausalLM):
    def forward(self, input_ids=None, attention_mask=None, past_key_values=None, position_ids=None,
                use_cache=None, **kwargs):
        return self._run(input_ids, attention_mask, past_key_values, position_ids, use_cache)
