"""A tiny causal LM written the way Baichuan2-7B-Chat's remote ``modeling_baichuan.py`` is.

What the real code does, and this one does the same way:

- ``RotaryEmbedding`` computes ``inv_freq``, ``cos_cached`` and ``sin_cached`` in ``__init__`` as
  plain tensor attributes (neither parameters nor buffers) and moves them to the input's device
  in ``forward``.  transformers 5 builds models on the meta device, so these tables stay there.
  ``config.rotary_tables = "buffers"`` registers them as non-persistent buffers instead, which
  transformers 5 re-creates uninitialised.
- ``BaichuanForCausalLM.forward`` takes no ``position_ids`` (its ``**kwargs`` swallow them);
  ``BaichuanModel`` numbers positions from the cache length, the same for every row.
- The attention mask is additive: a causal mask plus ``attention_mask`` expanded to
  ``finfo.min`` for masked keys, handed to ``scaled_dot_product_attention``.
- Caches are tuples of per-layer ``(key, value)``; the output head normalises its weight rows
  in place at the first forward pass in eval mode (``NormHead``).
"""

import math
from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers.activations import ACT2FN
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast

from .configuration_baichuan import BaichuanConfig


def _causal_mask(shape, dtype, device, past_length=0):
    """(rows, 1, query, past + query) additive mask: 0 where a query may look, finfo.min above."""
    rows, length = shape
    mask = torch.full((length, length), torch.finfo(dtype).min, device=device)
    steps = torch.arange(length, device=device)
    mask.masked_fill_(steps < (steps + 1).view(length, 1), 0)
    mask = mask.to(dtype)
    if past_length > 0:
        mask = torch.cat([torch.zeros(length, past_length, dtype=dtype, device=device), mask], dim=-1)
    return mask[None, None].expand(rows, 1, length, length + past_length)


def _expanded_mask(mask, dtype, query_length):
    """(rows, keys) 1/0 mask -> (rows, 1, query, keys) additive mask."""
    rows, keys = mask.size()
    expanded = mask[:, None, None, :].expand(rows, 1, query_length, keys).to(dtype)
    inverted = 1.0 - expanded
    return inverted.masked_fill(inverted.to(torch.bool), torch.finfo(dtype).min)


class RMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        if self.weight.dtype in (torch.float16, torch.bfloat16):
            hidden_states = hidden_states.to(self.weight.dtype)
        return self.weight * hidden_states


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, max_position_embeddings=2048, base=10000, as_buffers=False):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.max_seq_len_cached = max_position_embeddings
        steps = torch.arange(self.max_seq_len_cached, device=inv_freq.device, dtype=torch.float32)
        angles = torch.cat([torch.outer(steps, inv_freq)] * 2, dim=-1)
        tables = {"inv_freq": inv_freq, "cos_cached": angles.cos()[None, None].to(torch.float32),
                  "sin_cached": angles.sin()[None, None].to(torch.float32)}
        for name, table in tables.items():
            if as_buffers:
                self.register_buffer(name, table, persistent=False)
            else:
                setattr(self, name, table)  # a plain attribute: Baichuan2-7B's own code

    def forward(self, x, seq_len=None):
        if seq_len > self.max_seq_len_cached:
            self.max_seq_len_cached = seq_len
            steps = torch.arange(seq_len, device=self.inv_freq.device, dtype=torch.float32)
            angles = torch.cat([torch.outer(steps, self.inv_freq)] * 2, dim=-1)
            self.cos_cached = angles.cos()[None, None].to(torch.float32).to(x.device)
            self.sin_cached = angles.sin()[None, None].to(torch.float32).to(x.device)
        elif self.cos_cached.device != x.device:
            # plain attributes do not follow model.to(): the tables follow the input
            self.cos_cached = self.cos_cached.to(x.device)
            self.sin_cached = self.sin_cached.to(x.device)
        return self.cos_cached[:, :, :seq_len, ...], self.sin_cached[:, :, :seq_len, ...]


def rotate_half(x):
    first, second = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-second, first), dim=-1)


def apply_rotary_pos_emb(q, k, cos_table, sin_table, position_ids):
    cos = cos_table.squeeze(1).squeeze(0)[position_ids].unsqueeze(1)  # (rows, 1, length, dim)
    sin = sin_table.squeeze(1).squeeze(0)[position_ids].unsqueeze(1)
    q_rotated = (q.float() * cos) + (rotate_half(q.float()) * sin)
    k_rotated = (k.float() * cos) + (rotate_half(k.float()) * sin)
    return q_rotated.to(q.dtype), k_rotated.to(k.dtype)


class MLP(nn.Module):
    def __init__(self, hidden_size, intermediate_size, hidden_act):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.act_fn = ACT2FN[hidden_act]

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class Attention(nn.Module):
    def __init__(self, config: BaichuanConfig):
        super().__init__()
        self.hidden_size = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_dim = self.hidden_size // self.num_heads
        self.W_pack = nn.Linear(self.hidden_size, 3 * self.hidden_size, bias=False)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, self.hidden_size, bias=False)
        self.rotary_emb = RotaryEmbedding(self.head_dim, max_position_embeddings=config.max_position_embeddings,
                                          as_buffers=config.rotary_tables == "buffers")

    def forward(self, hidden_states, attention_mask=None, position_ids=None, past_key_value=None,
                output_attentions=False, use_cache=False):
        rows, length, _ = hidden_states.size()
        packed = self.W_pack(hidden_states).unflatten(-1, (3, self.hidden_size))
        packed = packed.unsqueeze(0).transpose(0, -2).squeeze(-2)
        query, key, value = (packed[i].view(rows, length, self.num_heads, self.head_dim).transpose(1, 2)
                             for i in range(3))
        kv_length = key.shape[-2] + (past_key_value[0].shape[-2] if past_key_value is not None else 0)
        cos, sin = self.rotary_emb(value, seq_len=kv_length)
        query, key = apply_rotary_pos_emb(query, key, cos, sin, position_ids)
        if past_key_value is not None:
            key = torch.cat([past_key_value[0], key], dim=2)
            value = torch.cat([past_key_value[1], value], dim=2)
        past_key_value = (key, value) if use_cache else None
        output = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask)
        output = self.o_proj(output.transpose(1, 2).reshape(rows, length, self.hidden_size))
        return output, None, past_key_value


class DecoderLayer(nn.Module):
    def __init__(self, config: BaichuanConfig):
        super().__init__()
        self.self_attn = Attention(config)
        self.mlp = MLP(config.hidden_size, config.intermediate_size, config.hidden_act)
        self.input_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(self, hidden_states, attention_mask=None, position_ids=None, past_key_value=None,
                output_attentions=False, use_cache=False):
        attended, _, present = self.self_attn(self.input_layernorm(hidden_states), attention_mask=attention_mask,
                                              position_ids=position_ids, past_key_value=past_key_value,
                                              use_cache=use_cache)
        hidden_states = hidden_states + attended
        hidden_states = hidden_states + self.mlp(self.post_attention_layernorm(hidden_states))
        return (hidden_states, present) if use_cache else (hidden_states,)


class BaichuanPreTrainedModel(PreTrainedModel):
    config_class = BaichuanConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = True
    _no_split_modules = ["DecoderLayer"]

    def _init_weights(self, module):
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            module.weight.data.normal_(mean=0.0, std=std)
            if module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.Embedding):
            module.weight.data.normal_(mean=0.0, std=std)
            if module.padding_idx is not None:
                module.weight.data[module.padding_idx].zero_()


class BaichuanModel(BaichuanPreTrainedModel):
    def __init__(self, config: BaichuanConfig):
        super().__init__(config)
        self.padding_idx = config.pad_token_id
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, self.padding_idx)
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_init()

    def get_input_embeddings(self):
        return self.embed_tokens

    def _prepare_decoder_attention_mask(self, attention_mask, input_shape, inputs_embeds, past_length):
        combined = None
        if input_shape[-1] > 1:
            combined = _causal_mask(input_shape, inputs_embeds.dtype, inputs_embeds.device, past_length)
        if attention_mask is not None:
            expanded = _expanded_mask(attention_mask, inputs_embeds.dtype, input_shape[-1]).to(inputs_embeds.device)
            combined = expanded if combined is None else expanded + combined
        return combined

    def forward(self, input_ids=None, attention_mask=None, position_ids=None,
                past_key_values: Optional[List[Tuple[torch.Tensor]]] = None, inputs_embeds=None,
                use_cache=None, output_attentions=None, output_hidden_states=None, return_dict=None):
        use_cache = use_cache if use_cache is not None else self.config.use_cache
        rows, length = input_ids.shape
        past_length = past_key_values[0][0].shape[2] if past_key_values is not None else 0
        if position_ids is None:
            # every row counts from the cache length: left padding shifts a row's positions
            position_ids = torch.arange(past_length, past_length + length, dtype=torch.long,
                                        device=input_ids.device).unsqueeze(0).view(-1, length)
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids)
        if attention_mask is None:
            attention_mask = torch.ones((rows, past_length + length), dtype=torch.bool, device=inputs_embeds.device)
        attention_mask = self._prepare_decoder_attention_mask(attention_mask, (rows, length), inputs_embeds,
                                                              past_length)
        hidden_states = inputs_embeds
        presents = () if use_cache else None
        for index, layer in enumerate(self.layers):
            outputs = layer(hidden_states, attention_mask=attention_mask, position_ids=position_ids,
                            past_key_value=past_key_values[index] if past_key_values is not None else None,
                            use_cache=use_cache)
            hidden_states = outputs[0]
            if use_cache:
                presents += (outputs[1],)
        hidden_states = self.norm(hidden_states)
        return BaseModelOutputWithPast(last_hidden_state=hidden_states, past_key_values=presents)


class NormHead(nn.Module):
    def __init__(self, hidden_size, vocab_size, bias=False):
        super().__init__()
        self.weight = nn.Parameter(torch.empty((vocab_size, hidden_size)))
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        self.first_flag = True

    def forward(self, hidden_states):
        if self.training:
            norm_weight = nn.functional.normalize(self.weight)
            self.first_flag = True
        elif self.first_flag:
            self.first_flag = False
            self.weight.data = nn.functional.normalize(self.weight)
            norm_weight = self.weight
        else:
            norm_weight = self.weight
        return nn.functional.linear(hidden_states, norm_weight)


class BaichuanForCausalLM(BaichuanPreTrainedModel):
    def __init__(self, config, *model_args, **model_kwargs):
        super().__init__(config, *model_args, **model_kwargs)
        self.model = BaichuanModel(config)
        self.lm_head = NormHead(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self):
        return self.model.embed_tokens

    def get_output_embeddings(self):
        return self.lm_head

    def forward(self, input_ids=None, attention_mask=None, past_key_values=None, inputs_embeds=None,
                labels=None, use_cache=None, output_attentions=False, output_hidden_states=False,
                return_dict=True, **kwargs):
        outputs = self.model(input_ids=input_ids, attention_mask=attention_mask, past_key_values=past_key_values,
                             inputs_embeds=inputs_embeds, use_cache=use_cache)
        logits = self.lm_head(outputs.last_hidden_state)
        return CausalLMOutputWithPast(logits=logits, past_key_values=outputs.past_key_values)
