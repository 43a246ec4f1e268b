#!/usr/bin/env python3
"""compressed-tensors checkpoints (the layout llm-compressor writes and vLLM serves) load and compute
exactly as libinfer's own INT8 / FP8 formats do on the same numbers:

  For each family infer-make-model writes (llama, gemma3, qwen2, qwen3, phi3), an F32 directory
  from scripts/gguf-to-hf is rewritten in numpy, for four schemes (the presets of
  quantization/quant_scheme.py of the compressed-tensors package, and vLLM's W8A16-FP8):
    INT8_W8A8     int8 weights, one scale per output channel, activations dynamic per token
                  ("int-quantized"), against --weight-type int8;
    W8A16         the same int8 weights without quantized activations, packed four to an int32
                  ("pack-quantized": pack_to_int32 with 8 bits, value + 128 per byte, and
                  weight_shape), against --weight-type w8a16;
    FP8 weight-only   float8_e4m3fn weights, one scale per output channel or per tensor, no
                  input_activations ("float-quantized"), against --weight-type fp8 / fp8-tensor;
    FP8_DYNAMIC   float8_e4m3fn weights per channel, FP8 activations dynamic per token, against
                  --weight-type fp8-dynamic (W8A8-FP8);
  every Linear weight of the decoder layers quantized (lm_head and the embeddings kept, as the
  recipes' ignore lists keep them), scales stored as BF16 or F32 in [rows, 1] / [1].
  (The FP8 preset, per-tensor weights with a static per-tensor input_scale, must compute as the
  FP8_DYNAMIC checkpoint of the same codes with the tensor's scale in every row: libinfer quantizes
  FP8 activations per token.)
  The quantized values are "snapped": each scale is a power of two and every row (per channel) or
  the matrix (per tensor) holds a code at the top of the range (±127, ±448), so the F32 directory
  holding scale x code is quantized back at load by libinfer's own quantizer (--weight-type
  int8 / fp8 / fp8-tensor) into exactly those codes and scales. Both directories must then give
  the same infer-perplexity output and bit-identical logits: the reader maps every tensor, scale and
  Q/K permutation of the checkpoint right, and the kernels run on it unchanged.

infer-quantize SNAPPED_DIR OUT int8|w8a16|fp8|fp8-tensor must write the numpy-made checkpoint's tensors
again: the same codes, the same scales (as F32), the preset's config fields. With an importance
matrix, int8 applies SmoothQuant: its factors are recomputed here from the formula, and the
smoothed model rebuilt here from smoothquant.json must compute as the checkpoint does (and, in
float, as the source). With --calib, GPTQ follows (its default): the same factors and scales, other
codes in most matrices, the same bytes on one and two threads (its arithmetic:
tests/unit/test_gptq.cpp).

(These comparisons are unrotated: INFER_WEIGHT_ROTATE=0 and infer-quantize --no-rotate.) From BF16
directories, infer-quantize int8 rotates every linear layer's input online by default: its
transform_config and Sylvester matrices are checked, and the checkpoint computes what --weight-type
int8 computes, rotated too, bit for bit.

An int-quantized INT8 checkpoint whose scheme has no input_activations computes weight-only (as
--weight-type w8a16), not as W8A8.

Online input rotations of any checkpoint (transform_config, type "hadamard"): a float checkpoint
whose weights numpy rotated computes the source's logits within float32 rounding, and not without
its transform_config; the transforms libinfer does not run are refused by name.

Then the refusals, each a one-line error naming the cause: an unknown quant_method, 8-bit weights
declared pack-quantized with quantized activations, INT8 groups with and without quantized
activations in one checkpoint, 4-bit ones not packed, group-wise 8-bit weights with quantized
activations (W8A16's groups load: hf_llmcompressor.py), block-wise or asymmetric 8-bit weights, a
quantized tensor without its scale or without a quantization_config, a non-zero zero point.
(INT4 W4A16 checkpoints: hf_int4.py.)

The safetensors files are written here byte by byte from the format's specification (numpy has no
float8 type to hand to the safetensors package).

usage: hf_compressed.py BIN_DIR LIBINFER_SO REPO_ROOT
"""
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_common import (checked, edit_config, edit_tensors, failures, finish, gguf_and_directory, gptq_twice, is_linear,  # noqa: E402
                       logits_of, make_args, perplexity, read_imatrix_dat, read_safetensors, rebuild_smoothed, refused, report,
                       run, smoothing_groups, calib_text, tool, worst_relative, write_safetensors)
import numpy as np  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402

# float8_e4m3fn, from its definition: sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0
# subnormal (m * 2^-9); S.1111.111 NaN; no infinities.
E4M3 = np.zeros(256)
for code in range(256):
    e, m = (code >> 3) & 15, code & 7
    v = m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
    E4M3[code] = np.nan if (code & 0x7F) == 0x7F else (-v if code & 0x80 else v)
FINITE = np.array([c for c in range(256) if not np.isnan(E4M3[c])])
ORDER = FINITE[np.argsort(E4M3[FINITE], kind="stable")]


def nearest_e4m3(x):
    """Codes of the e4m3 values nearest to x (clipped to ±448; ties either way: the codes define the weights)."""
    values = E4M3[ORDER]
    x = np.clip(x, -448, 448)
    i = np.clip(np.searchsorted(values, x), 1, len(values) - 1)
    lower = np.abs(x - values[i - 1]) <= np.abs(values[i] - x)
    return ORDER[np.where(lower, i - 1, i)].astype(np.uint8)


def pow2_at_least(x):
    return np.float32(2.0 ** np.ceil(np.log2(np.maximum(x, 1e-30))))


def snap(w, scheme):
    """(codes, scales as float32 [rows,1] or [1], the F32 weights scale x code)."""
    rows = w.shape[0]
    if scheme in ("int8", "w8a16"):
        s = np.array([pow2_at_least(np.abs(r).max() / 127) for r in w], dtype=np.float32)[:, None]
        q = np.clip(np.rint(w / s), -127, 127).astype(np.int8)
        top = np.abs(w).argmax(axis=1)
        q[np.arange(rows), top] = np.where(w[np.arange(rows), top] < 0, -127, 127)
        return q, s, (q.astype(np.float32) * s).astype(np.float32)
    per_channel = scheme in ("fp8", "fp8-dynamic")
    if per_channel:
        s = np.array([pow2_at_least(np.abs(r).max() / 448) for r in w], dtype=np.float32)[:, None]
    else:
        s = np.array([pow2_at_least(np.abs(w).max() / 448)], dtype=np.float32)
    scale = s if per_channel else s[:, None]
    codes = nearest_e4m3(w / scale)
    if per_channel:
        top = np.abs(w).argmax(axis=1)
        codes[np.arange(rows), top] = np.where(w[np.arange(rows), top] < 0, 0xFE, 0x7E)
    else:
        r, c = np.unravel_index(np.abs(w).argmax(), w.shape)
        codes[r, c] = 0xFE if w[r, c] < 0 else 0x7E
    return codes, s, (E4M3[codes] * scale).astype(np.float32)


def bf16_bytes(a):
    """float32 values that BF16 holds exactly, as BF16 bytes."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    assert np.all(bits & 0xFFFF == 0)
    return (bits >> 16).astype("<u2").tobytes()


def as_f32(dtype, data):
    if dtype == "F32":
        return np.frombuffer(data, dtype="<f4")
    assert dtype == "BF16"
    return (np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16).view(np.float32)


def compare_checkpoints(mine, theirs):
    """Differences between two checkpoints: names, dtypes, shapes, bytes (scales and the static
    input_scale compared as values: ours are F32; ours has no input_scale)."""
    diff = []
    names = set(theirs) - {k for k in theirs if k.endswith("input_scale")}
    if set(mine) != names:
        diff.append(f"tensors {sorted(set(mine) ^ names)[:4]}")
    for k in sorted(names & set(mine)):
        (da, sa, ba), (db, sb, bb) = mine[k], theirs[k]
        if k.endswith("weight_scale"):
            if sa != sb or not np.array_equal(as_f32(da, ba), as_f32(db, bb)):
                diff.append(f"{k}: scales differ")
        elif (da, sa, ba) != (db, sb, bb):
            diff.append(f"{k}: {da} {sa} vs {db} {sb}" + ("" if (da, sa) != (db, sb) else ", bytes differ"))
    return diff


def check_smoothing(src, imat, record, gemma, alpha=0.5):
    """The record against the formula: s_j = 2^round(alpha log2 rms_j - (1 - alpha) log2 max_i |W_ij|),
    rounded half away from zero, clamped to 2^±10 (1 where either is 0)."""
    weights = load_file(os.path.join(src, "model.safetensors"))
    rms = {k: np.sqrt(v) for k, v in read_imatrix_dat(imat).items()}
    bad = []
    expected = smoothing_groups(weights, gemma)
    if len(expected) != len(record["groups"]) or record["alpha"] != alpha:
        return [f"{len(record['groups'])} groups recorded (alpha {record['alpha']}), {len(expected)} expected"]
    for (stat, cols, norm, rows), g in zip(expected, record["groups"]):
        w = np.max(np.abs(np.concatenate([weights[c] for c in cols])), axis=0).astype(np.float64)
        a = rms[stat].astype(np.float64)
        with np.errstate(divide="ignore"):
            e = alpha * np.log2(a) - (1 - alpha) * np.log2(w)
        e = np.clip(np.sign(e) * np.floor(np.abs(e) + 0.5), -10, 10)
        e[(a <= 0) | (w <= 0)] = 0
        if g["multiplied_columns"] != cols or g.get("divided_norm") != norm or \
                (rows and (g.get("divided_rows"), g.get("row_range")) != (rows[0], [rows[1], rows[2]])):
            bad.append(f"group of {stat}: {g.get('divided_norm') or g.get('divided_rows')} / {g['multiplied_columns']}")
        elif list(e.astype(int)) != g["log2_scales"]:
            bad.append(f"{stat}: factors differ from the formula at {int(np.sum(e.astype(int) != np.array(g['log2_scales'])))} columns")
    return bad


def scheme_config(scheme, fmt=None):
    is_int = scheme in ("int8", "w8a16")
    weights = {"num_bits": 8, "type": "int" if is_int else "float",
               "strategy": "tensor" if scheme in ("fp8-tensor", "fp8-static") else "channel", "symmetric": True,
               "dynamic": False, "group_size": None, "observer": "minmax"}
    if scheme == "fp8-static":  # the FP8 preset
        acts = {"num_bits": 8, "type": "float", "strategy": "tensor", "symmetric": True, "dynamic": False,
                "observer": "static_minmax"}
    elif scheme in ("fp8", "fp8-tensor", "w8a16"):  # weight-only
        acts = None
    else:
        acts = {"num_bits": 8, "type": weights["type"], "strategy": "token", "symmetric": True, "dynamic": True}
    fmt = fmt or ("pack-quantized" if scheme == "w8a16" else "int-quantized" if is_int else "float-quantized")
    return {"quant_method": "compressed-tensors", "format": fmt,
            "quantization_status": "compressed", "ignore": ["lm_head"], "kv_cache_scheme": None,
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights, "input_activations": acts,
                                          "output_activations": None}}}


def sylvester(n):
    """Sylvester's Hadamard matrix, entries (-1)^popcount(i & j), from its definition (unnormalized)."""
    i = np.arange(n)
    bits = np.bitwise_and.outer(i, i)
    parity = np.zeros_like(bits)
    while bits.any():
        parity ^= bits & 1
        bits >>= 1
    return np.where(parity == 1, -1.0, 1.0)


def rotate_columns(w, block):
    """w R in float64: R block-diagonal, blocks of H_block / sqrt(block) over consecutive columns."""
    rows, n = w.shape
    h = sylvester(block) / np.sqrt(block)
    return (w.astype(np.float64).reshape(rows, n // block, block) @ h).reshape(rows, n)


def check_written_rotations(written):
    """infer-quantize int8's transform_config: every INT8 linear layer's input rotated by one
    "hadamard" scheme (blocks of the largest power of two dividing its columns, at most 4096), online
    (input) and folded (weight_input, inverse) over the same modules, each scheme's matrix stored
    once as Sylvester's +-1 entries."""
    tensors = read_safetensors(os.path.join(written, "model.safetensors"))
    with open(os.path.join(written, "config.json")) as f:
        groups = json.load(f)["quantization_config"].get("transform_config", {}).get("config_groups", {})
    bad, rotation = [], {}
    for name, s in groups.items():
        online = [a for a in s["apply"] if a["location"] == "input"]
        folded = [a for a in s["apply"] if a["location"] == "weight_input"]
        if s["type"] != "hadamard" or s["randomize"] or len(online) != 1 or len(folded) != 1 or \
                online[0]["targets"] != folded[0]["targets"] or not folded[0]["inverse"]:
            bad.append(f"scheme {name}: {s}")
            continue
        for m in online[0]["targets"]:
            rotation[m] = s["head_dim"]
        matrices = [k for k in tensors if k.endswith(f".{name}_input.weight")]
        if len(matrices) != 1:
            bad.append(f"scheme {name}: {len(matrices)} matrices stored")
            continue
        dt, shape, data = tensors[matrices[0]]
        if dt != "BF16" or shape != [s["head_dim"]] * 2 or \
                not np.array_equal(as_f32("BF16", data).reshape(shape), sylvester(s["head_dim"]).astype(np.float32)):
            bad.append(f"{matrices[0]}: {dt} {shape}, not Sylvester's matrix")
    for k, (dt, shape, _) in tensors.items():
        if is_linear(k) and dt == "I8":
            n = shape[1]
            want = min(n & -n, 4096)
            if rotation.get(k[:-len(".weight")]) != want:
                bad.append(f"{k}: rotation {rotation.get(k[:-len('.weight')])}, expected {want}")
    return bad


def write_pair(src, snapped_dir, compressed_dir, scheme, scale_dtype):
    """The snapped F32 directory and its compressed-tensors twin, both from src."""
    for d in (snapped_dir, compressed_dir):
        shutil.copytree(src, d)
    weights = load_file(os.path.join(src, "model.safetensors"))
    plain, packed = [], []
    for name in sorted(weights):
        w = weights[name]
        if not is_linear(name):
            data = np.ascontiguousarray(w).tobytes()
            dtype = {"float32": "F32", "float16": "F16"}[str(w.dtype)]
            plain.append((name, dtype, w.shape, data))
            packed.append((name, dtype, w.shape, data))
            continue
        codes, s, snapped = snap(w.astype(np.float32), "fp8-tensor" if scheme == "fp8-static" else scheme)
        plain.append((name, "F32", w.shape, snapped.tobytes()))
        if scheme == "w8a16":  # pack_to_int32, 8 bits: value v at bits 8 (i mod 4) of word i / 4, as v + 128
            words = (codes.astype(np.int32) + 128).astype(np.uint32).reshape(w.shape[0], -1, 4)
            words = (words[:, :, 0] | words[:, :, 1] << 8 | words[:, :, 2] << 16 | words[:, :, 3] << 24).astype("<u4")
            packed.append((name + "_packed", "I32", words.shape, words.tobytes()))
            packed.append((name + "_shape", "I64", (2,), np.array(w.shape, dtype="<i8").tobytes()))
        else:
            packed.append((name, "I8" if scheme == "int8" else "F8_E4M3", w.shape, codes.tobytes()))
        sb = bf16_bytes(s) if scale_dtype == "BF16" else s.astype("<f4").tobytes()
        packed.append((name[:-len("weight")] + "weight_scale", scale_dtype, s.shape, sb))
        if scheme == "fp8-static":  # the static activation scale (libinfer quantizes activations per token)
            packed.append((name[:-len("weight")] + "input_scale", "F32", (1,), np.float32([0.25]).tobytes()))
    write_safetensors(os.path.join(snapped_dir, "model.safetensors"), plain)
    write_safetensors(os.path.join(compressed_dir, "model.safetensors"), packed)
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    config["quantization_config"] = scheme_config(scheme)
    with open(os.path.join(compressed_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)


with tempfile.TemporaryDirectory() as tmp:
    def base_dir(label, make):
        return gguf_and_directory(tmp, label, ["--type", "f32"] + make)[1]

    schemes = (("int8", "BF16"), ("w8a16", "F32"), ("fp8", "F32"), ("fp8-tensor", "BF16"), ("fp8-dynamic", "BF16"))
    # The numpy-made INT8 checkpoints store unrotated weights: --weight-type int8 and infer-quantize
    # int8 must not rotate for these comparisons (INFER_WEIGHT_ROTATE=0, --no-rotate).
    os.environ["INFER_WEIGHT_ROTATE"] = "0"
    for prefix in ("ref", "gemma3", "qwen2", "qwen3", "phi3"):
        src = base_dir(prefix, make_args(prefix))
        for scheme, scale_dtype in schemes:
            label = f"{prefix} {scheme} (scales {scale_dtype})"
            try:
                snapped, compressed = os.path.join(tmp, f"{prefix}-{scheme}-f32"), os.path.join(tmp, f"{prefix}-{scheme}-ct")
                write_pair(src, snapped, compressed, scheme, scale_dtype)
                inspect = run([tool("infer-inspect"), compressed]).stdout
                want = "I8" if scheme in ("int8", "w8a16") else "F8_E4M3"
                if want not in inspect or "_scale" not in inspect:
                    failures.append(f"{label}: infer-inspect shows no {want} weights and scales")
                a, b = perplexity(snapped, scheme), perplexity(compressed)
                if a != b:
                    failures.append(f"{label}: infer-perplexity differs:\n  F32 --weight-type {scheme}: {a}\n  compressed: {b}")
                la, lb = logits_of(snapped, scheme), logits_of(compressed)
                if len(la) != len(lb) or any(x != y for x, y in zip(la, lb)):
                    rows = sum(1 for x, y in zip(la, lb) if x != y)
                    failures.append(f"{label}: logits differ in {rows} of {len(la)} rows")
                else:
                    # The quantization must have done something: the snapped weights are not the originals.
                    lp = logits_of(src)
                    if all(x == y for x, y in zip(lp, lb)):
                        failures.append(f"{label}: the compressed model computes exactly the unquantized one")
                    else:
                        checked.append(f"{label}: {len(la)} rows of logits and the perplexity identical to "
                                       f"--weight-type {scheme} on the same numbers")
                # infer-quantize writes the checkpoint from the snapped F32 directory: the same codes
                # and scales as the numpy-made one (scales as F32), the same config fields.
                written = os.path.join(tmp, f"{prefix}-{scheme}-written")
                run([tool("infer-quantize"), snapped, written, scheme, "-t", "2"] + (["--no-rotate"] if scheme == "int8" else []))
                mine, theirs = read_safetensors(os.path.join(written, "model.safetensors")), \
                    read_safetensors(os.path.join(compressed, "model.safetensors"))
                diff = compare_checkpoints(mine, theirs)
                with open(os.path.join(written, "config.json")) as f:
                    qc = json.load(f)["quantization_config"]
                want = scheme_config(scheme)
                g, w = qc["config_groups"]["group_0"], want["config_groups"]["group_0"]
                for key in ("quant_method", "format", "quantization_status"):
                    if qc.get(key) != want[key]:
                        diff.append(f"config {key} {qc.get(key)!r}, expected {want[key]!r}")
                for key in ("num_bits", "type", "strategy", "symmetric"):
                    if g["weights"].get(key) != w["weights"][key]:
                        diff.append(f"config weights.{key} {g['weights'].get(key)!r}, expected {w['weights'][key]!r}")
                if g["targets"] != ["Linear"] or ("lm_head.weight" in theirs) != ("lm_head" in qc["ignore"]):
                    diff.append(f"config targets {g['targets']} / ignore {qc['ignore']}")
                if diff:
                    failures.append(f"{label}: infer-quantize's checkpoint differs: " + "; ".join(diff[:5]))
                else:
                    checked.append(f"{label}: infer-quantize {scheme} writes the same {len(mine)} tensors, codes and "
                                   f"scales, and the preset's config")
            except Exception as e:  # one failing model must not hide the others
                failures.append(f"{label}: {e}")
    del os.environ["INFER_WEIGHT_ROTATE"]

    # infer-quantize from BF16 checkpoints (no snapping): the checkpoint computes what --weight-type
    # computes on the BF16 directory, bit for bit (int8: both rotated, and both not with --no-rotate /
    # INFER_WEIGHT_ROTATE=0).
    for prefix in ("ref", "phi3"):
        src = gguf_and_directory(tmp, prefix + "-bf16", ["--type", "bf16"] + make_args(prefix))[1]
        for scheme in ("int8", "w8a16", "fp8", "fp8-tensor", "fp8-dynamic"):
            label = f"{prefix} BF16 -> infer-quantize {scheme}"
            try:
                written = os.path.join(tmp, f"{prefix}-bf16-{scheme}")
                p = run([tool("infer-quantize"), src, written, scheme])
                if "linear layers quantized" not in p.stderr:
                    failures.append(f"{label}: no summary line: {p.stderr[-200:]!r}")
                la, lb = logits_of(src, scheme), logits_of(written)
                if la != lb or perplexity(src, scheme) != perplexity(written):
                    failures.append(f"{label}: the checkpoint computes differently from --weight-type {scheme}")
                else:
                    checked.append(f"{label}: {len(la)} rows of logits and the perplexity identical to --weight-type {scheme}")
                if scheme == "int8":
                    bad = check_written_rotations(written)
                    unrotated = os.path.join(tmp, f"{prefix}-bf16-int8-unrotated")
                    run([tool("infer-quantize"), src, unrotated, "int8", "--no-rotate"])
                    with open(os.path.join(unrotated, "config.json")) as f:
                        if "transform_config" in json.load(f)["quantization_config"]:
                            bad.append("--no-rotate wrote a transform_config")
                    os.environ["INFER_WEIGHT_ROTATE"] = "0"
                    lu = logits_of(src, scheme)
                    del os.environ["INFER_WEIGHT_ROTATE"]
                    if logits_of(unrotated) != lu:
                        bad.append("--no-rotate's checkpoint computes differently from INFER_WEIGHT_ROTATE=0 --weight-type int8")
                    if lu == la:
                        bad.append("the rotated and unrotated INT8 models compute the same logits")
                    if bad:
                        failures.append(f"{label} rotations: " + "; ".join(bad[:4]))
                    else:
                        checked.append(f"{label}: every linear layer's input rotated (transform_config, one Sylvester "
                                       f"matrix per size); --no-rotate as INFER_WEIGHT_ROTATE=0, and different")
            except Exception as e:
                failures.append(f"{label}: {e}")

    # Online input rotations (compressed-tensors' transform_config, type "hadamard", as llm-compressor's
    # QuIP and SpinQuant modifiers write it): a float checkpoint whose linear weights are stored as
    # W R, R the block Walsh-Hadamard matrix computed here in float64 from its definition, computes
    # the source's logits within float32 rounding (1e-3 of a row's largest) when its transform_config names R (one scheme in
    # blocks of 64 over "Linear" but down_proj and lm_head, one over the whole of down_proj's input
    # by a pattern; their matrices stored as +-1 BF16 and as normalized F32), and does not without.
    def rotated_twin(src, dst, transforms=True):
        shutil.copytree(src, dst)
        weights = load_file(os.path.join(src, "model.safetensors"))
        out = []
        for name in sorted(weights):
            w = weights[name]
            if is_linear(name):
                w = rotate_columns(w, w.shape[1] if name.endswith("down_proj.weight") else 64).astype(np.float32)
            out.append((name, {"float32": "F32", "float16": "F16"}[str(w.dtype)], w.shape, np.ascontiguousarray(w).tobytes()))
        if transforms:
            n_ff = weights["model.layers.0.mlp.down_proj.weight"].shape[1]
            q = "q_proj" if "model.layers.0.self_attn.q_proj.weight" in weights else "qkv_proj"  # Phi-3's is fused
            out.append((f"model.layers.0.self_attn.{q}.v_input.weight", "BF16", (64, 64), bf16_bytes(sylvester(64))))
            out.append(("model.layers.0.mlp.down_proj.d_input.weight", "F32", (n_ff, n_ff),
                        (sylvester(n_ff) / np.sqrt(n_ff)).astype("<f4").tobytes()))
        write_safetensors(os.path.join(dst, "model.safetensors"), out)
        if transforms:
            def scheme(targets, ignore, head_dim):
                return {"type": "hadamard", "randomize": False, "requires_grad": False, "head_dim": head_dim,
                        "precision": "torch.float32",
                        "apply": [{"targets": targets, "location": "input", "inverse": False, "ignore": ignore},
                                  {"targets": targets, "location": "weight_input", "inverse": True, "ignore": ignore}]}
            with open(os.path.join(dst, "config.json")) as f:
                config = json.load(f)
            config["quantization_config"] = {
                "quant_method": "compressed-tensors", "format": "dense", "quantization_status": "compressed",
                "config_groups": {}, "ignore": [],
                "transform_config": {"config_groups": {"v": scheme(["Linear"], ["lm_head", "re:.*down_proj$"], 64),
                                                       "d": scheme(["re:.*mlp\\.down_proj$"], [], None)}}}
            with open(os.path.join(dst, "config.json"), "w") as f:
                json.dump(config, f)

    for prefix in ("ref", "gemma3", "phi3"):
        label = f"{prefix} online Hadamard input rotations"
        try:
            src = os.path.join(tmp, prefix)
            twin, bare = os.path.join(tmp, prefix + "-rotated"), os.path.join(tmp, prefix + "-rotated-bare")
            rotated_twin(src, twin)
            rotated_twin(src, bare, transforms=False)
            l0, lr = logits_of(src), logits_of(twin)
            within, without = worst_relative(lr, l0), worst_relative(logits_of(bare), l0)
            if within > 1e-3 or without < 1e-1:
                failures.append(f"{label}: logits within {within:.3g} of the source's with the transform_config "
                                f"(bound 1e-3, as the smoothed Gemma's), {without:.3g} without (must be over 1e-1)")
            else:
                checked.append(f"{label}: the rotated float checkpoint's logits within {within:.2g} of the source's "
                               f"(without its transform_config: {without:.2g})")
        except Exception as e:
            failures.append(f"{label}: {e}")

    # The transforms libinfer refuses, each by name.
    good = os.path.join(tmp, "ref-rotated")

    def transforms(fn):
        return edit_config(lambda c: fn(c["quantization_config"]["transform_config"]["config_groups"]))

    def only_q(g):
        g["v"]["apply"][0]["targets"] = ["re:.*q_proj$"]
    refused(tmp, good, "random-hadamard", transforms(lambda g: g["v"].update(type="random-hadamard")),
            "transform type 'random-hadamard' is not supported")
    refused(tmp, good, "randomized permutation", transforms(lambda g: g["v"].update(randomize=True)),
            "randomized Hadamard transforms")
    refused(tmp, good, "online output transform", transforms(lambda g: g["d"]["apply"][0].update(location="output")),
            "online 'output' transforms are not supported")
    refused(tmp, good, "head_dim not a power of two", transforms(lambda g: g["v"].update(head_dim=48)),
            "head_dim must be a power of two")
    refused(tmp, good, "blocks wider than the input", transforms(lambda g: g["v"].update(head_dim=1024)),
            "rotates blocks of 1024 of its 256 input columns")
    refused(tmp, good, "two input transforms of a module", transforms(lambda g: g["d"]["apply"][0].update(targets=["Linear"])),
            "two online input transforms")
    refused(tmp, good, "q, k and v rotated apart", transforms(only_q), "rotate their shared input differently")
    flipped = sylvester(64)
    flipped[3, 5] = -flipped[3, 5]
    refused(tmp, good, "a transform matrix that is not Sylvester's", edit_tensors(
        lambda ts: [(n, d, s, bf16_bytes(flipped)) if n.endswith("v_input.weight") else (n, d, s, b) for n, d, s, b in ts]),
            "is not Sylvester's Hadamard matrix (entry [3, 5])")

    # The FP8 preset (per-tensor weights, a static input_scale) runs as W8A8-FP8 with per-token
    # activations: as the FP8_DYNAMIC checkpoint of the same codes with the tensor scale in every row.
    for prefix in ("ref", "phi3"):
        label = f"{prefix} FP8 (static) preset"
        try:
            src = os.path.join(tmp, prefix)
            snapped, static = os.path.join(tmp, f"{prefix}-fp8s-f32"), os.path.join(tmp, f"{prefix}-fp8s-ct")
            write_pair(src, snapped, static, "fp8-static", "F32")
            dynamic = os.path.join(tmp, f"{prefix}-fp8s-as-dynamic")
            shutil.copytree(static, dynamic)
            tensors = read_safetensors(os.path.join(static, "model.safetensors"))
            out = []
            for k, (dt, shape, data) in sorted(tensors.items()):
                if k.endswith("input_scale"):
                    continue
                if k.endswith("weight_scale"):
                    rows = tensors[k[:-len("_scale")]][1][0]
                    data, shape = data * rows, [rows, 1]
                out.append((k, dt, shape, data))
            write_safetensors(os.path.join(dynamic, "model.safetensors"), out)
            with open(os.path.join(dynamic, "config.json")) as f:
                config = json.load(f)
            config["quantization_config"] = scheme_config("fp8-dynamic")
            with open(os.path.join(dynamic, "config.json"), "w") as f:
                json.dump(config, f)
            ls, ld, lw = logits_of(static), logits_of(dynamic), logits_of(snapped, "fp8-tensor")
            if ls != ld:
                failures.append(f"{label}: its logits differ from FP8_DYNAMIC's on the same codes")
            elif ls == lw:
                failures.append(f"{label}: it computes as weight-only FP8 (activations not quantized)")
            else:
                checked.append(f"{label}: computes as FP8_DYNAMIC on the same codes ({len(ls)} rows of logits), "
                               f"not as weight-only FP8")
        except Exception as e:
            failures.append(f"{label}: {e}")

    # INT8 weights declared without quantized activations compute weight-only, even int-quantized
    # (unpacked): as --weight-type w8a16 on the same numbers, not as W8A8.
    for prefix in ("ref", "gemma3"):
        label = f"{prefix} int-quantized INT8 without input_activations"
        try:
            snapped, w8a8 = os.path.join(tmp, f"{prefix}-int8-f32"), os.path.join(tmp, f"{prefix}-int8-ct")
            weight_only = os.path.join(tmp, f"{prefix}-int8-weight-only")
            shutil.copytree(w8a8, weight_only)
            with open(os.path.join(weight_only, "config.json")) as f:
                config = json.load(f)
            config["quantization_config"]["config_groups"]["group_0"]["input_activations"] = None
            with open(os.path.join(weight_only, "config.json"), "w") as f:
                json.dump(config, f)
            lw, l16, l8 = logits_of(weight_only), logits_of(snapped, "w8a16"), logits_of(snapped, "int8")
            if lw != l16:
                failures.append(f"{label}: its logits differ from --weight-type w8a16's on the same numbers")
            elif lw == l8:
                failures.append(f"{label}: it computes as W8A8")
            else:
                checked.append(f"{label}: computes as --weight-type w8a16 ({len(lw)} rows of logits), not as W8A8")
        except Exception as e:
            failures.append(f"{label}: {e}")

    # Refusals: one line on stderr naming the cause, a non-zero exit, no crash.
    src = base_dir("small", ["--n-embd", "64", "--n-layer", "1", "--n-head", "4", "--n-head-kv", "2", "--n-ff", "128",
                             "--ctx", "256", "--seed", "3"])
    good_snapped, good = os.path.join(tmp, "bad-base-f32"), os.path.join(tmp, "bad-base")
    write_pair(src, good_snapped, good, "int8", "F32")

    def groups(c):
        return c["quantization_config"]["config_groups"]["group_0"]

    refused(tmp, good, "quant_method gptq", edit_config(lambda c: c["quantization_config"].update(quant_method="gptq")),
            "quant_method 'gptq' is not supported")
    refused(tmp, good, "pack-quantized 8-bit W8A8", edit_config(lambda c: c["quantization_config"].update(format="pack-quantized")),
            "8-bit pack-quantized weights are supported as int weights without quantized activations (W8A16) only")

    def mixed_int8(c):
        g = c["quantization_config"]["config_groups"]
        g["group_1"] = json.loads(json.dumps(g["group_0"]))
        g["group_1"]["input_activations"] = None
        g["group_0"]["targets"], g["group_1"]["targets"] = ["re:.*self_attn.*"], ["re:.*mlp.*"]
    refused(tmp, good, "INT8 W8A8 and W8A16 groups", edit_config(mixed_int8),
            "INT8 weights both with quantized activations (W8A8) and without (W8A16)")
    refused(tmp, good, "4-bit weights not packed", edit_config(lambda c: groups(c)["weights"].update(num_bits=4)),
            "4-bit weights must be stored pack-quantized")
    refused(tmp, good, "W8A8 in groups", edit_config(lambda c: groups(c)["weights"].update(strategy="group", group_size=128)),
            "8-bit weights in groups are supported as int weights without quantized activations (W8A16) only")
    refused(tmp, good, "block strategy", edit_config(lambda c: groups(c)["weights"].update(strategy="block")),
            "strategy 'block' is not supported")
    refused(tmp, good, "asymmetric", edit_config(lambda c: groups(c)["weights"].update(symmetric=False)), "asymmetric")
    refused(tmp, good, "frozen status", edit_config(lambda c: c["quantization_config"].update(quantization_status="frozen")),
            "quantization_status 'frozen'")
    refused(tmp, good, "no quantization_config", edit_config(lambda c: c.pop("quantization_config")), "has no compressed-tensors quantization_config")
    refused(tmp, good, "missing scale", edit_tensors(lambda ts: [t for t in ts if not t[0].endswith("down_proj.weight_scale")]),
            "has no weight_scale tensor")
    refused(tmp, good, "non-zero zero point", edit_tensors(lambda ts: ts + [("model.layers.0.mlp.up_proj.weight_zero_point", "I8",
                                                                 [128, 1], bytes([1]) * 128)]),
            "non-zero zero point")
    refused(tmp, good, "scale of a float weight", edit_tensors(lambda ts: ts + [("model.norm.weight_scale", "F32", [1], bytes(4))]),
            "belongs to no INT8 / FP8 / INT4 weight")
    refused(tmp, good, "scales of the wrong count", edit_tensors(
        lambda ts: [(n, d, [3, 1], b[:12]) if n.endswith("o_proj.weight_scale") else (n, d, s, b) for n, d, s, b in ts]),
            "3 scales for 64 rows")

    # --keep: the matching linear layers stay in their type and join the config's ignore list.
    src = os.path.join(tmp, "ref-bf16")
    written = os.path.join(tmp, "ref-bf16-keep")
    run([tool("infer-quantize"), src, written, "int8", "--keep", "model.layers.0.*"])
    tensors = read_safetensors(os.path.join(written, "model.safetensors"))
    with open(os.path.join(written, "config.json")) as f:
        ignore = json.load(f)["quantization_config"]["ignore"]
    kept = sorted(k[:-len(".weight")] for k, v in tensors.items() if is_linear(k) and v[0] == "BF16")
    quantized = [k for k, v in tensors.items() if is_linear(k) and v[0] == "I8"]
    if not kept or any(not k.startswith("model.layers.0.") for k in kept) or sorted(ignore) != sorted(["lm_head"] + kept) \
            or not quantized or any(k.startswith("model.layers.0.") for k in quantized):
        failures.append(f"--keep: kept {kept}, ignore {ignore}, {len(quantized)} quantized")
    else:
        checked.append(f"--keep 'model.layers.0.*': {len(kept)} layers kept BF16 and listed in ignore, {len(quantized)} INT8")
    logits_of(written)  # and it loads

    # SmoothQuant (int8 with --imatrix / --calib): powers of two folded into the norms, the columns
    # of the matrices reading them, and up_proj's rows / down_proj's columns; smoothquant.json
    # records them. Checked: the factors follow from the importance matrix and the source weights
    # by the formula (recomputed here in float64); the smoothed float model, rebuilt here from the
    # record, computes the source's logits exactly (Gemma's 1 + w norms: within rounding); the
    # checkpoint computes what --weight-type int8 computes on that rebuilt model, bit for bit; and
    # --calib gives the same checkpoint as --imatrix of infer-imatrix over the same text.
    calib = ["-c", "64", "--chunks", "4"]
    for prefix in ("ref", "gemma3", "qwen2", "qwen3", "phi3"):
        label = f"{prefix} SmoothQuant"
        try:
            src = os.path.join(tmp, prefix)
            imat = os.path.join(tmp, prefix + ".imatrix.dat")
            run([tool("infer-imatrix"), "-m", src, "-f", calib_text, "-o", imat, "--output-format", "dat"] + calib)
            written = os.path.join(tmp, prefix + "-smooth")
            run([tool("infer-quantize"), src, written, "int8", "--imatrix", imat])
            also = os.path.join(tmp, prefix + "-smooth-calib")
            calib_args = ["--calib", calib_text, "--calib-ctx", "64", "--calib-chunks", "4"]
            run([tool("infer-quantize"), src, also, "int8", "--no-gptq"] + calib_args)
            mine = read_safetensors(os.path.join(written, "model.safetensors"))
            if read_safetensors(os.path.join(also, "model.safetensors")) != mine:
                failures.append(f"{label}: --calib --no-gptq and --imatrix of the same run write different checkpoints")
            with open(os.path.join(written, "smoothquant.json")) as f:
                record = json.load(f)
            bad = check_smoothing(src, imat, record, prefix == "gemma3")
            # GPTQ (--calib's default): the same factors, other codes in most matrices, the same
            # scales (max|w| / 127 of the smoothed rows), the same bytes on one and two threads.
            more, t1 = gptq_twice(src, os.path.join(tmp, prefix + "-smooth-gptq"), "int8", calib_args, "smoothquant.json",
                                  record["groups"])
            bad += more
            codes = [k for k in t1 if k.endswith("_proj.weight") and t1[k][0] == "I8"]
            changed = sum(1 for k in codes if t1[k] != mine[k])
            if not codes or changed < len(codes) // 2 or any(t1[k[:-7] + ".weight_scale"] != mine[k[:-7] + ".weight_scale"] for k in codes):
                bad.append(f"GPTQ changed the codes of {changed} of {len(codes)} matrices only, or a scale")
            smoothed = os.path.join(tmp, prefix + "-smoothed-f32")
            rebuild_smoothed(src, smoothed, record, prefix == "gemma3")
            ls, lw, l0 = logits_of(smoothed, "int8"), logits_of(written), logits_of(src)
            if ls != lw:
                bad.append("the checkpoint's logits differ from --weight-type int8 on the rebuilt smoothed model")
            lf = logits_of(smoothed)
            if prefix != "gemma3" and lf != l0:
                bad.append("the smoothed float model's logits differ from the source's")
            elif prefix == "gemma3":
                # Gemma stores its norms as w for 1 + w: (1 + w) / s - 1 rounds in float32, by up to
                # 2^-24 s / |1 + w| of the weight for s up to 2^10. Relative to the row's largest logit.
                worst = worst_relative(lf, l0)
                checked.append(f"gemma3 smoothed float model: logits within {worst:.2g} of the row's largest (bound 1e-3)")
                if worst > 1e-3:
                    bad.append(f"the smoothed float model moves a logit by {worst:.3g} of the row's largest")
            n = sum(len(g["log2_scales"]) for g in record["groups"])
            exact = "float within rounding" if prefix == "gemma3" else "exact in float"
            report(label, bad, f"{len(record['groups'])} groups, {n} power-of-two factors as the formula gives; "
                   f"{exact}; the checkpoint equals --weight-type int8 on the smoothed model; GPTQ: "
                   f"{changed} of {len(codes)} matrices recoded, the same scales, one and two threads alike")
        except Exception as e:
            failures.append(f"{label}: {e}")

    # W8A16 and FP8 with --calib: GPTQ alone (nothing smoothed: the norms and every float tensor
    # written as they came), the scales of the plain quantizer (max|w| / 127 or / 448 per row, or the
    # matrix's), other codes in most matrices, the same bytes on one and two threads; the checkpoint
    # loads.
    for prefix, scheme in (("ref", "w8a16"), ("gemma3", "w8a16"), ("ref", "fp8"), ("gemma3", "fp8-tensor"),
                           ("phi3", "fp8-dynamic")):
        label = f"{prefix} {scheme} GPTQ"
        try:
            src = os.path.join(tmp, prefix)
            plain = os.path.join(tmp, f"{prefix}-{scheme}-plain")
            run([tool("infer-quantize"), src, plain, scheme])
            g1, g2 = os.path.join(tmp, f"{prefix}-{scheme}-gptq-1"), os.path.join(tmp, f"{prefix}-{scheme}-gptq-2")
            calib_args = ["--calib", calib_text, "--calib-ctx", "64", "--calib-chunks", "4"]
            run([tool("infer-quantize"), src, g1, scheme, "-t", "1"] + calib_args)
            run([tool("infer-quantize"), src, g2, scheme, "-t", "2"] + calib_args)
            t0, t1 = read_safetensors(os.path.join(plain, "model.safetensors")), read_safetensors(os.path.join(g1, "model.safetensors"))
            bad = []
            if t1 != read_safetensors(os.path.join(g2, "model.safetensors")):
                bad.append("the checkpoints of one and two threads differ")
            packed = [k for k in t1 if k.endswith("weight_packed") or (k.endswith("_proj.weight") and t1[k][0] == "F8_E4M3")]
            changed = sum(1 for k in packed if t1[k] != t0[k])
            if set(t1) != set(t0) or any(t1[k] != t0[k] for k in t1 if k not in packed):
                bad.append("a tensor other than the codes differs from the plain quantizer's (a scale, a norm)")
            if not packed or changed < len(packed) // 2:
                bad.append(f"GPTQ changed the codes of {changed} of {len(packed)} matrices only")
            with open(os.path.join(g1, "gptq.json")) as f:
                record = json.load(f)
            if "GPTQ" not in record["method"] or not record.get("gptq"):
                bad.append(f"GPTQ's record: {record}")
            lg, lp = logits_of(g1), logits_of(plain)
            if lg == lp:
                bad.append("GPTQ's checkpoint computes exactly the plain one")
            report(label, bad, f"{changed} of {len(packed)} matrices recoded, the same scales and float tensors, "
                   f"one and two threads alike, loads ({len(lg)} rows of logits)")
        except Exception as e:
            failures.append(f"{label}: {e}")

    # infer-quantize's refusals.
    for label, args, expect in (
            ("a GGUF input", [os.path.join(tmp, "ref-bf16.gguf"), os.path.join(tmp, "x"), "int8"], "Hugging Face model directory"),
            ("an existing output", [src, src, "fp8"], "exists and is not an empty directory"),
            ("a quantized input", [good, os.path.join(tmp, "y"), "fp8"], "quantized already"),
            ("--pure with int8", [src, os.path.join(tmp, "z"), "int8", "--pure"], "takes --keep, -t and (int8, int4) --imatrix"),
            ("--imatrix with fp8", [src, os.path.join(tmp, "z"), "fp8", "--imatrix", calib_text],
             "fp8 takes --calib (GPTQ) only"),
            ("--no-gptq with w8a16", [src, os.path.join(tmp, "z"), "w8a16", "--calib", calib_text, "--no-gptq"],
             "w8a16 takes --calib (GPTQ) only")):
        p = run([tool("infer-quantize")] + args, ok=False)
        if p.returncode == 0 or p.returncode < 0 or expect not in p.stderr:
            failures.append(f"infer-quantize refusal '{label}': exit {p.returncode}, stderr {p.stderr.strip()[-300:]!r}")
        else:
            checked.append(f"infer-quantize refusal '{label}': {p.stderr.strip().splitlines()[0][:140]}")

finish()
