"""Text generation backends (transformers in-process, OpenAI-compatible APIs) and the
question-generation stage built on them."""
