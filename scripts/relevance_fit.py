"""Fits and checks docket's relevance models (src/search/relevance.rs) on the hits of
`docket bench search-quality`.

Why a script beside the bench: the calibration is a measurement of the development set, so it
must be reproducible from a command (`docket bench search-quality --fit`) and its quality
reported with it, not typed in by hand. Each mode gets a logistic model of "this hit holds the
passage that answers the question" (the evaluation's own passage_match) over the hit's signals,
fitted by Newton's method with a small ridge penalty (a few parameters over some thousand hits;
the penalty keeps a separable feature from running off to infinity). Only answerable questions
are fitted on: the unanswerable ones stay a held-out check of "no good match".

Imported by bench-quality.py; needs numpy only for fitting (the bench venv has it).
"""

import math

# Which signals each mode's model reads, in the order of the Rust `Logit` fields after `bias`.
FEATURES = {
    "vector": ("cosine", "cosine_gap"),
    "text": ("keyword", "keyword_gap"),
    "hybrid": ("cosine", "keyword", "other_language", "keyword_other", "cosine_gap", "keyword_gap"),
}
BINS = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0001)
RIDGE = 0.01


def labelled(questions, per_query, check):
    """(hit, label) for every hit of every question: label 1 when it holds the evidence."""
    rows = []
    for question, hits in zip(questions, per_query):
        for hit in hits:
            rows.append((hit, 1 if check.passage_match(hit["text"], question["evidence"]) else 0))
    return rows


def reliability(rows):
    """Prints and returns, per bin of predicted relevance, the hits, mean relevance and the
    observed share of answers; and the expected calibration error over all hits."""
    table = []
    total = len(rows)
    ece = 0.0
    for lo, hi in zip(BINS, BINS[1:]):
        inside = [(h["relevance"], y) for h, y in rows if lo <= h["relevance"] < hi]
        if not inside:
            continue
        mean = sum(p for p, _ in inside) / len(inside)
        rate = sum(y for _, y in inside) / len(inside)
        ece += len(inside) / total * abs(mean - rate)
        table.append({"bin": f"{lo:.1f}-{min(hi, 1.0):.1f}", "hits": len(inside),
                      "relevance": round(mean, 3), "answers": round(rate, 3)})
        print(f"  {lo:.1f}-{min(hi, 1.0):.1f}: {len(inside):>4} hits, mean relevance "
              f"{mean:.3f}, share that answer {rate:.3f}")
    print(f"  expected calibration error {ece:.3f} over {total} hits")
    return {"bins": table, "ece": round(ece, 3)}


def features(hit, names):
    other = 1.0 if hit.get("other_language") else 0.0
    keyword = hit.get("keyword") or 0.0
    values = {
        "cosine": hit.get("cosine") or 0.0,
        "keyword": keyword,
        "other_language": other,
        "keyword_other": other * keyword,
        "cosine_gap": hit.get("cosine_gap") or 0.0,
        "keyword_gap": hit.get("keyword_gap") or 0.0,
    }
    return [values[n] for n in names]


def fit(rows, names):
    """Ridge-penalised logistic regression by Newton's method: (bias, weights)."""
    import numpy as np

    x = np.array([[1.0] + features(h, names) for h, _ in rows])
    y = np.array([float(label) for _, label in rows])
    w = np.zeros(x.shape[1])
    penalty = np.eye(x.shape[1]) * RIDGE
    penalty[0, 0] = 0.0
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-(x @ w)))
        gradient = x.T @ (p - y) + penalty @ w
        hessian = (x * (p * (1 - p))[:, None]).T @ x + penalty
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.max(np.abs(step)) < 1e-9:
            break
    return w


def fit_and_print(questions, runs, check):
    """Fits each mode on its `:all` run (hybrid also on the min-max run's hits, so that chunks
    the current order ranks low are seen too) and prints the Rust constants."""
    pools = {
        "vector": ["vector:all"],
        "text": ["text:all"],
        "hybrid": ["hybrid:all", "hybrid:minmax:0.6", "hybrid:rrf:60"],
    }
    print("\nfitted relevance models (src/search/relevance.rs):")
    for mode, names in FEATURES.items():
        rows, seen = [], set()
        for run in pools[mode]:
            for number, (question, hits) in enumerate(zip(questions, runs.get(run, []))):
                for hit, label in labelled([question], [hits], check):
                    key = (number, hit["filename"], hit["text"])
                    if key not in seen:
                        seen.add(key)
                        rows.append((hit, label))
        w = fit(rows, names)
        positives = sum(y for _, y in rows)
        fields = {"bias": w[0]}
        fields.update({n: v for n, v in zip(names, w[1:])})
        body = ", ".join(f"{k}: {v:.3f}" for k, v in fields.items())
        print(f"  {mode}: {len(rows)} hits, {positives} answers: {body}")
        # How the fitted model would score the same hits (in-sample).
        refit = []
        for hit, y in rows:
            z = w[0] + sum(c * f for c, f in zip(w[1:], features(hit, names)))
            refit.append(({"relevance": 1.0 / (1.0 + math.exp(-z))}, y))
        reliability(refit)
