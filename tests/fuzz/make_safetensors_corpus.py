#!/usr/bin/env python3
"""Writes the safetensors fuzzer's seed corpus (tests/fuzz/corpus_safetensors/), byte by byte with
no dependencies: small valid safetensors files of every dtype the reader knows (mode byte 0), shard
indexes (mode 1), and tiny model directories of each family with a byte-level BPE tokenizer.json
(mode 2; see tests/fuzz/fuzz_safetensors.cpp for the layout). Run from the repository root:
    python3 tests/fuzz/make_safetensors_corpus.py"""
import json
import os
import struct

out = "tests/fuzz/corpus_safetensors"
os.makedirs(out, exist_ok=True)
SIZES = {"F32": 4, "F16": 2, "BF16": 2, "I8": 1, "U8": 1, "I32": 4, "F8_E4M3": 1}


def safetensors(tensors, metadata=None):
    """tensors: [(name, dtype, shape)]; data is a counting byte pattern."""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape in tensors:
        n = SIZES[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + n]}
        data += bytes((i * 7 + 3) % 251 for i in range(n))
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def save(name, mode, body):
    with open(os.path.join(out, name), "wb") as f:
        f.write(bytes([mode]) + body)


save("dtypes", 0, safetensors([(f"t.{d}", d, [2, 3]) for d in SIZES], {"format": "pt"}))
save("empty", 0, safetensors([]))
save("scalar-and-zero", 0, safetensors([("scalar", "F32", []), ("zero", "BF16", [0, 4]), ("v", "F16", [5])]))
save("index", 1, json.dumps({"metadata": {"total_size": 8}, "weight_map": {
    "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
    "lm_head.weight": "model-00002-of-00002.safetensors"}}).encode())

vocab = {chr(c): i for i, c in enumerate(range(ord("a"), ord("z") + 1))}
vocab.update({"Ġ": 26, "ab": 27, "Ġa": 28, "<|endoftext|>": 29})
tokenizer = {"version": "1.0", "added_tokens": [{"id": 29, "content": "<|endoftext|>", "special": True}],
             "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
             "model": {"type": "BPE", "vocab": vocab, "merges": ["a b", "Ġ a"]}}
E, L, H, KV, FF, V, D = 8, 1, 2, 1, 16, 30, 4
FAMILIES = {"llama": "LlamaForCausalLM", "gemma3": "Gemma3ForCausalLM", "qwen2": "Qwen2ForCausalLM",
            "qwen3": "Qwen3ForCausalLM", "phi3": "Phi3ForCausalLM"}
for arch, hf in FAMILIES.items():
    cfg = {"architectures": [hf], "hidden_size": E, "num_hidden_layers": L, "num_attention_heads": H,
           "num_key_value_heads": KV, "intermediate_size": FF, "vocab_size": V, "max_position_embeddings": 64,
           "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": arch in ("gemma3", "qwen2")}
    if arch in ("gemma3", "qwen3"):
        cfg["head_dim"] = D
    if arch == "gemma3":
        cfg.update({"sliding_window": 16, "rope_local_base_freq": 10000.0})
    t = [("model.embed_tokens.weight", "F32", [V, E]), ("model.norm.weight", "F32", [E])]
    if not cfg["tie_word_embeddings"]:
        t.append(("lm_head.weight", "BF16", [V, E]))
    p = "model.layers.0."
    t += [(p + "input_layernorm.weight", "F32", [E]), (p + "post_attention_layernorm.weight", "F32", [E]),
          (p + "self_attn.o_proj.weight", "F16", [E, H * D])]
    if arch == "phi3":
        t += [(p + "self_attn.qkv_proj.weight", "F16", [(H + 2 * KV) * D, E]), (p + "mlp.gate_up_proj.weight", "F16", [2 * FF, E])]
    else:
        t += [(p + "self_attn.q_proj.weight", "F16", [H * D, E]), (p + "self_attn.k_proj.weight", "F16", [KV * D, E]),
              (p + "self_attn.v_proj.weight", "F16", [KV * D, E]), (p + "mlp.gate_proj.weight", "F16", [FF, E]),
              (p + "mlp.up_proj.weight", "F16", [FF, E])]
    t.append((p + "mlp.down_proj.weight", "F16", [E, FF]))
    if arch == "qwen2":
        t += [(p + "self_attn.q_proj.bias", "F32", [H * D]), (p + "self_attn.k_proj.bias", "F32", [KV * D]),
              (p + "self_attn.v_proj.bias", "F32", [KV * D])]
    if arch in ("gemma3", "qwen3"):
        t += [(p + "self_attn.q_norm.weight", "F32", [D]), (p + "self_attn.k_norm.weight", "F32", [D])]
    if arch == "gemma3":
        t += [(p + "pre_feedforward_layernorm.weight", "F32", [E]), (p + "post_feedforward_layernorm.weight", "F32", [E])]
    c = json.dumps(cfg).encode()
    k = json.dumps(tokenizer).encode()
    save(f"dir-{arch}", 2, struct.pack("<I", len(c)) + c + struct.pack("<I", len(k)) + k + safetensors(t))

# compressed-tensors checkpoints: INT8 per-channel and FP8 per-tensor Linear weights with their
# scales (rows a multiple of 32 elements, as the row formats need).
E, H, KV, D, FF = 32, 2, 1, 16, 32
for scheme, dtype, per_channel in (("int8", "I8", True), ("fp8", "F8_E4M3", False)):
    weights = {"num_bits": 8, "type": "int" if dtype == "I8" else "float", "symmetric": True,
               "strategy": "channel" if per_channel else "tensor"}
    acts = {"num_bits": 8, "type": weights["type"], "symmetric": True, "dynamic": per_channel,
            "strategy": "token" if per_channel else "tensor"}
    cfg = {"architectures": ["LlamaForCausalLM"], "hidden_size": E, "num_hidden_layers": 1, "num_attention_heads": H,
           "num_key_value_heads": KV, "intermediate_size": FF, "vocab_size": V, "rms_norm_eps": 1e-6,
           "quantization_config": {"quant_method": "compressed-tensors", "format": "naive-quantized",
                                   "quantization_status": "compressed", "ignore": ["lm_head"],
                                   "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights,
                                                                 "input_activations": acts}}}}
    p = "model.layers.0."
    t = [("model.embed_tokens.weight", "F32", [V, E]), ("model.norm.weight", "F32", [E]), ("lm_head.weight", "F16", [V, E]),
         (p + "input_layernorm.weight", "F32", [E]), (p + "post_attention_layernorm.weight", "F32", [E])]
    for name, rows, cols in (("self_attn.q_proj", H * D, E), ("self_attn.k_proj", KV * D, E), ("self_attn.v_proj", KV * D, E),
                             ("self_attn.o_proj", E, H * D), ("mlp.gate_proj", FF, E), ("mlp.up_proj", FF, E),
                             ("mlp.down_proj", E, FF)):
        t += [(p + name + ".weight", dtype, [rows, cols]),
              (p + name + ".weight_scale", "BF16", [rows, 1] if per_channel else [1])]
        if not per_channel:
            t.append((p + name + ".input_scale", "F32", [1]))
    c = json.dumps(cfg).encode()
    k = json.dumps(tokenizer).encode()
    save(f"dir-llama-{scheme}", 2, struct.pack("<I", len(c)) + c + struct.pack("<I", len(k)) + k + safetensors(t))
