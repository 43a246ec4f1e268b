#!/usr/bin/env python3
"""Renders the published chat templates of tests/unit/chat_template_texts.hpp with Python's
jinja2 (Hugging Face's settings: trim_blocks, lstrip_blocks, raise_exception) on the unit test's
conversation (and on a lone user message), and prints each result as a Python literal, without the leading BOS the tokenizer
adds. An independent reference for the hand-written expectations in test_chat_template.cpp;
run by hand (needs jinja2): python3 tests/reference/chat_templates_jinja.py
"""
import ast
import os
import re
import sys

import jinja2

here = os.path.dirname(os.path.abspath(__file__))
source = open(os.path.join(here, "../unit/chat_template_texts.hpp"), encoding="utf-8").read()

# Each `inline constexpr const char* kName = <one or more C++ string literals>;`
templates = {}
for name, body in re.findall(r"inline constexpr const char\* (k\w+) =\s*(.*?);\n", source, re.S):
    text = ""
    for raw, plain in re.findall(r'R"JINJA\((.*?)\)JINJA"|("(?:[^"\\]|\\.)*")', body, re.S):
        text += raw if raw else ast.literal_eval(plain)
    templates[name] = text

conversation = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Hello"},
    {"role": "assistant", "content": "Hi there"},
    {"role": "user", "content": "Who are you?"},
]
bos_eos = {"kGemma": ("<bos>", "<eos>"), "kGemma3": ("<bos>", "<eos>"), "kLlama3": ("<|begin_of_text|>", "<|eot_id|>")}


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
env.globals["raise_exception"] = raise_exception
for name, text in templates.items():
    bos, eos = bos_eos.get(name, ("<s>", "</s>"))
    for messages, gen in ((conversation, False), (conversation, True), ([{"role": "user", "content": "Hi"}], True)):
        try:
            out = env.from_string(text).render(messages=messages, add_generation_prompt=gen, bos_token=bos,
                                               eos_token=eos, default_system_message="DEFAULT")
        except jinja2.exceptions.TemplateError as e:
            out = f"error: {e}"
        if out.startswith(bos):
            out = out[len(bos):]
        print(f"{name} {len(messages)} messages, add_generation_prompt={gen}: {out!r}")
sys.exit(0)
