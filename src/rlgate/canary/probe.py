"""What one stack's vLLM offers: parsers, engine arguments, serving and template kwargs.

Run in each stack's own environment (``python -m rlgate.canary.probe OUT.json
[--tokenizers DIR]``, built by :func:`probe_command`), it writes one JSON document:

* ``tool_parsers`` / ``reasoning_parsers``: vLLM's ``ToolParserManager`` and
  ``ReasoningParserManager`` registries (``list_registered()``);
* ``engine_args``: the fields of ``vllm.engine.arg_utils.AsyncEngineArgs``
  (``dataclasses.fields``): the keys NeMo RL's ``policy.generation.vllm_kwargs`` may hold
  (the key schema's vLLM subtree, ``tools/gen_nemo_rl_schema.py`` reads the same class);
* ``serving_chat_kwargs``: the parameters of ``OpenAIServingChat.__init__`` that NeMo RL's
  ``http_server_serving_chat_kwargs`` may set;
* ``chat_template_kwargs``: per tokenizer folder, the ``chat_template_kwargs`` vLLM passes to
  that folder's own chat template (vLLM's ``_cached_resolve_chat_template_kwargs``).

:func:`read_probe` reads such a document back (untrusted: a bad one is a note, never a
traceback) and :func:`compare_probes` lists what was added and removed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlgate.core.commands import Command, command

__all__ = [
    "ENGINE_ARGS_KEY",
    "LISTS",
    "MAX_PROBE_BYTES",
    "ProbeChange",
    "compare_probes",
    "probe",
    "probe_command",
    "read_probe",
]

#: The NeMo RL key whose subtree ``AsyncEngineArgs`` closes (data/nemo_rl_schema.json).
ENGINE_ARGS_KEY = "policy.generation.vllm_kwargs"
#: The probe's name lists and the change kind each one's difference is reported as.
LISTS: dict[str, str] = {
    "tool_parsers": "tool-parser",
    "reasoning_parsers": "reasoning-parser",
    "engine_args": "engine-arg",
    "serving_chat_kwargs": "serving-chat-kwarg",
}
TEMPLATE_KIND = "chat-template-kwarg"
MAX_PROBE_BYTES = 4 * 2**20
MAX_NAMES = 20_000
MAX_NAME = 200


def probe(tokenizers: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The document of this environment's vLLM (imports vLLM: seconds)."""
    from importlib import metadata

    from rlgate.serving.parsers import (
        engine_arg_names,
        reasoning_parser_names,
        serving_chat_parameters,
        template_variables,
        tool_parser_names,
    )

    doc: dict[str, Any] = {
        "vllm": metadata.version("vllm"),
        "transformers": metadata.version("transformers"),
        "tool_parsers": sorted(tool_parser_names()),
        "reasoning_parsers": sorted(reasoning_parser_names()),
        "engine_args": sorted(engine_arg_names()),
        "serving_chat_kwargs": sorted(serving_chat_parameters()),
        "chat_template_kwargs": {},
    }
    if tokenizers and Path(tokenizers).is_dir():
        from rlgate.serving.templates import load_tokenizer

        for folder in sorted(p for p in Path(tokenizers).iterdir() if p.is_dir()):
            try:
                template = load_tokenizer(str(folder)).chat_template
            except Exception as exc:  # a folder without a loadable tokenizer: said, not fatal
                doc["chat_template_kwargs"][folder.name] = {"error": type(exc).__name__}
                continue
            if isinstance(template, str):
                doc["chat_template_kwargs"][folder.name] = sorted(template_variables(template))
    return doc


def probe_command(python: Path, out: Path, tokenizers: str | None) -> Command:
    """``python -m rlgate.canary.probe OUT [--tokenizers DIR]`` (a built Command)."""
    if tokenizers:
        return command(
            "{python} -m rlgate.canary.probe {out} --tokenizers {tok}",
            python=python,
            out=out,
            tok=Path(tokenizers).resolve(),
        )
    return command("{python} -m rlgate.canary.probe {out}", python=python, out=out)


def _names(value: Any) -> list[str] | None:
    if not isinstance(value, list) or len(value) > MAX_NAMES:
        return None
    if not all(isinstance(v, str) and 0 < len(v) <= MAX_NAME for v in value):
        return None
    return sorted(set(value))


def read_probe(path: str | os.PathLike[str]) -> tuple[dict[str, Any] | None, str]:
    """A probe document (only well-formed lists kept) and a note; (None, note) when unusable."""
    try:
        size = os.path.getsize(path)
        if size > MAX_PROBE_BYTES:
            return None, f"probe {path}: {size} bytes, more than {MAX_PROBE_BYTES}: ignored"
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return None, f"probe {path}: unreadable ({type(exc).__name__}): ignored"
    if not isinstance(doc, dict):
        return None, f"probe {path}: not a JSON object: ignored"
    out: dict[str, Any] = {}
    bad = []
    for key in LISTS:
        names = _names(doc.get(key))
        if names is None:
            bad.append(key)
        else:
            out[key] = names
    templates = doc.get("chat_template_kwargs")
    out["chat_template_kwargs"] = {}
    if isinstance(templates, dict) and len(templates) <= MAX_NAMES:
        for folder, names in templates.items():
            kept = _names(names)
            if isinstance(folder, str) and len(folder) <= MAX_NAME and kept is not None:
                out["chat_template_kwargs"][folder] = kept
    for key in ("vllm", "transformers"):
        if isinstance(doc.get(key), str) and len(doc[key]) <= MAX_NAME:
            out[key] = doc[key]
    note = f"probe {path}: malformed {', '.join(bad)}: ignored" if bad else ""
    return out, note


@dataclass(frozen=True, slots=True)
class ProbeChange:
    """Names one stack's vLLM registers or accepts that the other does not."""

    kind: str  # tool-parser, reasoning-parser, engine-arg, serving-chat-kwarg, ...
    where: str  # what the names belong to (a registry, a NeMo RL key, a tokenizer folder)
    added: tuple[str, ...]
    removed: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {
            "kind": self.kind,
            "where": self.where,
            "added": list(self.added),
            "removed": list(self.removed),
        }


_WHERE = {
    "tool_parsers": "vLLM ToolParserManager",
    "reasoning_parsers": "vLLM ReasoningParserManager",
    "engine_args": f"{ENGINE_ARGS_KEY} (vLLM AsyncEngineArgs)",
    "serving_chat_kwargs": "http_server_serving_chat_kwargs (vLLM OpenAIServingChat)",
}


def _change(kind: str, where: str, before: set[str], after: set[str]) -> ProbeChange:
    return ProbeChange(kind, where, tuple(sorted(after - before)), tuple(sorted(before - after)))


def compare_probes(
    pinned: Mapping[str, Any] | None, candidate: Mapping[str, Any] | None
) -> list[ProbeChange]:
    """Added/removed names per list (only lists both sides hold; a missing side: no change)."""
    if not pinned or not candidate:
        return []
    changes = []
    for key, kind in LISTS.items():
        if key not in pinned or key not in candidate:
            continue
        before, after = set(pinned[key]), set(candidate[key])
        if before != after:
            changes.append(_change(kind, _WHERE[key], before, after))
    tb, ta = pinned.get("chat_template_kwargs", {}), candidate.get("chat_template_kwargs", {})
    for folder in sorted(set(tb) & set(ta)):
        before, after = set(tb[folder]), set(ta[folder])
        if before != after:
            changes.append(_change(TEMPLATE_KIND, f"tokenizer:{folder}", before, after))
    return changes


def main(argv: list[str] | None = None) -> int:
    """Write this environment's probe document to OUT."""
    parser = argparse.ArgumentParser(prog="python -m rlgate.canary.probe")
    parser.add_argument("out")
    parser.add_argument("--tokenizers")
    args = parser.parse_args(argv)
    doc = probe(args.tokenizers)
    Path(args.out).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
