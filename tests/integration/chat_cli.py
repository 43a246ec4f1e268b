#!/usr/bin/env python3
"""infer-chat from the outside, on the F32 reference model (random weights, SentencePiece vocabulary,
no chat template; rebuilt with infer-make-model from tests/data/models/make-model.args):
  - two scripted turns exit 0, and --show-prompt prints exactly the ChatML text of each turn;
  - the cache kept across turns changes nothing: each greedy answer equals infer-generate's greedy
    continuation of that turn's rendered text evaluated from scratch, both when the earlier turns
    are a prefix of the new rendering (chatml) and when they are not (mistral-v3 moves the system
    message into the last user turn, so the cache is re-evaluated from the divergence);
  - user turns come from stdin without -p (empty lines skipped, no "> " prompt off a terminal);
  - an unknown --chat-template, a model without a template and no override, and a full context
    exit 1 with a clear message; --chat-template-list names the formats.

usage: chat_cli.py BIN_DIR REPO_ROOT
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile

bin_dir, root = sys.argv[1:3]
tool = lambda name: os.path.join(bin_dir, name)
failures = []
checks = 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)


def run(args, expect_rc=0, stdin=b""):
    p = subprocess.run(args, capture_output=True, timeout=600, cwd=root, input=stdin)
    out, err = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    check(p.returncode == expect_rc, f"{' '.join(args[:6])}...: exit {p.returncode}, expected {expect_rc}: {err[-300:]}")
    return out, err


STATS = re.compile(r"infer-chat: turn \d+: prompt (\d+) tokens \((\d+) from the cache, (\d+) evaluated\).*\n")


def chat_turns(model, fmt, system, turns):
    """Runs infer-chat --show-prompt; returns each turn's rendered prompt, its stats and stdout."""
    args = [tool("infer-chat"), "-m", model, "--chat-template", fmt, "--temp", "0", "-n", "12", "-t", "2",
            "--show-prompt", "--system", system] + [a for t in turns for a in ("-p", t)]
    out, err = run(args)
    stats = STATS.findall(err)
    prompts = [p for p in STATS.sub("\0", err).split("\0") if p]
    check(len(prompts) == len(turns) and len(stats) == len(turns), f"{fmt}: {len(prompts)} prompts for {len(turns)} turns: {err!r}")
    return prompts, stats, out


def from_scratch(model, prompt, fmt):
    """infer-generate's greedy answer to a rendered prompt, evaluated without any cache."""
    out, _ = run([tool("infer-generate"), "-m", model, "-p", prompt, "--temp", "0", "-n", "12", "-t", "2",
                  "--stop", end_text[fmt]])
    return out


end_text = {"chatml": "<|im_end|>", "mistral-v3": "</s>"}

with tempfile.TemporaryDirectory() as tmp:
    model = os.path.join(tmp, "ref-f32.gguf")
    args = shlex.split(open(os.path.join(root, "tests/data/models/make-model.args")).read())
    run([tool("infer-make-model"), "-o", model, "--type", "f32"] + args)

    for fmt in ("chatml", "mistral-v3"):
        prompts, stats, out = chat_turns(model, fmt, "Be brief.", ["Hello there", "And again", "Once more"])
        answers = [from_scratch(model, p, fmt) for p in prompts]
        check(out == "".join(a + "\n" for a in answers), f"{fmt}: answers with the cache {out!r} != from scratch {answers!r}")
        if len(prompts) < 2:
            continue
        if fmt == "chatml":
            check(prompts[0] == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello there<|im_end|>\n"
                               "<|im_start|>assistant\n", f"turn 1 prompt: {prompts[0]!r}")
            check(prompts[1] == prompts[0] + answers[0] + "<|im_end|>\n<|im_start|>user\nAnd again<|im_end|>\n"
                                "<|im_start|>assistant\n", f"turn 2 prompt: {prompts[1]!r}")
            check(int(stats[1][1]) > int(stats[0][0]), f"chatml turn 2 reused only {stats[1][1]} cached tokens")
        else:
            check(int(stats[1][1]) < int(stats[0][0]), f"mistral-v3 turn 2 reused {stats[1][1]} tokens past the divergence")

    out, err = run([tool("infer-chat"), "-m", model, "--chat-template", "chatml", "--temp", "0", "-n", "4", "-t", "2"],
                   stdin=b"Hi\n\nBye\n")
    check(len(STATS.findall(err)) == 2, f"stdin: expected 2 turns: {err!r}")
    check(not out.startswith(">"), f"stdin off a terminal printed a prompt: {out!r}")

    _, err = run([tool("infer-chat"), "-m", model, "--chat-template", "vicuna", "-p", "x"], expect_rc=1)
    check("'vicuna'" in err and "chatml" in err and "zephyr" in err, f"unknown template: {err!r}")
    _, err = run([tool("infer-chat"), "-m", model, "-p", "x"], expect_rc=1)
    check("no chat template" in err and "--chat-template" in err and "chatml" in err, f"no template: {err!r}")
    _, err = run([tool("infer-chat"), "-m", model, "--chat-template", "chatml", "-c", "16", "-p", "x " * 40], expect_rc=1)
    check("context full" in err, f"full context: {err!r}")
    out, _ = run([tool("infer-chat"), "--chat-template-list"])
    check(out.split() == ["chatml", "gemma", "llama2", "llama3", "mistral-v3", "mistral-v7", "mistral-v7-tekken", "zephyr"],
          f"--chat-template-list: {out!r}")

for f in failures:
    print("FAIL:", f)
print(f"{checks - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
