#!/usr/bin/env python3
"""infer-chat from the outside, on the F32 reference model (random weights, SentencePiece vocabulary,
no chat template; rebuilt with infer-make-model from tests/data/models/make-model.args):
  - two scripted turns exit 0, and --show-prompt prints exactly the ChatML text of each turn;
  - the cache kept across turns changes nothing: each greedy answer equals infer-generate's greedy
    continuation of that turn's rendered text evaluated from scratch, both when the earlier turns
    are a prefix of the new rendering (chatml) and when they are not (mistral-v3 moves the system
    message into the last user turn, so the cache serves only what precedes the divergence);
  - the engine's prefix cache serves turn 2 every full KV block of turn 1's prompt and answer
    (chatml), in whole blocks;
  - user turns come from stdin without -p (empty lines skipped, no "> " prompt off a terminal);
    a scripted session piped in runs its turns and commands: /stats (cached prompt tokens on the
    second turn, KV blocks), /system (a new conversation under the new system message), /reset,
    /help, and exits 0 at /quit (nothing after it is answered) and at the end of input;
  - a SIGINT while an answer streams cancels that answer (finish: cancelled), the next turn is
    answered, and /quit exits 0;
  - --json -p prints one JSON object per turn: the answer's text (as streamed without --json),
    its ids, finish_reason and metrics;
  - an unknown --chat-template, a model without a template and no override, and a full context
    exit 1 with a clear message; --chat-template-list names the formats;
  - --render prints a conversation file as a --chat-template-file template renders it, byte for
    byte as Python's jinja2 renders it (transformers' configuration, from jinja_reference.py),
    tool calls and extra keywords included, and nothing else; a template that raises, one that
    does not parse and a model without a template exit 1 with one line on stderr; a turn chats
    through a --chat-template-file template (--show-prompt prints jinja2's rendering).

usage: chat_cli.py BIN_DIR REPO_ROOT
"""
import json
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import tempfile
import time

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


STATS = re.compile(r"infer-chat: turn \d+: prompt (\d+) tokens \((\d+) from the cache, (\d+) evaluated\), answer (\d+) tokens, "
                   r"finish: (\w+)\n")
BLOCK = 16  # the engine's default KV block size: the prefix cache serves whole blocks


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
            # Turn 1 computed the KV of its prompt and of every answer token but (at -n) the last;
            # turn 2's prompt starts with all of them, so every full block of them is served.
            p1, a1, p2, cached2 = int(stats[0][0]), int(stats[0][3]), int(stats[1][0]), int(stats[1][1])
            full = (p1 + a1 - 1) // BLOCK * BLOCK
            check(full > p1 // BLOCK * BLOCK, f"chatml turn 1 too short to show the answer's reuse: {stats[0]}")
            check(full <= cached2 < p2 and cached2 % BLOCK == 0,
                  f"chatml turn 2 took {cached2} of {p2} tokens from the cache; turn 1 left {full} in full blocks")
        else:
            check(int(stats[1][1]) < int(stats[0][0]), f"mistral-v3 turn 2 reused {stats[1][1]} tokens past the divergence")

    out, err = run([tool("infer-chat"), "-m", model, "--chat-template", "chatml", "--temp", "0", "-n", "4", "-t", "2"],
                   stdin=b"Hi\n\nBye\n")
    check(len(STATS.findall(err)) == 2, f"stdin: expected 2 turns: {err!r}")
    check(not out.startswith(">"), f"stdin off a terminal printed a prompt: {out!r}")

    # A scripted session piped in: turns and commands (which go to stderr, answers to stdout).
    chat = [tool("infer-chat"), "-m", model, "--chat-template", "chatml", "--temp", "0", "-n", "12", "-t", "2"]
    session = "Hello there\n/stats\nAnd again\n/stats\n/system Be terse.\nHi\n/reset\n/help\nYo\n/quit\nNever answered\n"
    out, err = run(chat + ["--show-prompt"], stdin=session.encode())
    turns = STATS.findall(err)
    check(len(turns) == 4 and len(out.splitlines()) >= 4, f"session: {len(turns)} turns, expected 4 (none after /quit): {err!r}")
    stats_re = re.compile(r"/stats: turn (\d+): TTFT [0-9.]+ ms, [0-9.]+ tokens/s, prompt (\d+) tokens \((\d+) cached prompt "
                          r"tokens\), answer \d+ tokens \|.*KV blocks: (\d+) in use, (\d+) cached, (\d+) free, (\d+) in all")
    shown = stats_re.findall(err)
    check(len(shown) == 2 and [int(t[0]) for t in shown] == [1, 2], f"/stats lines: {shown} in {err!r}")
    if len(shown) == 2:
        check(int(shown[1][2]) > 0 and int(shown[1][2]) == int(turns[1][1]),
              f"/stats after turn 2: {shown[1][2]} cached prompt tokens, the turn line says {turns[1][1]}")
        used, cached, free, total = map(int, shown[1][3:])
        check(total > 0 and used + cached + free == total and cached > 0, f"/stats KV blocks: {shown[1]}")
    fresh = lambda system, user: (f"<|im_start|>system\n{system}<|im_end|>\n" if system else "") + \
        f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
    check(fresh("Be terse.", "Hi") in err and fresh("", "Hi") not in err.replace(fresh("Be terse.", "Hi"), ""),
          f"/system: turn 3 is not a new conversation under the new system message: {err!r}")
    check(fresh("Be terse.", "Yo") in err, f"/reset: turn 4 is not a new conversation that keeps the system message: {err!r}")
    check(len(turns) == 4 and int(turns[2][1]) < int(turns[2][0]) and int(turns[3][1]) < int(turns[3][0]),
          f"session: new conversations served from the cache beyond what they share: {turns}")
    check("/reset" in err and "/quit" in err and "/system TEXT" in err, f"/help: {err!r}")
    check("Never answered" not in err, "a line after /quit was answered")

    # --json -p: one object per turn with the answer streamed above.
    plain, _ = run(chat + ["-p", "Hello there"])
    out, _ = run(chat + ["--json", "-p", "Hello there"])
    lines = out.splitlines()
    check(len(lines) == 1, f"--json: {len(lines)} lines: {out!r}")
    try:
        obj = json.loads(lines[0]) if lines else {}
    except ValueError as e:
        obj = {}
        check(False, f"--json: not JSON ({e}): {out!r}")
    m = obj.get("metrics", {})
    check(obj.get("text", None) is not None and obj["text"] + "\n" == plain, f"--json text {obj.get('text')!r} != streamed {plain!r}")
    check(isinstance(obj.get("ids"), list) and len(obj["ids"]) == m.get("generated_tokens") and 0 < len(obj["ids"]) <= 12,
          f"--json ids and metrics: {obj}")
    check(obj.get("finish_reason") in ("stop", "length") and m.get("prompt_tokens", 0) > 0 and "cached_tokens" in m and
          m.get("ttft_ms", 0) > 0 and "tpot_ms" in m and "e2e_ms" in m, f"--json fields: {obj}")

    # SIGINT while an answer streams cancels it; the next turn is answered; /quit exits 0. The
    # model's long context lets the first answer run for thousands of tokens (seconds), while
    # the signal follows its first bytes.
    long_model = os.path.join(tmp, "long-ctx.gguf")
    long_args = [a if i == 0 or args[i - 1] != "--ctx" else "4096" for i, a in enumerate(args)]
    run([tool("infer-make-model"), "-o", long_model, "--type", "f32"] + long_args)
    with open(os.path.join(tmp, "sigint.err"), "w+b") as errf:
        p = subprocess.Popen([tool("infer-chat"), "-m", long_model, "--chat-template", "chatml", "--temp", "0", "-n", "2000",
                              "-t", "2"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errf, cwd=root)
        p.stdin.write(b"Tell me a long story\n")
        p.stdin.flush()
        first = b""
        deadline = time.monotonic() + 300
        while not first and time.monotonic() < deadline and p.poll() is None:
            if select.select([p.stdout], [], [], 1.0)[0]:
                first = os.read(p.stdout.fileno(), 65536)
        check(first != b"", "SIGINT: the first answer never started")
        p.send_signal(signal.SIGINT)
        try:
            rest, _ = p.communicate(b"And now?\n/quit\n", timeout=600)
        except subprocess.TimeoutExpired:
            p.kill()
            rest, _ = p.communicate()
            check(False, "SIGINT: infer-chat did not finish")
        errf.seek(0)
        err = errf.read().decode("utf-8", "replace")
    turns = STATS.findall(err)
    check(p.returncode == 0, f"SIGINT: exit {p.returncode}: {err[-300:]!r}")
    check(len(turns) == 2 and turns[0][4] == "cancelled" and int(turns[0][3]) < 2000,
          f"SIGINT: the first answer was not cancelled: {turns}")
    check(len(turns) == 2 and turns[1][4] != "cancelled" and int(turns[1][3]) > 0 and int(turns[1][1]) > 0,
          f"SIGINT: the next turn was not answered (from the cache): {turns}")
    check(len((first + rest).decode("utf-8", "replace").rstrip("\n")) > 0, "SIGINT: no answer text")

    _, err = run([tool("infer-chat"), "-m", model, "--chat-template", "vicuna", "-p", "x"], expect_rc=1)
    check("'vicuna'" in err and "chatml" in err and "zephyr" in err, f"unknown template: {err!r}")
    _, err = run([tool("infer-chat"), "-m", model, "-p", "x"], expect_rc=1)
    check("no chat template" in err and "--chat-template" in err and "chatml" in err, f"no template: {err!r}")
    _, err = run([tool("infer-chat"), "-m", model, "--chat-template", "chatml", "-c", "16", "-p", "x " * 40], expect_rc=1)
    check("context full" in err, f"full context: {err!r}")
    out, _ = run([tool("infer-chat"), "--chat-template-list"])
    check(out.split() == ["chatml", "gemma", "llama2", "llama3", "mistral-v3", "mistral-v7", "mistral-v7-tekken", "zephyr"],
          f"--chat-template-list: {out!r}")

    # --render and --chat-template-file, against jinja2.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import jinja_reference  # noqa: E402  (the same jinja2 configuration as the template comparison)
    env = jinja_reference.reference_environment()
    templates = os.path.join(root, "tests/data/chat_templates")
    qwen = os.path.join(templates, "Qwen-Qwen2.5-7B-Instruct.jinja")
    with open(os.path.join(templates, "conversations.json"), encoding="utf-8") as f:
        conversations = {c["name"]: c for c in json.load(f)}
    for name in ("multi_turn", "tools", "unicode"):
        case = conversations[name]
        conversation = {"messages": case["messages"], "add_generation_prompt": True}
        if "tools" in case:
            conversation["tools"] = case["tools"]
        conv_path = os.path.join(tmp, f"{name}.json")
        with open(conv_path, "w", encoding="utf-8") as f:
            json.dump(conversation, f, ensure_ascii=False)
        p = subprocess.run([tool("infer-chat"), "-m", model, "--render", conv_path, "--chat-template-file", qwen],
                           capture_output=True, timeout=600)
        with open(qwen, encoding="utf-8") as f:
            expected = env.from_string(f.read()).render(**jinja_reference.variables(
                {"bos_token": "<s>", "eos_token": "</s>"}, dict(case, add_generation_prompt=[True]), True))
        check(p.returncode == 0 and p.stdout.decode("utf-8") == expected and p.stderr == b"",
              f"--render {name}: exit {p.returncode}, {p.stdout[:200]!r} {p.stderr[-300:]!r}, expected {expected[:200]!r}")
    # Extra keywords reach the template (Qwen3's enable_thinking).
    qwen3 = os.path.join(templates, "Qwen-Qwen3-0.6B.jinja")
    conv_path = os.path.join(tmp, "thinking.json")
    with open(conv_path, "w", encoding="utf-8") as f:
        json.dump({"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": True, "enable_thinking": False}, f)
    out, _ = run([tool("infer-chat"), "-m", model, "--render", conv_path, "--chat-template-file", qwen3])
    check(out.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n"), f"--render enable_thinking=false: {out!r}")
    # Errors: one line on stderr, exit 1.
    gemma2 = os.path.join(templates, "google-gemma-2-2b-it.jinja")
    out, err = run([tool("infer-chat"), "-m", model, "--render", os.path.join(tmp, "multi_turn.json"), "--chat-template-file", gemma2],
                   expect_rc=1)
    check(out == "" and err.count("\n") == 1 and "raise_exception: System role not supported" in err, f"--render raising: {err!r}")
    broken = os.path.join(tmp, "broken.jinja")
    with open(broken, "w") as f:
        f.write("{% for m in messages %}\n{{ m.content }\n{% endfor %}")
    out, err = run([tool("infer-chat"), "-m", model, "--render", conv_path, "--chat-template-file", broken], expect_rc=1)
    check(out == "" and err.count("\n") == 1 and "line 2" in err, f"--render broken template: {err!r}")
    out, err = run([tool("infer-chat"), "-m", model, "--render", conv_path], expect_rc=1)
    check(out == "" and err.count("\n") == 1 and "no chat template" in err, f"--render without a template: {err!r}")
    run([tool("infer-chat"), "-m", model, "--chat-template", "chatml", "--chat-template-file", qwen, "-p", "x"], expect_rc=2)
    # A turn through the template file: the prompt is jinja2's rendering.
    out, err = run([tool("infer-chat"), "-m", model, "--chat-template-file", qwen, "--show-prompt", "--temp", "0", "-n", "4",
                    "-t", "2", "-p", "Hi"])
    with open(qwen, encoding="utf-8") as f:
        expected = env.from_string(f.read()).render(messages=[{"role": "user", "content": "Hi"}], tools=None, documents=None,
                                                     add_generation_prompt=True, bos_token="<s>", eos_token="</s>")
    check(err.startswith(expected + "infer-chat: turn 1:"), f"--chat-template-file turn: {err[:400]!r}")

for f in failures:
    print("FAIL:", f)
print(f"{checks - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
