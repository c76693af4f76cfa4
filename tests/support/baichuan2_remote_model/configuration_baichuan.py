"""Config of a tiny remote-code model written like Baichuan2-7B-Chat's (configuration_baichuan.py).

``rotary_tables`` is the stand-in's own switch: "attributes" (Baichuan2-7B's code: plain tensor
attributes) or "buffers" (non-persistent buffers, as other remote code writes the same tables).
"""

from transformers import PretrainedConfig


class BaichuanConfig(PretrainedConfig):
    model_type = "baichuan"
    keys_to_ignore_at_inference = ["past_key_values"]

    def __init__(self, vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, hidden_act="silu", max_position_embeddings=4096,
                 initializer_range=0.02, rms_norm_eps=1e-6, use_cache=True, pad_token_id=0,
                 bos_token_id=1, eos_token_id=2, tie_word_embeddings=False, z_loss_weight=0,
                 rotary_tables="attributes", **kwargs):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.hidden_act = hidden_act
        self.max_position_embeddings = max_position_embeddings
        self.initializer_range = initializer_range
        self.rms_norm_eps = rms_norm_eps
        self.use_cache = use_cache
        self.z_loss_weight = z_loss_weight
        self.rotary_tables = rotary_tables
        super().__init__(pad_token_id=pad_token_id, bos_token_id=bos_token_id, eos_token_id=eos_token_id,
                         tie_word_embeddings=tie_word_embeddings, **kwargs)
