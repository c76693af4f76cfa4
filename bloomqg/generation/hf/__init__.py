"""In-process generation with Hugging Face transformers: batched, resumable, reproducible.

- :mod:`~bloomqg.generation.hf.generator`: :class:`~bloomqg.generation.hf.generator.HFTextGenerator`,
  the :class:`~bloomqg.inputs.chat.TextGenerator` facade (encoding, batch planning, the
  out-of-memory halving, completions)
- :mod:`~bloomqg.generation.hf.loading`: config, loading plan, tokenizer and weights
- :mod:`~bloomqg.generation.hf.model_support`: what is settled before the weights load
- :mod:`~bloomqg.generation.hf.remote_code`: what remote code needs once loaded (tensors its
  ``__init__`` computed, rebuilt off the meta device; whether left padding changes its outputs)
- :mod:`~bloomqg.generation.hf.decode`: the ``cached`` and ``legacy`` decode loops
- :mod:`~bloomqg.generation.hf.sampling`: greedy or per-row-stream sampling of the next token
- :mod:`~bloomqg.generation.hf.kv_cache`: the preallocated cache and the shared prompt prefix
- :mod:`~bloomqg.generation.hf.batching` / :mod:`~bloomqg.generation.hf.memory`: batch plans and
  sizes (torch-free) and the memory a batch needs on the model's devices

Nothing is imported here: torch and transformers load only with the generator.

:class:`~bloomqg.generation.hf.generator.HFTextGenerator` loads a causal LM once and completes chat requests in length-bucketed
batches (see :mod:`bloomqg.generation.hf.batching`).  It runs its own decode loop over the model's
KV cache instead of ``model.generate``: ``generate`` keeps every sequence of a batch decoding
until the longest one stops, so with answers of very different lengths most of the computed
tokens are padding.  Here a sequence that emits a stop token is dead: its cache rows are
dropped when enough rows are dead (at once on a CPU, where every row costs compute; when a
quarter of the batch is dead on a GPU, where each drop copies the whole cache), so the work
done tracks the useful tokens.

What is settled before the weights load (code, decode loop, attention, chat template,
tokenizer extras) is in :mod:`bloomqg.generation.hf.model_support`.  Native models use the
``cached`` loop; remote-code models (Baichuan2) the ``legacy`` loop, which feeds the model's
own cache back as it returned it; such a model batches only when a probe at load shows left
padding leaves its outputs alone (it may take no ``position_ids``, as Baichuan2 does).  The cached
loop checks after its first forward pass that the model filled the cache it was given, so a
model that ignores it fails loudly instead of writing text computed without context; both loops
refuse to return text computed from non-finite logits.

Prefill and cache (:mod:`bloomqg.generation.hf.kv_cache`): the tokens all prompts of a batch start
with (chat template, system message, the strategy's instructions: 159 of ~220 CoT tokens with
the shipped templates) are computed once per batch and copied into every row's cache; the rest
is prefilled in column chunks of about ``prefill_chunk_tokens`` tokens; the cache is
preallocated for the prompt plus ``max_new_tokens`` instead of growing by concatenation.  The
shared prefix is a function of the batch's own prompts, and batches replan identically on
resume (the stage stores the resolved batch size in its checkpoint), so a rerun batch computes
exactly what the uninterrupted run did.

Response prefill: a request whose last message is from the assistant is *continued*
(transformers' ``apply_chat_template(..., continue_final_message=True)``) instead of answered in
a new turn, and the completion text is that message's content followed by the continuation, so
parsers and audits see the whole answer.  :func:`bloomqg.inputs.prompts.with_response_prefill` builds
such requests; the generation stage adds them when a model entry sets ``response_prefill: true``
(:attr:`~bloomqg.generation.hf.generator.HFTextGenerator.response_prefill`).

Reproducibility: every sequence samples from its own random stream, a CPU ``torch.Generator``
seeded from the study seed and its request id (:func:`~bloomqg.generation.hf.batching.request_seed`);
a batch draws all its rows' uniforms once, before decoding, so a row's text does not depend on
the other rows, on the device its logits live on, or on per-step host round trips.  Bitwise
equality is not promised across hardware or batch compositions (batched matrix products differ
in the last bits).

Devices: with ``device_map="auto"`` over several GPUs the inputs go to the embedding's device,
the logits come from the output head's, and each cache layer selects its rows with indices moved
to its own device.
"""
