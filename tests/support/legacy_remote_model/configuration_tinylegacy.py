"""Config of a tiny remote-code model written the way pre-Cache (transformers 4.x) repositories are."""

from transformers import PretrainedConfig


class TinyLegacyConfig(PretrainedConfig):
    model_type = "tinylegacy"

    def __init__(self, vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=64, max_position_embeddings=256, num_key_value_heads=4, **kwargs):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.intermediate_size = intermediate_size
        self.max_position_embeddings = max_position_embeddings
        super().__init__(**kwargs)
