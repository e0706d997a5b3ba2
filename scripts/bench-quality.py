#!/usr/bin/env python3
"""The scoring side of `docket bench search-quality`.

Why: the evaluation set comes with its own passage matcher (check.py's passage_match); scoring
with it, rather than with a re-implementation, keeps our figures comparable with anyone else's
on the same set. `docket bench search-quality` writes every search's hits to a JSON file and
calls this script (with the bench venv's Python when the reference BM25 is wanted).

Usage: bench-quality.py HITS_JSON CHECK_PY
Prints a table per mode (overall, per language, per kind), the fusion methods side by side,
how often unanswerable questions stay silent, how well relevance matches the observed rate of
answers, the reference BM25's top-10 overlap, and last one JSON line. With "fit" in the input,
it also fits the relevance models (scripts/relevance_fit.py) and prints them as Rust constants.
"""

import importlib.util
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from collections import defaultdict

K = 10


def load_check(path):
    spec = importlib.util.spec_from_file_location("check", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ranks(question, hits, check):
    """(doc rank, passage rank), 1-based, None when not in the top K."""
    wanted = {os.path.basename(question["expected_file"])}
    wanted |= {os.path.basename(f) for f in question["also_in"].split() if f}
    doc = passage = None
    for rank, hit in enumerate(hits[:K], start=1):
        if doc is None and hit["filename"] in wanted:
            doc = rank
        if passage is None and check.passage_match(hit["text"], question["evidence"]):
            passage = rank
    return doc, passage


def metrics(pairs):
    n = len(pairs)
    if n == 0:
        return {}

    def at(values, k):
        return round(sum(1 for v in values if v is not None and v <= k) / n, 3)

    docs = [d for d, _ in pairs]
    passages = [p for _, p in pairs]
    return {
        "n": n,
        "doc@1": at(docs, 1),
        "doc@3": at(docs, 3),
        "passage@1": at(passages, 1),
        "passage@5": at(passages, 5),
        "passage@10": at(passages, 10),
        "mrr": round(sum(1 / p for p in passages if p) / n, 3),
        "no_hits": None,
    }


def table(title, rows):
    columns = ["doc@1", "doc@3", "passage@1", "passage@5", "passage@10", "mrr"]
    print(f"\n{title}")
    print(f"  {'':<24} {'n':>3} " + " ".join(f"{c:>10}" for c in columns))
    for name, m in rows:
        print(f"  {name:<24} {m['n']:>3} " + " ".join(f"{m[c]:>10.3f}" for c in columns))


def reference_overlap(reference):
    """Top-10 overlap of docket's text mode with bm25s (Lucene's BM25, k1 1.2, b 0.75)."""
    import bm25s
    import numpy as np

    retriever = bm25s.BM25(method="lucene", k1=1.2, b=0.75)
    retriever.index(reference["tokens"], show_progress=False)
    vocabulary = {t for doc in reference["tokens"] for t in doc}
    overlaps = []
    for query, ours in zip(reference["queries"], reference["ours"]):
        terms = [t for t in query if t in vocabulary]
        if not terms:
            overlaps.append(1.0 if not ours else 0.0)
            continue
        scores = retriever.get_scores(terms)
        positive = int(np.count_nonzero(scores > 0))
        top = np.argsort(-scores, kind="stable")[: min(K, positive)]
        theirs = {reference["ids"][i] for i in top}
        want = max(len(theirs), len(ours))
        overlaps.append(len(theirs & set(ours)) / want if want else 1.0)
    return round(sum(overlaps) / len(overlaps), 3), round(min(overlaps), 3)


def main():
    hits_path, check_path = sys.argv[1], sys.argv[2]
    check = load_check(check_path)
    with open(hits_path, encoding="utf-8") as f:
        data = json.load(f)
    questions = data["questions"]
    summary = {}
    for mode, per_query in data["runs"].items():
        pairs = [ranks(q, hits, check) for q, hits in zip(questions, per_query)]
        overall = metrics(pairs)
        overall["no_hits"] = sum(1 for hits in per_query if not hits)
        by = {"lang": defaultdict(list), "kind": defaultdict(list)}
        for q, pair in zip(questions, pairs):
            by["lang"][q["lang"]].append(pair)
            # A lang like "ko-en" is a question in one language about a passage in another.
            pairing = "cross-lingual" if "-" in q["lang"] else "same-language"
            by["lang"][pairing].append(pair)
            by["kind"][q["kind"]].append(pair)
        summary[mode] = {
            "overall": overall,
            "lang": {k: metrics(v) for k, v in sorted(by["lang"].items())},
            "kind": {k: metrics(v) for k, v in sorted(by["kind"].items())},
        }
    print(f"search quality: {len(questions)} questions, model {data['model_version']}"
          f" (semantic: {data['semantic']}), ingest {data['ingest']}")
    for mode in ("vector", "text", "hybrid", "hybrid:all"):
        if mode not in summary:
            continue
        s = summary[mode]
        rows = [("all", s["overall"])]
        rows += [(f"lang {k}", m) for k, m in s["lang"].items()]
        rows += [(f"kind {k}", m) for k, m in s["kind"].items()]
        fusion = f", fusion {data['default_fusion']}" if mode == "hybrid" else ""
        table(f"{mode}{fusion}: {s['overall']['no_hits']} questions without hits, "
              f"{data['mean_ms_per_query'][mode]} ms per query", rows)
    pairs = [("vector", "vector:all"), ("text", "text:all"), ("hybrid", "hybrid:all")]
    print("\nthe default min_relevance against every hit (passage@5):")
    for page, everything in pairs:
        if page in summary and everything in summary:
            a = summary[page]["overall"]["passage@5"]
            b = summary[everything]["overall"]["passage@5"]
            print(f"  {page:<8} {a:.3f} against {b:.3f} (drop {b - a:+.3f})")
    fusions = [(m, s["overall"]) for m, s in summary.items()
               if m.startswith("hybrid:") and ":share" not in m]
    if fusions:
        table("hybrid fusion methods (overall)", fusions)
        print("  Korean passage@5: " + ", ".join(
            f"{m} {s['lang'].get('ko', {}).get('passage@5', 0):.3f}" for m, s in summary.items()))
    shares = [(m, s) for m, s in summary.items() if ":share" in m]
    if shares:
        table("centring shares (overall; default share in the rows above)",
              [(m, s["overall"]) for m, s in shares])
        for m, s in shares:
            langs = s["lang"]
            print(f"  {m}: cross-lingual passage@5 "
                  f"{langs.get('cross-lingual', {}).get('passage@5', 0):.3f}, same-language "
                  f"{langs.get('same-language', {}).get('passage@5', 0):.3f}")
    out = {
        "bench": "search-quality",
        "model_version": data["model_version"],
        "questions": len(questions),
        "default_fusion": data["default_fusion"],
    }
    for mode in ("vector", "text", "hybrid", "hybrid:all"):
        if mode in summary:
            o = summary[mode]["overall"]
            out[mode] = {k: o[k] for k in ("doc@1", "doc@3", "passage@1", "passage@5", "passage@10", "mrr", "no_hits")}
            out[mode]["ko_passage@5"] = summary[mode]["lang"].get("ko", {}).get("passage@5")
            out[mode]["lang_passage@5"] = {k: m["passage@5"] for k, m in summary[mode]["lang"].items()}
    out["centring_shares"] = {m: {"passage@1": s["overall"]["passage@1"],
                                  "passage@5": s["overall"]["passage@5"],
                                  "lang_passage@5": {k: v["passage@5"] for k, v in s["lang"].items()}}
                              for m, s in shares}
    out["fusions"] = {m[len("hybrid:"):]: {"passage@1": s["passage@1"], "passage@5": s["passage@5"], "mrr": s["mrr"]}
                      for m, s in fusions}
    silent = {}
    for mode, answers in data.get("unanswerable", {}).items():
        quiet = sum(1 for a in answers if not any(h["relevance"] >= 0.5 for h in a["hits"]))
        silent[mode] = round(quiet / len(answers), 3) if answers else None
        loud = [a["query"] for a in answers if any(h["relevance"] >= 0.5 for h in a["hits"])]
        print(f"\nunanswerable questions, {mode}: {quiet} of {len(answers)} silent "
              f"(no hit with relevance >= 0.5)" + (f"; not: {loud}" if loud else ""))
    out["unanswerable_silent"] = silent
    out["centring"] = data.get("centring")
    import relevance_fit
    for mode in ("vector:all", "text:all", "hybrid:all"):
        if mode in data["runs"]:
            rows = relevance_fit.labelled(questions, data["runs"][mode], check)
            print(f"\nrelevance against the observed rate of answers, {mode}:")
            out.setdefault("calibration", {})[mode] = relevance_fit.reliability(rows)
    if data.get("fit"):
        relevance_fit.fit_and_print(questions, data["runs"], check)
    if data.get("reference"):
        mean, worst = reference_overlap(data["reference"])
        print(f"\nreference BM25 (bm25s, lucene variant): top-10 overlap with docket's text mode "
              f"mean {mean}, worst query {worst}")
        out["bm25_top10_overlap"] = mean
    print(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    main()
