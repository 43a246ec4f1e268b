#!/usr/bin/env python3
"""Streams a completion: python3 examples/python/generate.py MODEL.gguf [PROMPT]
(pip install bindings/python first, or set PYTHONPATH=bindings/python/src; LIBINFER_LIBRARY
points at libinfer.so when it is not installed)."""
import sys

import libinfer

model, prompt = sys.argv[1], " ".join(sys.argv[2:]) or "Once upon a time"
with libinfer.Engine(model) as engine:
    for piece in engine.stream(prompt, max_tokens=64, temperature=0):
        print(piece, end="", flush=True)
print()
