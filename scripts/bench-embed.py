#!/usr/bin/env python3
"""The sentence-transformers side of `docket bench embed`.

Why: the local embedder's speed only means something next to the stack people would otherwise
run, on the same texts, the same machine and in the same run. `docket bench embed` calls this
script with its venv's Python (torch CPU + sentence-transformers, installed by the bench).

Usage: bench-embed.py MODEL_DIR TEXTS_JSON THREADS MIN_SECONDS
TEXTS_JSON is {"short": [...], "long": [...], "batches": [1, 16, 64]}. Prints one JSON object per
(length, batch) on stdout: {"length", "batch", "threads", "texts", "tokens", "seconds"}.
"""

import json
import sys
import time


def main():
    model_dir, texts_path, threads, min_seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(threads)
    model = SentenceTransformer(model_dir, device="cpu")
    with open(texts_path, encoding="utf-8") as f:
        spec = json.load(f)
    for length in ("short", "long"):
        texts = spec[length]
        tokens_per_pass = sum(
            len(ids) for ids in model.tokenizer(texts, truncation=True, max_length=model.max_seq_length)["input_ids"]
        )
        for batch in spec["batches"]:
            def one_pass():
                for start in range(0, len(texts), batch):
                    model.encode(
                        texts[start : start + batch],
                        batch_size=batch,
                        normalize_embeddings=True,
                        convert_to_numpy=True,
                        show_progress_bar=False,
                    )

            with torch.inference_mode():
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
