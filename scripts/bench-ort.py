#!/usr/bin/env python3
"""The ONNX Runtime side of `docket bench embed`: multilingual-e5-small exported from the same
converted directory docket loads, run by ONNX Runtime in f32 and with its dynamic int8
quantisation.

Why: docket's int8 encoder is only worth its place next to what people would otherwise deploy
for an int8 BERT on a CPU, and ONNX Runtime's `quantize_dynamic` (int8 weights, activations
quantised per call) is that. Same weights, texts, batches and threads as the other sides, in
the same run.

Usage: bench-ort.py MODEL_DIR WORK_DIR PRECISION TEXTS_JSON THREADS MIN_SECONDS
- MODEL_DIR: the Hugging Face directory (config.json, model.safetensors, tokenizer.json).
- WORK_DIR: where the exports are kept (model-exported.onnx, then model.onnx, model-int8.onnx), made once: torch exports
  the model (`torch.onnx.export`), ONNX Runtime's BERT optimizer fuses attention, layer norms
  and GELU (what ONNX Runtime recommends for BERT on a CPU), and
  `onnxruntime.quantization.quantize_dynamic` quantises the fused graph (int8 weights).
- PRECISION: f32 or int8.
TEXTS_JSON is {"short": [...], "long": [...], "batches": [1, 16, 64]}. Texts are embedded as
passages (the `passage: ` prefix, as docket embeds chunks), padded to the longest of their
batch (how ONNX Runtime runs a batch), mean-pooled over the mask and normalised. Prints one JSON
object per (length, batch): {"length", "batch", "threads", "texts", "tokens", "seconds"};
tokens are the tokenizer's count without padding (prefix and special tokens included).
"""

import json
import os
import sys
import time

MAX_TOKENS = 512


def export(model_dir, work_dir):
    """Writes model.onnx and model-int8.onnx into work_dir unless both are there."""
    raw_path = os.path.join(work_dir, "model-exported.onnx")
    f32_path = os.path.join(work_dir, "model.onnx")
    int8_path = os.path.join(work_dir, "model-int8.onnx")
    if os.path.exists(f32_path) and os.path.exists(int8_path):
        return f32_path, int8_path
    os.makedirs(work_dir, exist_ok=True)
    import onnx
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.optimizer import optimize_model
    from transformers import BertModel

    if not os.path.exists(raw_path):
        # Eager attention: the graph ONNX Runtime's optimizer recognises and fuses.
        bert = BertModel.from_pretrained(model_dir, add_pooling_layer=False, attn_implementation="eager").eval()

        class Encoder(torch.nn.Module):
            """The encoder's last hidden states, called with the two inputs by name."""

            def __init__(self, bert):
                super().__init__()
                self.bert = bert

            def forward(self, input_ids, attention_mask):
                return self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

        model = Encoder(bert).eval()
        ids = torch.ones((2, 16), dtype=torch.int64)
        mask = torch.ones((2, 16), dtype=torch.int64)
        partial = raw_path + ".partial"
        with torch.inference_mode():
            torch.onnx.export(
                model,
                (ids, mask),
                partial,
                input_names=["input_ids", "attention_mask"],
                output_names=["last_hidden_state"],
                dynamic_axes={
                    "input_ids": {0: "batch", 1: "tokens"},
                    "attention_mask": {0: "batch", 1: "tokens"},
                    "last_hidden_state": {0: "batch", 1: "tokens"},
                },
                opset_version=17,
                dynamo=False,
            )
        os.replace(partial, raw_path)
    # ONNX Runtime's own recipe for BERT on a CPU: fuse attention, layer norms and GELU
    # (onnxruntime.transformers' optimizer), then quantise the fused graph's weights.
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    fused = optimize_model(
        raw_path,
        model_type="bert",
        num_heads=config["num_attention_heads"],
        hidden_size=config["hidden_size"],
    )
    partial = f32_path + ".partial.onnx"
    fused.save_model_to_file(partial)
    os.replace(partial, f32_path)
    partial = int8_path + ".partial.onnx"
    quantize_dynamic(
        f32_path,
        partial,
        weight_type=QuantType.QInt8,
        # The fused operators are outside the standard domain, where shape inference stops.
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    os.replace(partial, int8_path)
    return f32_path, int8_path


def main():
    model_dir, work_dir, precision = sys.argv[1], sys.argv[2], sys.argv[3]
    texts_path, threads, min_seconds = sys.argv[4], int(sys.argv[5]), float(sys.argv[6])
    if precision not in ("f32", "int8"):
        sys.exit(f"precision {precision!r}: f32 or int8")
    f32_path, int8_path = export(model_dir, work_dir)

    import numpy as np
    import onnxruntime as ort
    from tokenizers import Tokenizer

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(
        f32_path if precision == "f32" else int8_path,
        options,
        providers=["CPUExecutionProvider"],
    )
    tokenizer = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tokenizer.enable_truncation(MAX_TOKENS)
    tokenizer.enable_padding(pad_id=1, pad_token="<pad>")

    def embed(group):
        encodings = tokenizer.encode_batch(["passage: " + t for t in group])
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        (hidden,) = session.run(None, {"input_ids": ids, "attention_mask": mask})
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    with open(texts_path, encoding="utf-8") as f:
        spec = json.load(f)
    for length in ("short", "long"):
        texts = spec[length]
        tokens_per_pass = sum(sum(e.attention_mask) for e in tokenizer.encode_batch(["passage: " + t for t in texts]))
        for batch in spec["batches"]:
            groups = [texts[start : start + batch] for start in range(0, len(texts), batch)]

            def one_pass():
                for group in groups:
                    embed(group)

            one_pass()  # warm-up
            passes, started = 0, time.perf_counter()
            while True:
                one_pass()
                passes += 1
                elapsed = time.perf_counter() - started
                if elapsed >= min_seconds:
                    break
            print(
                json.dumps(
                    {
                        "length": length,
                        "batch": batch,
                        "threads": threads,
                        "texts": passes * len(texts),
                        "tokens": passes * tokens_per_pass,
                        "seconds": elapsed,
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
