#!/usr/bin/env python3
"""compressed-tensors INT4 W4A16 checkpoints ("pack-quantized": llm-compressor's W4A16 and W4A16_ASYM
presets, which vLLM serves) load and compute as libinfer's own INT4 format does, and infer-quantize
writes them:

  For each family infer-make-model writes (llama, gemma3, qwen2, qwen3, phi3), an F32 directory from
  scripts/gguf-to-hf is rewritten here in numpy from compressed-tensors' definitions
  (compressors/pack_quantized: pack_to_int32 puts element i at bits 4 (i mod 8) of int32 word i / 8
  as v + 8, zero points packed the same way along the rows; forward.py dequantizes (v - zp) * scale
  per group of columns). The weights are "snapped": each group's scale a power of two and its codes
  reaching the ends of the range, so that the F32 directory holding the dequantized values has one
  best quantization, the checkpoint's:
    W4A16 (symmetric, groups of 128): the checkpoint and `--weight-type int4` on the snapped F32
      directory give identical logits and perplexity (the reader maps the packing, the group scales
      and the Q/K permutation right, and the kernels run on it unchanged);
    every group size (32, 64, 128), symmetric and not: `infer-quantize SNAPPED OUT int4 --group G
      [--asym]` writes the numpy checkpoint's tensors again, byte for byte, and the checkpoint's
      logits stay within float rounding of the snapped F32 model's (a misplaced scale or zero point
      moves them by far more); the same for one scale per row (the channel strategy), which
      infer-quantize does not write.
  From BF16 sources, infer-quantize int4 stores the scales as BF16, each group's codes are the
  nearest for its scale, and the checkpoint loads.

AWQ (int4 with --imatrix / --calib): power-of-two factors folded into the norms, the columns of the
matrices reading them and up_proj's rows; awq.json records them with the chosen alpha. Checked: the
factors follow from the importance matrix by the formula for the recorded alpha (float64 here), the
alpha is on the grid, the smoothed float model rebuilt from the record computes the source's logits
(Gemma: within rounding), and --calib --no-gptq writes what --imatrix of the same text writes.
GPTQ (--calib's default): the same factors, the codes of most matrices changed, the same bytes on
one and two threads, and the checkpoint loads (its arithmetic: tests/unit/test_gptq.cpp); the same
for --no-actorder (column order; activation order, the default, declares actorder "weight" in the
config and the record, and --actorder says the same).

Mixed precision (int4 --w8a16 GLOB): each matrix byte for byte what w8a16 or int4 alone writes,
group_1 naming the 8-bit modules, the logits against the checkpoint dequantized in numpy; with
--calib, the 8-bit matrices take their group's AWQ factors without joining its search, and GPTQ
runs on each of them (a group of 8-bit matrices alone included).

W8A16 in groups (w8a16 --group 32 / 64, the W8A16 preset's layout): codes and scales exactly those
of the quantizer written in numpy here, strategy "group" in the config, logits within float
rounding of the dequantized F32 model; with --calib, GPTQ recodes, one and two threads alike.

Then the refusals, each one line naming the cause.

usage: hf_int4.py BIN_DIR LIBINFER_SO REPO_ROOT
"""
import fnmatch
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

def pack_rows(v):
    """compressed-tensors' pack_to_int32 of int4 values v [rows, n] (n a multiple of 8) along the columns."""
    u = (v.astype(np.int64) + 8) & 15
    words = np.zeros((v.shape[0], v.shape[1] // 8), dtype=np.int64)
    for k in range(8):
        words |= u[:, k::8] << (4 * k)
    return words.astype(np.uint32).view(np.int32)


def pack_zero_points(zp):
    """The zero points [rows, groups] packed along the rows: [ceil(rows / 8), groups], padding bits zero."""
    rows = zp.shape[0]
    padded = np.zeros(((rows + 7) // 8 * 8, zp.shape[1]), dtype=np.int64)
    padded[:rows] = (zp.astype(np.int64) + 8) & 15
    words = np.zeros((padded.shape[0] // 8, zp.shape[1]), dtype=np.int64)
    for k in range(8):
        words |= padded[k::8] << (4 * k)
    return words.astype(np.uint32).view(np.int32)


def snap(w, group, symmetric, rng):
    """(values v [rows, n] in [-8, 7], scales [rows, groups], zero points or None, F32 weights); group
    None: one per row (the channel strategy)."""
    rows, n = w.shape
    group = group or n
    g = w.reshape(rows, n // group, group).astype(np.float64)
    if symmetric:
        s = 2.0 ** np.ceil(np.log2(np.maximum(np.abs(g).max(axis=2) / 8, 1e-30)))
        v = np.clip(np.rint(g / s[..., None]), -8, 7)
        # Each group reaches -8 and holds an odd code: no other scale fits its values exactly.
        v[..., 0] = -8
        v[..., 1] = np.where(v[..., 1] % 2 == 0, v[..., 1] + np.where(v[..., 1] < 7, 1, -1), v[..., 1])
        zp = None
        deq = v * s[..., None]
    else:
        zp = rng.integers(-6, 6, size=(rows, n // group))
        lo, hi = g.min(axis=2), g.max(axis=2)
        s = 2.0 ** np.ceil(np.log2(np.maximum((hi - lo) / 15, 1e-30)))
        v = np.clip(np.rint(g / s[..., None]) + zp[..., None], -8, 7)
        # Each group spans the whole code range: its scale and zero point are the only exact fit.
        v[..., 0], v[..., 1] = -8, 7
        deq = (v - zp[..., None]) * s[..., None]
    return (v.reshape(rows, n).astype(np.int8), s.astype(np.float32), zp,
            deq.reshape(rows, n).astype(np.float32))


def scheme_config(group, symmetric):
    weights = {"num_bits": 4, "type": "int", "strategy": "group" if group else "channel", "group_size": group, "symmetric": symmetric,
               "dynamic": False, "actorder": None, "observer": "minmax"}
    return {"quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
            "ignore": ["lm_head"], "kv_cache_scheme": None,
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights, "input_activations": None,
                                          "output_activations": None}}}


def write_pair(src, snapped_dir, compressed_dir, group, symmetric, seed):
    """The snapped F32 directory and its pack-quantized twin, both from src."""
    rng = np.random.default_rng(seed)
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
        v, s, zp, deq = snap(w.astype(np.float32), group, symmetric, rng)
        module = name[:-len(".weight")]
        plain.append((name, "F32", w.shape, deq.tobytes()))
        packed.append((module + ".weight_packed", "I32", (w.shape[0], w.shape[1] // 8), pack_rows(v).tobytes()))
        packed.append((module + ".weight_scale", "F32", s.shape, s.tobytes()))
        packed.append((module + ".weight_shape", "I64", (2,), np.array(w.shape, dtype="<i8").tobytes()))
        if zp is not None:
            z = pack_zero_points(zp)
            packed.append((module + ".weight_zero_point", "I32", z.shape, z.tobytes()))
    write_safetensors(os.path.join(snapped_dir, "model.safetensors"), plain)
    write_safetensors(os.path.join(compressed_dir, "model.safetensors"), sorted(packed))
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    config["quantization_config"] = scheme_config(group, symmetric)
    with open(os.path.join(compressed_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)


def tensors_differ(mine, theirs):
    diff = []
    if set(mine) != set(theirs):
        diff.append(f"tensors {sorted(set(mine) ^ set(theirs))[:4]}")
    for k in sorted(set(mine) & set(theirs)):
        if mine[k] != theirs[k]:
            (da, sa, _), (db, sb, _) = mine[k], theirs[k]
            diff.append(f"{k}: {da} {sa} vs {db} {sb}" + ("" if (da, sa) != (db, sb) else ", bytes differ"))
    return diff


with tempfile.TemporaryDirectory() as tmp:
    # The W4A16 preset of every family, and the other group sizes and zero points on two of them.
    cases = [(prefix, 128, True) for prefix in ("ref", "gemma3", "qwen2", "qwen3", "phi3")]
    cases += [("ref", 32, False), ("ref", 64, True), ("phi3", 64, False), ("gemma3", 128, False), ("ref", None, False)]
    sources = {}
    for seed, (prefix, group, symmetric) in enumerate(cases):
        label = f"{prefix} int4 {'g' + str(group) if group else 'per channel'} {'symmetric' if symmetric else 'with zero points'}"
        try:
            if prefix not in sources:
                sources[prefix] = gguf_and_directory(tmp, prefix, ["--type", "f32"] + make_args(prefix))[1]
            src = sources[prefix]
            tag = f"{prefix}-g{group or 'c'}-{'s' if symmetric else 'a'}"
            snapped, compressed = os.path.join(tmp, tag + "-f32"), os.path.join(tmp, tag + "-ct")
            write_pair(src, snapped, compressed, group, symmetric, seed)
            inspect = run([tool("infer-inspect"), compressed]).stdout
            if "I4_PACKED" not in inspect or "_scale" not in inspect:
                failures.append(f"{label}: infer-inspect shows no I4_PACKED weights and scales")
            # The INT4 kernels sum in another order than F32's matmul: the logits stay within float
            # rounding (amplified through the layers) of the dequantized model's, far closer than
            # the quantization itself moves them from the source's.
            lc, lf, l0 = logits_of(compressed), logits_of(snapped), logits_of(src)
            worst, quantization = worst_relative(lc, lf), worst_relative(l0, lf)
            if worst > 0.02 * quantization:
                failures.append(f"{label}: the checkpoint's logits are {worst:.3g} (of the row's largest) away from "
                                f"the dequantized F32 model's (quantization moved them {quantization:.3g})")
            else:
                checked.append(f"{label}: {len(lc)} rows of logits within {worst:.2g} of the dequantized F32 model's "
                               f"(quantization moved them {quantization:.2g})")
            if group == 128 and symmetric:
                if lc != logits_of(snapped, "int4") or perplexity(compressed) != perplexity(snapped, "int4"):
                    failures.append(f"{label}: the checkpoint computes differently from --weight-type int4 on the same numbers")
                elif lc == l0:
                    failures.append(f"{label}: the checkpoint computes exactly the unquantized model")
                else:
                    checked.append(f"{label}: logits and perplexity identical to --weight-type int4 on the same numbers")
            if not group:  # infer-quantize writes groups only
                continue
            written = os.path.join(tmp, tag + "-written")
            args = [tool("infer-quantize"), snapped, written, "int4", "--group", str(group), "-t", "2"]
            p = run(args + ([] if symmetric else ["--asym"]))
            if "linear layers quantized" not in p.stderr:
                failures.append(f"{label}: infer-quantize printed no summary: {p.stderr[-200:]!r}")
            # The summary's bits per weight of the linear layers: every byte written for their
            # weights (packed codes, scales, zero points, shapes; not biases) over the weights.
            mine = read_safetensors(os.path.join(written, "model.safetensors"))
            lin = {k: v for k, v in mine.items() if k.startswith("model.layers.") and "_proj.weight" in k}  # no biases
            weights = sum(v[1][0] * v[1][1] * 8 for k, v in lin.items() if k.endswith(".weight_packed"))
            expect = f"(the linear layers: {8 * sum(len(v[2]) for v in lin.values()) / weights:.2f} bits per weight)"
            if expect not in p.stderr:
                failures.append(f"{label}: the summary does not say {expect}: {p.stderr.strip().splitlines()[-1][:300]!r}")
            diff = tensors_differ(read_safetensors(os.path.join(written, "model.safetensors")),
                                  read_safetensors(os.path.join(compressed, "model.safetensors")))
            with open(os.path.join(written, "config.json")) as f:
                qc = json.load(f)["quantization_config"]
            want = scheme_config(group, symmetric)
            gw, ww = qc["config_groups"]["group_0"], want["config_groups"]["group_0"]
            for key in ("quant_method", "format", "quantization_status"):
                if qc.get(key) != want[key]:
                    diff.append(f"config {key} {qc.get(key)!r}, expected {want[key]!r}")
            for key in ("num_bits", "type", "strategy", "group_size", "symmetric"):
                if gw["weights"].get(key) != ww["weights"][key]:
                    diff.append(f"config weights.{key} {gw['weights'].get(key)!r}, expected {ww['weights'][key]!r}")
            if gw.get("input_activations") is not None:
                diff.append("config input_activations is not null (W4A16)")
            if diff:
                failures.append(f"{label}: infer-quantize's checkpoint differs: " + "; ".join(diff[:5]))
            else:
                checked.append(f"{label}: infer-quantize writes the same packed values, scales, zero points and "
                               f"shapes, and the preset's config")
        except Exception as e:  # one failing model must not hide the others
            failures.append(f"{label}: {e}")

    # From BF16: scales stored as BF16; every code the nearest for its group's scale (clipped at the
    # ends of the range); the checkpoint loads.
    src = gguf_and_directory(tmp, "phi3-bf16", ["--type", "bf16"] + make_args("phi3"))[1]
    for symmetric in (True, False):
        label = f"phi3 BF16 -> infer-quantize int4 {'symmetric' if symmetric else '--asym'}"
        try:
            written = os.path.join(tmp, "phi3-bf16-int4" + ("" if symmetric else "-asym"))
            run([tool("infer-quantize"), src, written, "int4", "--group", "64"] + ([] if symmetric else ["--asym"]))
            mine = read_safetensors(os.path.join(written, "model.safetensors"))
            bad = []
            for name, (dtype, shape, data) in read_safetensors(os.path.join(src, "model.safetensors")).items():
                if not is_linear(name):
                    continue
                # BF16 (numpy has no such type): the upper half of a float32.
                w = (np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16).view(np.float32).reshape(shape)
                module = name[:-len(".weight")]
                dt, shape, data = mine[module + ".weight_scale"]
                if dt != "BF16":
                    bad.append(f"{module}: scales are {dt}")
                    continue
                s = (np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16).view(np.float32).reshape(shape)
                words = np.frombuffer(mine[module + ".weight_packed"][2], dtype="<u4").reshape(w.shape[0], -1)
                v = np.stack([((words >> (4 * k)) & 15).astype(np.int64) - 8 for k in range(8)], axis=2).reshape(w.shape)
                zp = np.zeros(shape, dtype=np.int64)
                if not symmetric:
                    zw = np.frombuffer(mine[module + ".weight_zero_point"][2], dtype="<u4").reshape(-1, shape[1])
                    zp = np.stack([((zw >> (4 * k)) & 15).astype(np.int64) - 8 for k in range(8)], axis=1).reshape(-1, shape[1])
                    zp = zp[:w.shape[0]]
                # The quotient in float32, as the quantizer divides (both round it correctly).
                x = w.astype(np.float32).reshape(w.shape[0], shape[1], -1)
                sc = s[..., None]
                nearest = np.clip(np.rint(x / np.where(sc > 0, sc, np.float32(1))) + zp[..., None], -8, 7)
                got = v.reshape(x.shape)
                if not np.array_equal(np.where(sc > 0, nearest, got), got):
                    bad.append(f"{module}: {int(np.sum(nearest != got))} codes are not the nearest for their scale")
            logits_of(written)
            report(label, bad, "BF16 scales, every code the nearest for its group's scale, loads")
        except Exception as e:
            failures.append(f"{label}: {e}")

    # AWQ: the record against the formula for its alpha, and the smoothed float model. The models'
    # norms get outlier channels first (weights times 2^-2 .. 2^4), as real models have: without
    # them, activations are too even for any factor to pay.
    def with_outliers(prefix):
        d = os.path.join(tmp, prefix + "-outliers")
        shutil.copytree(sources[prefix], d)
        path = os.path.join(d, "model.safetensors")
        rng = np.random.default_rng(5)
        tensors = []
        for name, (dtype, shape, data) in sorted(read_safetensors(path).items()):
            if name.endswith("layernorm.weight") and ".layers." in name:
                w = np.frombuffer(data, dtype="<f4")
                f = np.ldexp(np.float32(1), rng.integers(-2, 5, size=w.shape)).astype(np.float32)
                w = (np.float32(1) + w) * f - np.float32(1) if prefix == "gemma3" else w * f
                data = w.astype("<f4").tobytes()
            tensors.append((name, dtype, shape, data))
        write_safetensors(path, tensors)
        return d

    grid = 20
    for prefix in ("ref", "gemma3", "phi3"):
        label = f"{prefix} AWQ"
        try:
            src = with_outliers(prefix)
            imat = os.path.join(tmp, prefix + ".imatrix.dat")
            run([tool("infer-imatrix"), "-m", src, "-f", calib_text, "-o", imat, "--output-format", "dat", "-c", "64",
                 "--chunks", "4"])
            written = os.path.join(tmp, prefix + "-awq")
            run([tool("infer-quantize"), src, written, "int4", "--imatrix", imat, "-t", "2"])
            calib = ["--calib", calib_text, "--calib-ctx", "64", "--calib-chunks", "4"]
            also = os.path.join(tmp, prefix + "-awq-calib")
            run([tool("infer-quantize"), src, also, "int4", "--no-gptq", "-t", "1"] + calib)
            bad = []
            if read_safetensors(os.path.join(also, "model.safetensors")) != read_safetensors(os.path.join(written, "model.safetensors")):
                bad.append("--calib (one thread) and --imatrix (two) of the same text write different checkpoints")
            # GPTQ (--calib's default): the same factors, other codes, the same bytes on any thread count.
            with open(os.path.join(also, "awq.json")) as f:
                groups_without = json.load(f)["groups"]
            more, t1 = gptq_twice(src, os.path.join(tmp, prefix + "-gptq"), "int4", calib, "awq.json", groups_without)
            bad += more
            packed = [k for k in t1 if k.endswith("weight_packed")]
            noq = read_safetensors(os.path.join(also, "model.safetensors"))
            changed = sum(1 for k in packed if t1[k] != noq[k])
            if changed < len(packed) // 2:
                bad.append(f"GPTQ changed the codes of {changed} of {len(packed)} matrices only")
            if prefix == "ref":
                # Activation order (the default) is declared; --no-actorder (column order): the same
                # factors, other codes, one and two threads alike, declared null; --actorder is the default.
                def declared_order(d):
                    with open(os.path.join(d, "config.json")) as f:
                        declared = json.load(f)["quantization_config"]["config_groups"]["group_0"]["weights"].get("actorder")
                    with open(os.path.join(d, "awq.json")) as f:
                        return declared, json.load(f)["gptq"].get("actorder")
                more, tc = gptq_twice(src, os.path.join(tmp, prefix + "-gptq-cols"), "int4", calib + ["--no-actorder"],
                                      "awq.json", groups_without)
                bad += more
                explicit = os.path.join(tmp, prefix + "-gptq-explicit")
                run([tool("infer-quantize"), src, explicit, "int4", "-t", "2"] + calib + ["--actorder"])
                reordered = sum(1 for k in packed if tc[k] != t1[k])
                orders = (declared_order(os.path.join(tmp, prefix + "-gptq-1")), declared_order(os.path.join(tmp, prefix + "-gptq-cols-1")))
                if orders != (("weight", "weight"), (None, None)) or reordered < len(packed) // 2:
                    bad.append(f"activation order (config, record) {orders[0]}, --no-actorder {orders[1]}, "
                               f"{reordered} of {len(packed)} matrices' codes differ between them")
                if read_safetensors(os.path.join(explicit, "model.safetensors")) != t1:
                    bad.append("--actorder differs from the default")
            with open(os.path.join(written, "awq.json")) as f:
                record = json.load(f)
            weights = load_file(os.path.join(src, "model.safetensors"))
            rms = {k: np.sqrt(v.astype(np.float64)) for k, v in read_imatrix_dat(imat).items()}
            expected = smoothing_groups(weights, prefix == "gemma3")
            if len(expected) != len(record["groups"]) or record.get("grid") != grid:
                bad.append(f"{len(record['groups'])} groups recorded (grid {record.get('grid')}), {len(expected)} expected")
            scaled = 0
            for (stat, cols, norm, rows), g in zip(expected, record["groups"]):
                alpha = g["alpha"]
                if g["multiplied_columns"] != cols or g.get("divided_norm") != norm:
                    bad.append(f"group of {stat}: {g.get('divided_norm') or g.get('divided_rows')} / {g['multiplied_columns']}")
                    continue
                if alpha * grid != round(alpha * grid) or not 0 <= alpha < 1 or g["loss"] > g["loss_unscaled"]:
                    bad.append(f"{stat}: alpha {alpha} off the grid, or loss {g['loss']} above the unscaled {g['loss_unscaled']}")
                a = rms[stat]
                pos = a[a > 0]
                e = alpha * np.log2(np.where(a > 0, a, 1)) - 0.5 * alpha * (np.log2(pos.min()) + np.log2(pos.max()))
                e = np.clip(np.sign(e) * np.floor(np.abs(e) + 0.5), -10, 10)
                e[a <= 0] = 0
                if list(e.astype(int)) != g["log2_scales"]:
                    bad.append(f"{stat}: factors differ from the formula at alpha {alpha} at "
                               f"{int(np.sum(e.astype(int) != np.array(g['log2_scales'])))} columns")
                scaled += alpha > 0
            smoothed = os.path.join(tmp, prefix + "-awq-smoothed-f32")
            rebuild_smoothed(src, smoothed, record, prefix == "gemma3")
            lf, l0 = logits_of(smoothed), logits_of(src)
            if prefix != "gemma3" and lf != l0:
                bad.append("the smoothed float model's logits differ from the source's")
            elif prefix == "gemma3" and worst_relative(lf, l0) > 1e-3:
                bad.append(f"the smoothed float model moves a logit by {worst_relative(lf, l0):.3g} of the row's largest")
            logits_of(written)
            if scaled == 0:
                bad.append("no group scaled (alpha 0 everywhere) despite the outlier channels")
            report(label, bad, f"{len(record['groups'])} groups ({scaled} scaled), factors as the formula gives "
                   f"for each recorded alpha; the smoothed float model computes the source's logits; GPTQ "
                   f"changes the codes of {changed} of {len(packed)} matrices, the same on 1 and 2 threads" +
                   (" (activation order by default, declared; --no-actorder other codes, declared null)" if prefix == "ref" else ""))
        except Exception as e:
            failures.append(f"{label}: {e}")

    # --keep with AWQ on a BF16 model. A group whose matrices are all kept is not smoothed (layer 0's
    # down_proj: up_proj's rows stay as they are); a kept matrix of a smoothed group (layer 0's
    # v_proj, beside q and k) takes the group's factors, and powers of two keep it and the norms
    # exact in BF16: they stay BF16 (16 bits of the kept budget, not 32), holding the source's
    # values times the recorded factors exactly. Kept matrices are listed in ignore; it loads.
    label = "ref BF16 AWQ --keep"
    try:
        # The same values as BF16 and as F32 (numpy has no BF16 for the rebuild below).
        src, src32 = os.path.join(tmp, "ref-outliers-bf16"), os.path.join(tmp, "ref-outliers-bf16-in-f32")
        for d in (src, src32):
            shutil.copytree(os.path.join(tmp, "ref-outliers"), d)
        bf16, f32 = [], []
        for name, (dtype, shape, data) in sorted(read_safetensors(os.path.join(src, "model.safetensors")).items()):
            bits = np.frombuffer(data, dtype="<u4") >> 16  # truncated: values BF16 holds
            bf16.append((name, "BF16", shape, bits.astype("<u2").tobytes()))
            f32.append((name, "F32", shape, (bits << 16).astype("<u4").tobytes()))
        write_safetensors(os.path.join(src, "model.safetensors"), bf16)
        write_safetensors(os.path.join(src32, "model.safetensors"), f32)
        written = os.path.join(tmp, "ref-bf16-awq-keep")
        kept = ["model.layers.0.mlp.down_proj", "model.layers.0.self_attn.v_proj"]
        run([tool("infer-quantize"), src, written, "int4", "--group", "32", "--imatrix", os.path.join(tmp, "ref.imatrix.dat")] +
            [a for k in kept for a in ("--keep", k + ".weight")])
        with open(os.path.join(written, "awq.json")) as f:
            record = json.load(f)
        smoothed = os.path.join(tmp, "ref-bf16-awq-smoothed")
        rebuild_smoothed(src32, smoothed, record, False)
        expected = read_safetensors(os.path.join(smoothed, "model.safetensors"))
        mine = read_safetensors(os.path.join(written, "model.safetensors"))
        with open(os.path.join(written, "config.json")) as f:
            ignore = json.load(f)["quantization_config"]["ignore"]
        bad = []
        v_factors = [e for g in record["groups"] if kept[1] + ".weight" in g["multiplied_columns"] for e in g["log2_scales"]]
        if any(kept[0] + ".weight" in g["multiplied_columns"] for g in record["groups"]):
            bad.append(f"{kept[0]} is kept, yet its group was smoothed")
        if not any(v_factors):
            bad.append(f"{kept[1]}'s group has no factor other than 1")
        for name in [k + ".weight" for k in kept] + sorted(k for k in mine if k.endswith("layernorm.weight") and ".layers." in k):
            dt, shape, data = mine[name]
            want = np.frombuffer(expected[name][2], dtype="<f4")
            got = (np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16).view(np.float32) if dt == "BF16" else None
            if dt != "BF16" or not np.array_equal(got, want):
                bad.append(f"{name}: {dt}, not the smoothed values in BF16")
        for k in kept:
            if k not in ignore or k + ".weight_packed" in mine:
                bad.append(f"{k} not kept (ignore {ignore})")
        logits_of(written)
        report(label, bad, f"the all-kept group unsmoothed; the kept v_proj ({sum(1 for e in v_factors if e)} "
               f"non-unit factors) and the norms BF16, exactly the smoothed values; in ignore; loads")
    except Exception as e:
        failures.append(f"{label}: {e}")

    # Mixed precision (--w8a16 GLOB): the matching matrices exactly as infer-quantize's w8a16 writes
    # them, the others exactly as its int4 writes them; config group_1 names the 8-bit modules (W8A16
    # per channel); the checkpoint computes within float rounding of the F32 model dequantized here
    # from its own tensors (compressed-tensors' definitions: 8-bit words hold v + 128 a byte).
    label = "ref int4 --w8a16 k/v + layer 0 down"
    try:
        src = sources["ref"]
        eight = ["model.layers.*.self_attn.[kv]_proj.weight", "model.layers.0.mlp.down_proj.weight"]
        eight_args = [a for g in eight for a in ("--w8a16", g)]
        mixed, four, w8 = (os.path.join(tmp, "ref-mixed-" + t) for t in ("both", "int4", "w8a16"))
        p = run([tool("infer-quantize"), src, mixed, "int4", "--group", "64"] + eight_args)
        run([tool("infer-quantize"), src, four, "int4", "--group", "64"])
        run([tool("infer-quantize"), src, w8, "w8a16"])
        m, f4, f8 = (read_safetensors(os.path.join(d, "model.safetensors")) for d in (mixed, four, w8))
        is_eight = lambda module: any(fnmatch.fnmatchcase(module + ".weight", g) for g in eight)  # noqa: E731
        bad = []
        if set(m) != set(f4):
            bad.append(f"tensors {sorted(set(m) ^ set(f4))[:4]}")
        modules8 = set()
        for k in sorted(set(m) & set(f4)):
            module = k.rsplit(".", 1)[0]
            if k.rsplit(".", 1)[1].startswith("weight_") and is_eight(module):
                modules8.add(module)
                if m[k] != f8[k]:
                    bad.append(f"{k}: not w8a16's tensor")
            elif m[k] != f4[k]:
                bad.append(f"{k}: not int4's tensor")
        layers = len({k.split(".")[2] for k in m if k.startswith("model.layers.")})
        if len(modules8) != 2 * layers + 1:
            bad.append(f"{len(modules8)} W8A16 modules for {layers} layers")
        with open(os.path.join(mixed, "config.json")) as fh:
            groups = json.load(fh)["quantization_config"]["config_groups"]
        g1 = groups.get("group_1", {})
        w1 = g1.get("weights") or {}
        if set(g1.get("targets", [])) != modules8 or groups["group_0"]["targets"] != ["Linear"]:
            bad.append(f"group_1 targets {g1.get('targets')}")
        if (w1.get("num_bits"), w1.get("type"), w1.get("strategy"), g1.get("input_activations", 0)) != (8, "int", "channel", None):
            bad.append(f"group_1 is not W8A16 per channel: {g1}")
        # The summary's bits per weight count the 8-bit matrices' bytes too.
        lin = {k: v for k, v in m.items() if k.startswith("model.layers.") and "_proj.weight" in k}
        weights = sum(v[1][0] * v[1][1] * (4 if k.rsplit(".", 1)[0] in modules8 else 8) for k, v in lin.items()
                      if k.endswith(".weight_packed"))
        expect = f"(the linear layers: {8 * sum(len(v[2]) for v in lin.values()) / weights:.2f} bits per weight)"
        if expect not in p.stderr:
            bad.append(f"the summary does not say {expect}")
        # The dequantized F32 model.
        deq = os.path.join(tmp, "ref-mixed-dequantized-f32")
        shutil.copytree(src, deq)
        tensors = []
        for name, (dtype, shape, data) in sorted(read_safetensors(os.path.join(src, "model.safetensors")).items()):
            module = name[:-len(".weight")]
            if module + ".weight_packed" in m:
                words = np.frombuffer(m[module + ".weight_packed"][2], dtype="<u4").reshape(shape[0], -1)
                s = np.frombuffer(m[module + ".weight_scale"][2], dtype="<f4").reshape(shape[0], -1)
                if module in modules8:
                    v = (np.frombuffer(words.tobytes(), dtype=np.uint8) ^ 0x80).view(np.int8).reshape(shape)
                    w = v.astype(np.float32) * s
                else:
                    v = np.stack([((words >> (4 * k)) & 15).astype(np.int64) - 8 for k in range(8)], axis=2).reshape(shape)
                    w = (v.reshape(shape[0], s.shape[1], -1).astype(np.float32) * s[..., None]).reshape(shape)
                data = w.astype("<f4").tobytes()
            tensors.append((name, dtype, shape, data))
        write_safetensors(os.path.join(deq, "model.safetensors"), tensors)
        lm, ld, l0 = logits_of(mixed), logits_of(deq), logits_of(src)
        worst, quantization = worst_relative(lm, ld), worst_relative(l0, ld)
        if worst > 0.02 * quantization:
            bad.append(f"logits {worst:.3g} of the row's largest from the dequantized model's (quantization: {quantization:.3g})")
        # With a calibration (AWQ + GPTQ): k/v take their group's AWQ factors without joining its search
        # (q alone decides them), layer 0's down_proj, alone in its group, is not smoothed; GPTQ runs on
        # every 8-bit matrix (codes other than --no-gptq's).
        calib = ["--calib", calib_text, "--calib-ctx", "64", "--calib-chunks", "4", "-t", "2"]
        outl = os.path.join(tmp, "ref-outliers")
        cm, cn = os.path.join(tmp, "ref-mixed-calib"), os.path.join(tmp, "ref-mixed-calib-nogptq")
        run([tool("infer-quantize"), outl, cm, "int4"] + eight_args + calib)
        run([tool("infer-quantize"), outl, cn, "int4", "--no-gptq"] + eight_args + calib)
        with open(os.path.join(cm, "awq.json")) as fh:
            record = json.load(fh)["groups"]
        with open(os.path.join(os.path.join(tmp, "ref-awq-calib"), "awq.json")) as fh:
            all4 = json.load(fh)["groups"]
        tm, tn = (read_safetensors(os.path.join(d, "model.safetensors")) for d in (cm, cn))
        attn = [g for g in record if any(c.endswith("q_proj.weight") for c in g["multiplied_columns"])]
        if not attn or not all(any(c.endswith("k_proj.weight") for c in g["multiplied_columns"]) for g in attn):
            bad.append("k/v do not take their attention group's factors")
        if any("model.layers.0.mlp.down_proj.weight" in g["multiplied_columns"] for g in record):
            bad.append("layer 0's down_proj, alone in its group and 8-bit, was smoothed")
        if len(record) != len(all4) - 1:
            bad.append(f"{len(record)} groups smoothed, {len(all4) - 1} expected (every one but layer 0's down)")
        same = [mod for mod in sorted(modules8) if tm[mod + ".weight_packed"] == tn[mod + ".weight_packed"]]
        if same:
            bad.append(f"GPTQ left the codes of {same[:3]} as they were")
        logits_of(cm)
        report(label, bad, f"{len(modules8)} modules exactly w8a16's, the rest int4's, group_1 names them; logits "
               f"within {worst:.2g} of the dequantized model's (quantization {quantization:.2g}); with --calib, "
               f"k/v take q's AWQ factors, the lone 8-bit down_proj is not smoothed, GPTQ changes every 8-bit matrix")
    except Exception as e:
        failures.append(f"{label}: {e}")

    # W8A16 in groups (w8a16 --group G, compressed-tensors' W8A16 preset at G = 128): the codes and
    # F32 scales numpy's own quantizer gives (per group d = max|w| / 127, q = round-half-even(w / d)
    # in [-127, 127], float32), the config's strategy "group", the checkpoint within float rounding
    # of the F32 model dequantized from them; with --calib, GPTQ recodes, one and two threads alike.
    for group in (32, 64):
        label = f"ref w8a16 --group {group}"
        try:
            src = sources["ref"]
            written = os.path.join(tmp, f"ref-w8a16-g{group}")
            run([tool("infer-quantize"), src, written, "w8a16", "--group", str(group)])
            m, s0 = read_safetensors(os.path.join(written, "model.safetensors")), load_file(os.path.join(src, "model.safetensors"))
            bad, deq_tensors, n_checked = [], [], 0
            for name, (dtype, shape, data) in sorted(read_safetensors(os.path.join(src, "model.safetensors")).items()):
                module = name[:-len(".weight")]
                if module + ".weight_packed" in m:
                    w = s0[name].astype(np.float32).reshape(shape[0], -1, group)
                    d = (np.abs(w).max(axis=2) / np.float32(127)).astype(np.float32)
                    safe = np.where(d > 0, d, np.float32(1))[..., None]
                    q = np.where(d[..., None] > 0, np.clip(np.rint(w / safe), -127, 127), 0).astype(np.int8).reshape(shape)
                    words = np.frombuffer(m[module + ".weight_packed"][2], dtype=np.uint8)
                    codes = (words ^ 0x80).view(np.int8).reshape(shape)
                    scales = np.frombuffer(m[module + ".weight_scale"][2], dtype="<f4")
                    if m[module + ".weight_scale"][1] != [shape[0], shape[1] // group]:
                        bad.append(f"{module}: scales {m[module + '.weight_scale'][1]}")
                    elif not np.array_equal(codes, q) or not np.array_equal(scales, d.reshape(-1)):
                        bad.append(f"{module}: codes or scales differ from numpy's quantizer")
                    n_checked += 1
                    data = (codes.reshape(shape[0], -1, group).astype(np.float32) * scales.reshape(shape[0], -1, 1)).astype("<f4").tobytes()
                    dtype = "F32"
                deq_tensors.append((name, dtype, shape, data))
            with open(os.path.join(written, "config.json")) as fh:
                q_config = json.load(fh)["quantization_config"]
            g0 = q_config["config_groups"]["group_0"]
            if (g0["weights"]["num_bits"], g0["weights"]["strategy"], g0["weights"]["group_size"], g0["input_activations"],
                    q_config["format"]) != (8, "group", group, None, "pack-quantized"):
                bad.append(f"config: {q_config}")
            deq = os.path.join(tmp, f"ref-w8a16-g{group}-dequantized")
            shutil.copytree(src, deq)
            write_safetensors(os.path.join(deq, "model.safetensors"), deq_tensors)
            lw, ld, l0 = logits_of(written), logits_of(deq), logits_of(src)
            worst, quantization = worst_relative(lw, ld), worst_relative(l0, ld)
            if worst > 0.02 * quantization:
                bad.append(f"logits {worst:.3g} of the row's largest from the dequantized model's (quantization: {quantization:.3g})")
            extra = ""
            if group == 32:
                calib = ["--calib", calib_text, "--calib-ctx", "64", "--calib-chunks", "4"]
                g1, g2 = os.path.join(tmp, "ref-w8a16-g32-gptq-1"), os.path.join(tmp, "ref-w8a16-g32-gptq-2")
                run([tool("infer-quantize"), src, g1, "w8a16", "--group", "32", "-t", "1"] + calib)
                run([tool("infer-quantize"), src, g2, "w8a16", "--group", "32", "-t", "2"] + calib)
                t1 = read_safetensors(os.path.join(g1, "model.safetensors"))
                if t1 != read_safetensors(os.path.join(g2, "model.safetensors")):
                    bad.append("GPTQ's checkpoints of one and two threads differ")
                packed = [k for k in t1 if k.endswith("weight_packed")]
                changed = sum(1 for k in packed if t1[k] != m[k])
                if changed < len(packed) // 2:
                    bad.append(f"GPTQ changed the codes of {changed} of {len(packed)} matrices only")
                logits_of(g1)
                extra = f"; with --calib, GPTQ recodes {changed} of {len(packed)} matrices, one and two threads alike"
            report(label, bad, f"{n_checked} matrices' codes and scales exactly numpy's, strategy group; logits within "
                   f"{worst:.2g} of the dequantized model's (quantization {quantization:.2g}){extra}")
        except Exception as e:
            failures.append(f"{label}: {e}")

    # Refusals: one line on stderr naming the cause, a non-zero exit, no crash.
    good = os.path.join(tmp, "ref-g128-s-ct")

    def weights_of(c):
        return c["quantization_config"]["config_groups"]["group_0"]["weights"]

    W = "model.layers.0.self_attn.o_proj."
    refused(tmp, good, "W4A8", edit_config(lambda c: c["quantization_config"]["config_groups"]["group_0"].update(
        input_activations={"num_bits": 8, "type": "int", "strategy": "token", "symmetric": True, "dynamic": True})),
            "W4A8")
    refused(tmp, good, "actorder group", edit_config(lambda c: weights_of(c).update(actorder="group")), "actorder 'group'")
    refused(tmp, good, "tensor strategy", edit_config(lambda c: weights_of(c).update(strategy="tensor")),
            "strategy 'tensor' is not supported for 4-bit weights")
    refused(tmp, good, "group index", edit_tensors(lambda ts: ts + [(W + "weight_g_idx", "I32", [256], bytes(1024))]), "group index")
    refused(tmp, good, "weight_shape disagrees", edit_tensors(
        lambda ts: [(n, d, s, np.array([256, 128], dtype="<i8").tobytes()) if n == W + "weight_shape" else (n, d, s, b)
                    for n, d, s, b in ts]), "do not hold the 128 columns of its weight_shape as the config's 4-bit values")
    refused(tmp, good, "weight_shape rows disagree", edit_tensors(
        lambda ts: [(n, d, s, np.array([128, 256], dtype="<i8").tobytes()) if n == W + "weight_shape" else (n, d, s, b)
                    for n, d, s, b in ts]), "weight_shape is [128, 256]")
    refused(tmp, good, "packed weight not I32", edit_tensors(
        lambda ts: [(n, "F32", s, b) if n == W + "weight_packed" else (n, d, s, b) for n, d, s, b in ts]),
            "must be an I32 matrix")
    refused(tmp, good, "missing scales", edit_tensors(lambda ts: [t for t in ts if t[0] != W + "weight_scale"]), "has no weight_scale tensor")
    refused(tmp, good, "groups of 16", edit_tensors(
        lambda ts: [(n, d, [s[0], 16], np.zeros((s[0], 16), dtype="<f4").tobytes()) if n == W + "weight_scale" else (n, d, s, b)
                    for n, d, s, b in ts]), "groups of 16 columns")
    refused(tmp, good, "zero points of the wrong rows", edit_tensors(lambda ts: ts + [(W + "weight_zero_point", "I32", [3, 2], bytes(24))]),
            "rows of packed zero points")
    refused(tmp, good, "negative scale", edit_tensors(
        lambda ts: [(n, d, s, np.full(np.prod(s), -1, dtype="<f4").tobytes()) if n == W + "weight_scale" else (n, d, s, b)
                    for n, d, s, b in ts]), "a scale is negative or not finite")

    for label, args, expect in (
            ("--group 16", [good, os.path.join(tmp, "z"), "int4", "--group", "16"], "--group"),
            ("--asym with int8", [sources["ref"], os.path.join(tmp, "z"), "int8", "--asym"], "--asym and --w8a16 are int4's"),
            ("--group with fp8", [sources["ref"], os.path.join(tmp, "z"), "fp8", "--group", "32"], "--group is int4's and w8a16's"),
            ("--actorder without --calib", [sources["ref"], os.path.join(tmp, "z"), "int4", "--actorder"],
             "--actorder and --no-actorder are int4's GPTQ's"),
            ("--no-actorder with w8a16", [sources["ref"], os.path.join(tmp, "z"), "w8a16", "--calib", calib_text, "--no-actorder"],
             "--actorder and --no-actorder are int4's GPTQ's"),
            ("rows not in groups", [sources["ref"], os.path.join(tmp, "z"), "int4", "--keep", "*", "--group", "128"],
             "no linear layer to quantize")):
        p = run([tool("infer-quantize")] + args, ok=False)
        if p.returncode == 0 or p.returncode < 0 or expect not in p.stderr:
            failures.append(f"infer-quantize refusal '{label}': exit {p.returncode}, stderr {p.stderr.strip()[-300:]!r}")
        else:
            checked.append(f"infer-quantize refusal '{label}': {p.stderr.strip().splitlines()[0][:140]}")

finish()
