"""What the Hugging Face directory tests share (hf_directory.py, hf_compressed.py, hf_int4.py): their command
line (BIN_DIR LIBINFER_SO REPO_ROOT), the Python binding on that library, the Python packages of
scripts/hf-python-deps (numpy, safetensors) on sys.path, running tools, the test models' arguments,
directories written by scripts/gguf-to-hf, safetensors files read and written from the format's
definition, importance matrices, the smoothing groups and their record, and the report (one line per check, failures on stderr,
exit 1 on any)."""
import atexit
import json
import os
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile

bin_dir, lib_path, root = sys.argv[1:4]
os.environ["LIBINFER_LIBRARY"] = lib_path
sys.path.insert(0, os.path.join(root, "bindings/python/src"))
import libinfer  # noqa: E402

models = os.path.join(root, "tests/data/models")
text_path = os.path.join(root, "tests/data/text/corpus.txt")
# The start of the corpus, up to a line end before 24 KB, for the runs that read a few chunks
# (perplexity over 3 of 128 tokens, calibration over 4 of 64): the tools tokenize the whole file.
_short_dir = tempfile.mkdtemp(prefix="libinfer-hf-text-")
atexit.register(shutil.rmtree, _short_dir, True)
calib_text = os.path.join(_short_dir, "corpus-start.txt")
with open(text_path, "rb") as _f, open(calib_text, "wb") as _out:
    _start = _f.read(24000)
    _out.write(_start[: _start.rindex(b"\n") + 1])
failures = []
checked = []


def tool(name):
    return os.path.join(bin_dir, name)


def run(args, env=None, ok=True):
    """The finished process; with ok, a non-zero exit raises with the end of its stderr."""
    p = subprocess.run(args, capture_output=True, text=True, timeout=900, cwd=root, env=env)
    if ok and p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {p.returncode}: {p.stderr.strip()[-800:]}")
    return p


deps = run([os.path.join(root, "scripts/hf-python-deps")]).stdout.strip().splitlines()[-1]
sys.path.insert(0, deps)
convert_env = dict(os.environ, PYTHONPATH=deps)
import numpy as np  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402


def make_args(prefix):
    """infer-make-model's arguments of a reference model (tests/data/models/*make-model.args)."""
    name = "make-model.args" if prefix == "ref" else f"{prefix}-make-model.args"
    with open(os.path.join(models, name)) as f:
        return shlex.split(f.read())


def gguf_and_directory(tmp, label, make, extra=()):
    """A GGUF made by infer-make-model with `make`, and the directory scripts/gguf-to-hf writes from it."""
    gguf = os.path.join(tmp, label + ".gguf")
    run([tool("infer-make-model"), "-o", gguf] + list(make))
    directory = os.path.join(tmp, label)
    run([sys.executable, os.path.join(root, "scripts/gguf-to-hf"), gguf, directory] + list(extra), env=convert_env)
    return gguf, directory


def write_safetensors(path, tensors):
    """tensors: [(name, dtype string, shape, bytes)] in the format's layout: an 8-byte header length,
    the JSON header (dtype, shape, data_offsets per tensor), then the data."""
    header, offset = {}, 0
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for _, _, _, data in tensors:
            f.write(data)


def read_safetensors(path):
    """{name: (dtype, shape, bytes)}, read from the format's definition."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in header.items()}


def read_imatrix_dat(path):
    """llama.cpp's legacy imatrix file: {name: per-column mean square (values / ncall, float32)}."""
    out = {}
    with open(path, "rb") as f:
        for _ in range(struct.unpack("<i", f.read(4))[0]):
            name = f.read(struct.unpack("<i", f.read(4))[0]).decode()
            ncall, nval = struct.unpack("<ii", f.read(8))
            out[name] = np.frombuffer(f.read(4 * nval), dtype="<f4") / np.float32(ncall)
    return out


def smoothing_groups(weights, gemma):
    """Per layer, SmoothQuant's three groups as the writer documents them: (statistic, columns
    multiplied, norm divided or None, (matrix, first row, end row) divided or None)."""
    layers = sorted({int(k.split(".")[2]) for k in weights if k.startswith("model.layers.")})
    groups = []
    for i in layers:
        p, b = f"model.layers.{i}.", f"blk.{i}."
        if p + "self_attn.qkv_proj.weight" in weights:
            groups.append((b + "attn_qkv.weight", [p + "self_attn.qkv_proj.weight"], p + "input_layernorm.weight", None))
            gu = weights[p + "mlp.gate_up_proj.weight"]
            groups.append((b + "ffn_up.weight", [p + "mlp.gate_up_proj.weight"],
                           p + ("pre_feedforward_layernorm.weight" if gemma else "post_attention_layernorm.weight"), None))
            up = (p + "mlp.gate_up_proj.weight", gu.shape[0] // 2, gu.shape[0])
        else:
            groups.append((b + "attn_q.weight", [p + f"self_attn.{m}_proj.weight" for m in "qkv"], p + "input_layernorm.weight", None))
            groups.append((b + "ffn_gate.weight", [p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"],
                           p + ("pre_feedforward_layernorm.weight" if gemma else "post_attention_layernorm.weight"), None))
            up = (p + "mlp.up_proj.weight", 0, weights[p + "mlp.up_proj.weight"].shape[0])
        groups.append((b + "ffn_down.weight", [p + "mlp.down_proj.weight"], None, up))
    return groups


def rebuild_smoothed(src, dst, record, gemma):
    """The source with the record's factors applied, in F32 (the smoothed float model)."""
    weights = {k: v.astype(np.float32) for k, v in load_file(os.path.join(src, "model.safetensors")).items()}
    for g in record["groups"]:
        s = np.ldexp(np.float32(1), np.array(g["log2_scales"])).astype(np.float32)
        for c in g["multiplied_columns"]:
            weights[c] = weights[c] * s[None, :]
        if "divided_norm" in g:
            n = weights[g["divided_norm"]]
            weights[g["divided_norm"]] = ((np.float32(1) + n) / s - np.float32(1)) if gemma else n / s
        else:
            m, (b, e) = weights[g["divided_rows"]], g["row_range"]
            m[b:e] = m[b:e] / s[:, None]
    shutil.copytree(src, dst)
    write_safetensors(os.path.join(dst, "model.safetensors"),
                      [(k, "F32", v.shape, np.ascontiguousarray(v).tobytes()) for k, v in sorted(weights.items())])


LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "qkv_proj", "gate_up_proj")


def gptq_twice(src, out_prefix, scheme, calib_args, record_name, groups_without):
    """SRC quantized to SCHEME with GPTQ (--calib's default) on one and on two threads: the problems
    found (the two checkpoints must be byte-identical, the record must note GPTQ and hold the
    factors `groups_without` holds) and the first checkpoint's tensors."""
    g1, g2 = out_prefix + "-1", out_prefix + "-2"
    run([tool("infer-quantize"), src, g1, scheme, "-t", "1"] + calib_args)
    run([tool("infer-quantize"), src, g2, scheme, "-t", "2"] + calib_args)
    bad = []
    t1 = read_safetensors(os.path.join(g1, "model.safetensors"))
    if t1 != read_safetensors(os.path.join(g2, "model.safetensors")):
        bad.append("GPTQ's checkpoints on one and two threads differ")
    with open(os.path.join(g1, record_name)) as f:
        record = json.load(f)
    if "GPTQ" not in record["method"] or not record.get("gptq") or \
            [g["log2_scales"] for g in record["groups"]] != [g["log2_scales"] for g in groups_without]:
        bad.append(f"GPTQ's record: {record['method']!r}, {record.get('gptq')}, or other factors than without it")
    logits_of(g1)  # and it loads
    return bad, t1


def is_linear(name):
    return name.startswith("model.layers.") and name.endswith(".weight") and name.split(".")[-2] in LINEAR


with open(text_path) as f:
    prompt = f.read()[:600]


def logits_of(model, weight_type=None):
    """The prompt's logits (every position) through the Python binding, greedy, 2 threads."""
    with libinfer.Engine(model, threads=2, weight_type=weight_type) as engine:
        c = engine.generate(prompt, max_tokens=1, temperature=0, prompt_logprobs_from=1, prompt_logits=True)
        return c.prompt_logits


def worst_relative(a, b):
    """Over the rows of two logit matrices, the largest |a - b| of a row relative to the row's largest |b|."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float((np.abs(a - b).max(axis=1) / np.abs(b).max(axis=1)).max())


def perplexity(model, weight_type=None):
    """infer-perplexity's output lines (timings left out) over 3 chunks of 128 tokens."""
    args = [tool("infer-perplexity"), "-m", model, "-t", "2", "-f", calib_text, "-c", "128", "-b", "128", "--chunks", "3"]
    if weight_type:
        args += ["--weight-type", weight_type]
    out = run(args).stdout
    return [line for line in out.splitlines() if "scored in" not in line and line.strip()]


def refused(tmp, good, label, edit, expect):
    """A copy of the directory `good` changed by edit(dir) must be refused by infer-perplexity: a non-zero
    exit (no crash) and `expect` in its one-line error."""
    d = os.path.join(tmp, "bad-" + label.replace(" ", "-"))
    shutil.copytree(good, d)
    edit(d)
    p = run([tool("infer-perplexity"), "-m", d, "-f", calib_text, "-c", "64", "--chunks", "1"], ok=False)
    err = p.stderr.strip()
    if p.returncode in (0,) or p.returncode < 0 or expect not in err:
        failures.append(f"refusal '{label}': exit {p.returncode}, stderr {err[-300:]!r} (expected '{expect}')")
    else:
        checked.append(f"refusal '{label}': {err.splitlines()[-1][:160]}")


def edit_config(fn):
    """An edit of a directory: fn(config) changes its config.json."""
    def edit(d):
        with open(os.path.join(d, "config.json")) as f:
            config = json.load(f)
        fn(config)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(config, f)
    return edit


def edit_tensors(fn):
    """An edit of a directory: fn([(name, dtype, shape, bytes)]) in file order rewrites model.safetensors."""
    def edit(d):
        w = os.path.join(d, "model.safetensors")
        with open(w, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
            data = f.read()
        tensors = [(k, v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
                   for k, v in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0])]
        write_safetensors(w, fn(tensors))
    return edit


def report(label, bad, ok):
    """One case's outcome: its first problems as a failure, or `ok` as what was checked."""
    if bad:
        failures.append(f"{label}: " + "; ".join(bad[:4]))
    else:
        checked.append(f"{label}: {ok}")


def finish():
    for line in checked:
        print(line)
    if failures:
        print("\n".join(failures), file=sys.stderr)
        sys.exit(1)
    print(f"{len(checked)} passed, 0 failed")
