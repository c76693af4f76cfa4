"""Load-check a config's in-process models before a long run: ``python -m bloomqg.generation.check_models``.

For every ``backend: hf`` entry of a config (or those named), load the model exactly as the
generation job would (:meth:`HFTextGenerator.from_spec`: code, decode loop, attention, chat
template, tokenizer extras) and generate a few greedy tokens for one prompt.  ``--standin
NAME=PATH`` loads a local folder in place of the entry's hub model (a stand-in built from the
model's config with random weights, or a local copy), keeping every other setting of the entry;
that is how the paper preset is checked on a machine without the weights::

    python -m bloomqg.generation.check_models configs/paper.yaml --standin glm-4-9b=/tmp/glm ...

Prints one JSON line per model (its load plan, or the error) and exits non-zero if any failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml


def check_entry(name: str, spec: Mapping[str, Any], source: str | None = None,
                max_new_tokens: int = 4) -> dict[str, Any]:
    """Load one model entry (from ``source`` when given) and generate; a result record."""
    from bloomqg.inputs.chat import ChatRequest, DecodingParams
    from bloomqg.generation.hf.generator import HFTextGenerator

    entry = {**spec, "model": source or spec["model"], "revision": None if source else spec.get("revision")}
    try:
        generator = HFTextGenerator.from_spec(entry, None)
        completion = generator.complete(
            [ChatRequest("check", ({"role": "user", "content": "Write one question about stacks."},))],
            DecodingParams(do_sample=False, max_new_tokens=max_new_tokens))[0]
        plan = generator.plan.as_provenance()
        # remote code: what loading rebuilt and whether its batches are exact (both decided at load)
        plan.update({key: generator.provenance[key] for key in ("rebuilt_init_tensors", "left_padding")
                     if key in generator.provenance})
        generator.close()
    except Exception as error:  # noqa: BLE001 - reported per model, the run goes on to the next
        return {"model": name, "ok": False, "error": f"{type(error).__name__}: {error}"}
    return {"model": name, "ok": completion.text is not None, **plan,
            "chat_template": entry.get("chat_template") or "tokenizer",
            "completion_tokens": completion.n_completion_tokens}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("--model", action="append", default=[], help="check only these entries")
    parser.add_argument("--standin", action="append", default=[], metavar="NAME=PATH",
                        help="load PATH in place of entry NAME's model")
    args = parser.parse_args(argv)
    config = yaml.safe_load(args.config.read_text())
    standins = dict(item.split("=", 1) for item in args.standin)
    entries = {name: spec for name, spec in (config.get("models") or {}).items()
               if spec.get("backend") == "hf" and (not args.model or name in args.model)}
    unknown = sorted(set(standins) - set(entries))
    if unknown:
        parser.error(f"--standin names no hf model entry of {args.config}: {unknown}")
    failed = 0
    for name, spec in entries.items():
        record = check_entry(name, spec, standins.get(name))
        failed += not record["ok"]
        print(json.dumps(record), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
