#!/usr/bin/env python3
"""Writes the snippets of tests/data/chat_templates/snippets.json into tests/fuzz/corpus_jinja/, one
file each: with the real templates of tests/data/chat_templates (given to the fuzzer as a second
seed directory, not copied), the Jinja fuzzer's seed corpus. Run from the repository root:
    python3 tests/fuzz/make_jinja_corpus.py"""
import json
import os
import shutil

out = "tests/fuzz/corpus_jinja"
shutil.rmtree(out, ignore_errors=True)
os.makedirs(out)
n = 0
with open("tests/data/chat_templates/snippets.json", encoding="utf-8") as f:
    for i, text in enumerate(json.load(f)["templates"]):
        with open(os.path.join(out, f"snippet-{i:03}.jinja"), "w", encoding="utf-8", newline="") as g:
            g.write(text)
        n += 1
print(f"wrote {n} seeds to {out}")
