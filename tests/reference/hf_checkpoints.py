"""Small random-weight Hugging Face checkpoints of each supported family, made deterministically
with numpy (the same bytes on every machine), for the transformers reference
(tests/reference/make-hf-reference.py) and the test that checks libinfer against it
(tests/integration/hf_transformers.py).

Each checkpoint is a directory as the Hub ships one: config.json (the family's transformers
model_type and architecture), model.safetensors (written here: an 8-byte header length, the JSON
header, the raw little-endian tensors; F32 or BF16), tokenizer.json (a byte-level BPE: the 256
byte symbols, merges of the corpus's most frequent byte pairs, and two special tokens),
tokenizer_config.json and generation_config.json.

The weights are scaled so activations keep unit size and attention and logits are peaked
(q/k projections at 2/sqrt(fan_in), other matrices at 1/sqrt(fan_in), embeddings at 1, norm
weights near their neutral value, the output matrix at LOGIT_GAIN/sqrt(d): logits of standard
deviation about 6, so most positions have a clear top token), where small arithmetic differences
show in the distributions.

    make(family, directory, dtype="F32")  -> the config dict
"""
import json
import os
import struct

import numpy as np

FAMILIES = ("llama", "gemma3", "qwen2", "qwen3", "phi3")
BOS, EOS = "<|bos|>", "<|eos|>"
N_MERGES = 62  # 256 bytes + 62 merges + 2 specials = 320 tokens
LOGIT_GAIN = 6.0


def _byte_symbols():
    """GPT-2's byte-to-unicode table: each byte a printable character."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def tokenizer_json(corpus_bytes):
    """A byte-level BPE tokenizer.json: byte symbols in byte order, then merges of the most
    frequent adjacent byte pairs of the corpus (ties by byte values), then BOS and EOS."""
    sym = _byte_symbols()
    vocab = {sym[b]: b for b in range(256)}
    counts = {}
    data = np.frombuffer(corpus_bytes, dtype=np.uint8)
    pairs = data[:-1].astype(np.int64) * 256 + data[1:]
    values, freq = np.unique(pairs, return_counts=True)
    order = sorted(range(len(values)), key=lambda i: (-int(freq[i]), int(values[i])))
    merges = []
    for i in order:
        a, b = divmod(int(values[i]), 256)
        if a in (ord(" "), ord("\n")) and b in (ord(" "), ord("\n")):
            continue  # whitespace runs are split apart by the pre-tokenizer
        merges.append(f"{sym[a]} {sym[b]}")
        vocab[sym[a] + sym[b]] = len(vocab)
        if len(merges) == N_MERGES:
            break
    del counts
    n = len(vocab)
    added = [{"id": n + i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, t in enumerate((BOS, EOS))]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }


def _config(family, n_vocab, bos, eos):
    common = {"vocab_size": n_vocab, "hidden_size": 64, "intermediate_size": 160, "num_attention_heads": 4,
              "num_key_value_heads": 2, "max_position_embeddings": 1024, "rms_norm_eps": 1e-6,
              "bos_token_id": bos, "eos_token_id": eos, "torch_dtype": "float32", "hidden_act": "silu",
              "initializer_range": 0.02, "attention_dropout": 0.0, "use_cache": True}
    if family == "llama":
        return {**common, "model_type": "llama", "architectures": ["LlamaForCausalLM"], "num_hidden_layers": 3,
                "rope_theta": 10000.0, "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
                "head_dim": 16, "pretraining_tp": 1, "rope_scaling": None}
    if family == "qwen2":
        return {**common, "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "num_hidden_layers": 3,
                "rope_theta": 1000000.0, "tie_word_embeddings": True, "use_sliding_window": False,
                "sliding_window": None, "max_window_layers": 3, "rope_scaling": None}
    if family == "qwen3":
        return {**common, "model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 3,
                "rope_theta": 1000000.0, "tie_word_embeddings": False, "head_dim": 24, "attention_bias": False,
                "use_sliding_window": False, "sliding_window": None, "max_window_layers": 3, "rope_scaling": None}
    if family == "phi3":
        return {**common, "model_type": "phi3", "architectures": ["Phi3ForCausalLM"], "num_hidden_layers": 3,
                "num_key_value_heads": 4, "rope_theta": 10000.0, "tie_word_embeddings": False,
                "original_max_position_embeddings": 1024, "rope_scaling": None, "sliding_window": None,
                "resid_pdrop": 0.0, "embd_pdrop": 0.0, "partial_rotary_factor": 1.0, "pad_token_id": None}
    if family == "gemma3":
        # Six layers: five sliding-window (32 positions, shorter than the test's 128-token chunks)
        # and one global, as Gemma 3's pattern.
        layer_types = ["sliding_attention"] * 5 + ["full_attention"]
        return {**common, "model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"],
                "num_hidden_layers": 6, "num_key_value_heads": 1, "head_dim": 32, "hidden_activation": "gelu_pytorch_tanh",
                "query_pre_attn_scalar": 32, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
                "sliding_window": 32, "layer_types": layer_types, "sliding_window_pattern": 6,
                "final_logit_softcapping": None, "attn_logit_softcapping": None, "tie_word_embeddings": True,
                "rope_scaling": None, "pad_token_id": 0}
    raise ValueError(f"unknown family {family}")


def _weights(family, cfg, rng):
    """HF tensor name -> float32 array, in the family's own layout ([out, in] matrices)."""
    d, f, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or d // nh
    V = cfg["vocab_size"]
    gemma = family == "gemma3"

    def mat(out, inp, gain=1.0):
        return (rng.standard_normal((out, inp)) * (gain / np.sqrt(inp))).astype(np.float32)

    def norm(n):
        # Gemma stores the offset from 1 (its RMSNorm multiplies by 1 + w); the others the weight.
        noise = 0.1 * rng.standard_normal(n)
        return (noise if gemma else 1.0 + noise).astype(np.float32)

    # Logits of standard deviation about LOGIT_GAIN: the output matrix (or, tied, the embedding
    # table) at LOGIT_GAIN/sqrt(d); an untied table at 1/sqrt(d) (it feeds RMS norms, so its scale
    # hardly matters); Gemma multiplies its embeddings by sqrt(d) as it reads them.
    # Gemma's table stays at 1/sqrt(d) (scaled up, a tied table at LOGIT_GAIN would swamp the
    # residual stream and every position would predict its own token): its final norm's weight
    # carries the gain instead.
    tied_gain = LOGIT_GAIN if cfg["tie_word_embeddings"] and not gemma else 1.0
    w = {"model.embed_tokens.weight": mat(V, d, tied_gain)}
    for i in range(L):
        p = f"model.layers.{i}."
        w[p + "input_layernorm.weight"] = norm(d)
        w[p + "post_attention_layernorm.weight"] = norm(d)
        if family == "phi3":
            w[p + "self_attn.qkv_proj.weight"] = np.concatenate([mat(nh * hd, d, 2.0), mat(nkv * hd, d, 2.0),
                                                                 mat(nkv * hd, d)])
            w[p + "self_attn.o_proj.weight"] = mat(d, nh * hd)
            w[p + "mlp.gate_up_proj.weight"] = np.concatenate([mat(f, d), mat(f, d)])
            w[p + "mlp.down_proj.weight"] = mat(d, f)
            continue
        w[p + "self_attn.q_proj.weight"] = mat(nh * hd, d, 2.0)
        w[p + "self_attn.k_proj.weight"] = mat(nkv * hd, d, 2.0)
        w[p + "self_attn.v_proj.weight"] = mat(nkv * hd, d)
        w[p + "self_attn.o_proj.weight"] = mat(d, nh * hd)
        if family == "qwen2":
            for n, k in (("q", nh), ("k", nkv), ("v", nkv)):
                w[p + f"self_attn.{n}_proj.bias"] = (0.5 * rng.standard_normal(k * hd)).astype(np.float32)
        if family in ("qwen3", "gemma3"):
            w[p + "self_attn.q_norm.weight"] = norm(hd)
            w[p + "self_attn.k_norm.weight"] = norm(hd)
        if gemma:
            w[p + "pre_feedforward_layernorm.weight"] = norm(d)
            w[p + "post_feedforward_layernorm.weight"] = norm(d)
        w[p + "mlp.gate_proj.weight"] = mat(f, d)
        w[p + "mlp.up_proj.weight"] = mat(f, d)
        w[p + "mlp.down_proj.weight"] = mat(d, f)
    w["model.norm.weight"] = norm(d) + np.float32(LOGIT_GAIN - 1 if gemma else 0)
    if not cfg["tie_word_embeddings"]:
        w["lm_head.weight"] = mat(V, d, LOGIT_GAIN)
    return w


def _bf16(a):
    """float32 -> bfloat16 bits, round to nearest even (as torch's .to(torch.bfloat16))."""
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def write_safetensors(path, tensors, dtype):
    """tensors: name -> float32 array, stored as dtype ("F32" or "BF16"), in name order."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        a = tensors[name]
        raw = (_bf16(a) if dtype == "BF16" else a.astype("<f4")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(h)))
        out.write(h)
        for b in blobs:
            out.write(b)


def make(family, directory, corpus_path, dtype="F32", seed=None):
    """Writes the checkpoint of `family` into `directory`; returns its config dict. The weights
    depend only on the family (seeded by its name), whatever the dtype: a BF16 checkpoint holds
    the F32 one's weights rounded to BF16."""
    os.makedirs(directory, exist_ok=True)
    with open(corpus_path, "rb") as f:
        tok = tokenizer_json(f.read())
    n_vocab = len(tok["model"]["vocab"]) + len(tok["added_tokens"])
    bos, eos = tok["added_tokens"][0]["id"], tok["added_tokens"][1]["id"]
    cfg = _config(family, n_vocab, bos, eos)
    cfg["torch_dtype"] = "bfloat16" if dtype == "BF16" else "float32"
    rng = np.random.default_rng(seed if seed is not None else sum(map(ord, family)) * 7919)
    write_safetensors(os.path.join(directory, "model.safetensors"), _weights(family, cfg, rng), dtype)
    with open(os.path.join(directory, "config.json"), "w") as out:
        json.dump(cfg, out, indent=2)
    with open(os.path.join(directory, "tokenizer.json"), "w") as out:
        json.dump(tok, out, ensure_ascii=False)
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as out:
        json.dump({"bos_token": BOS, "eos_token": EOS, "add_bos_token": True, "add_eos_token": False,
                   "model_max_length": 1024, "tokenizer_class": "PreTrainedTokenizerFast",
                   "clean_up_tokenization_spaces": False}, out, indent=2)
    with open(os.path.join(directory, "generation_config.json"), "w") as out:
        json.dump({"bos_token_id": bos, "eos_token_id": eos, "do_sample": True, "temperature": 0.7, "top_p": 0.9,
                   "top_k": 40}, out, indent=2)
    return cfg
