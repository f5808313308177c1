#!/usr/bin/python3
"""Renders every chat template in ../shared/data/chat-templates with Python's
jinja2, configured the way Hugging Face transformers renders chat templates,
for each conversation in conversations.json, with and without the generation
prompt. test_chat compares colibri's renderings with these files.

Usage: /usr/bin/python3 tests/chat/make_reference.py [SHARED_DIR]

Writes tests/chat/reference/<template>__<conversation>__<gen|nogen>.txt (the
rendering) or .error.txt (the exception jinja2 raised, when the template
refuses the conversation), and reference/index.json listing them.

Also renders the interpreter's unit cases, jinja_cases.json, into
reference/jinja_cases.json ("expected" or "error" per case), with the same
filters and globals but each case's own trim_blocks/lstrip_blocks.

Hugging Face renders with ImmutableSandboxedEnvironment, which refuses
list.append/list.pop. Kimi-K2's template uses them for tool calls, so
HF itself cannot render those conversations; for them (and only them) the
rendering comes from SandboxedEnvironment, which allows mutation, and
index.json says so ("env": "sandboxed").
"""
import datetime
import json
import os
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..", "shared")
TEMPLATES = os.path.join(SHARED, "data", "chat-templates")
OUT = os.path.join(HERE, "reference")

# Fixed so that strftime_now renders the same on every run.
NOW = datetime.datetime(2025, 6, 28, 14, 5, 9)
BOS = "<|bos|>"
EOS = "<|eos|>"


class TemplateError(Exception):
    pass


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, indent=None, separators=None, sort_keys=False, ensure_ascii=False):
    # transformers replaces jinja2's html-safe tojson with plain json.dumps.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def make_env(cls, trim_blocks=True, lstrip_blocks=True):
    env = cls(trim_blocks=trim_blocks, lstrip_blocks=lstrip_blocks,
              extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    # Not in transformers; DeepSeek-V3.2's template needs it for string arguments
    # (llama.cpp and vLLM provide it the same way).
    env.filters["from_json"] = json.loads
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: NOW.strftime(fmt)
    return env


def render(env_cls, source, ctx):
    return make_env(env_cls).from_string(source).render(**ctx)


def render_unit_cases():
    with open(os.path.join(HERE, "jinja_cases.json"), encoding="utf-8") as f:
        cases = json.load(f)
    for case in cases:
        env = make_env(SandboxedEnvironment, case["trim_blocks"], case["lstrip_blocks"])
        try:
            case["expected"] = env.from_string(case["template"]).render(**case["vars"])
        except Exception as e:
            case["error"] = f"{type(e).__name__}: {e}"
    with open(os.path.join(OUT, "jinja_cases.json"), "w", encoding="utf-8") as f:
        json.dump(cases, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"{len(cases)} unit cases, {sum('error' in c for c in cases)} errors")


def main():
    with open(os.path.join(HERE, "conversations.json"), encoding="utf-8") as f:
        conversations = json.load(f)
    os.makedirs(OUT, exist_ok=True)
    for name in os.listdir(OUT):
        if name.endswith(".txt"):
            os.remove(os.path.join(OUT, name))
    index = []
    for tmpl_name in sorted(os.listdir(TEMPLATES)):
        if not tmpl_name.endswith(".jinja"):
            continue
        with open(os.path.join(TEMPLATES, tmpl_name), encoding="utf-8") as f:
            source = f.read()
        stem = tmpl_name[: -len(".jinja")]
        for conv in conversations:
            for gen in (True, False):
                ctx = dict(conv.get("extra", {}))
                ctx.update(messages=conv["messages"], tools=conv.get("tools"),
                           add_generation_prompt=gen, bos_token=BOS, eos_token=EOS)
                env = "immutable"
                try:
                    try:
                        text, kind = render(ImmutableSandboxedEnvironment, source, ctx), "text"
                    except jinja2.exceptions.SecurityError:
                        env = "sandboxed"
                        text, kind = render(SandboxedEnvironment, source, ctx), "text"
                except Exception as e:  # the template refused this conversation
                    text, kind = f"{type(e).__name__}: {e}", "error"
                base = f"{stem}__{conv['name']}__{'gen' if gen else 'nogen'}"
                file = base + (".txt" if kind == "text" else ".error.txt")
                with open(os.path.join(OUT, file), "w", encoding="utf-8", newline="") as f:
                    f.write(text)
                index.append({"template": tmpl_name, "conversation": conv["name"],
                              "add_generation_prompt": gen, "kind": kind, "env": env,
                              "file": file})
    with open(os.path.join(OUT, "index.json"), "w", encoding="utf-8") as f:
        json.dump({"jinja2": jinja2.__version__, "bos_token": BOS, "eos_token": EOS,
                   "now": NOW.isoformat(), "renderings": index}, f, indent=1)
        f.write("\n")
    print(f"{len(index)} renderings, "
          f"{sum(r['kind'] == 'error' for r in index)} errors, "
          f"{sum(r['env'] == 'sandboxed' for r in index)} with the mutable sandbox")


if __name__ == "__main__":
    main()
    render_unit_cases()
