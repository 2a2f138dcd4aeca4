"""Records what Google's LiteRT-LM engine itself makes of tests/data/litertlm/tiny.litertlm (a second oracle beside
the signature runners scripts/make_litertlm_bundle.py records): the start and stop token ids it reads from the
bundle's metadata, its tokenization of the prompts, and its greedy text for each prompt. Never run by CI.

The engine is the `litert-lm-api` package (its native library), in a venv of its own:

    python3.11 -m venv /tmp/lmvenv && /tmp/lmvenv/bin/pip install litert-lm-api==0.18.1 numpy
    /tmp/lmvenv/bin/python scripts/record_litertlm_engine.py      # writes tests/data/litertlm/engine.json

A session per prompt: CPU backend, SamplerConfig(top_k=1) (greedy), max_output_tokens 64,
apply_prompt_template=False with the prompt text as expected.json gives it (the chat case: the rendered template
without its leading "<bos>", which the engine adds itself as the start token), and for the chat case also
apply_prompt_template=True with the plain text (the Session API then wraps it in the metadata's user / model prompt
affixes; the jinja template is the Conversation API's, which passes message contents as lists of parts). The
engine's CPU path computes dynamic-range int8 layers with XNNPACK's arithmetic, so its tokens are those of the
official runtime's XNNPACK path (expected.json's `xnnpack_tokens`), not of its builtin kernels, where the two differ.
"""

from __future__ import annotations

import json
import tempfile
from importlib.metadata import version
from pathlib import Path

import litert_lm as lm

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "litertlm"


def main() -> None:
    expected = json.loads((DATA / "expected.json").read_text())
    cache = tempfile.mkdtemp()  # the engine writes an XNNPACK weight cache beside the model unless told where
    eng = lm.Engine(str(DATA / "tiny.litertlm"), backend=lm.Backend.CPU(), cache_dir=cache)
    rec = {"engine": f"litert-lm-api {version('litert-lm-api')}, CPU backend, top_k=1, max_output_tokens 64",
           "bos": eng.bos_token_id, "stop_ids": eng.eos_token_ids, "cases": {}}

    def run(text: str, template: bool) -> str:
        s = eng.create_session(apply_prompt_template=template, sampler_config=lm.SamplerConfig(top_k=1, seed=0),
                               max_output_tokens=64)
        s.run_prefill([text])
        out = s.run_decode().texts[0]
        s.close()
        return out

    for name, c in expected["cases"].items():
        text = c["rendered"][len("<bos>"):] if c["chat"] else c["text"]
        entry = {"tokenized": eng.tokenize(text), "text": run(text, False)}
        if c["chat"]:
            entry["text_with_engine_template"] = run(c["text"], True)
        rec["cases"][name] = entry
    (DATA / "engine.json").write_text(json.dumps(rec, indent=1) + "\n")
    print(json.dumps(rec)[:400])


if __name__ == "__main__":
    main()
