#!/usr/bin/env python3
"""Computes reference embeddings with sentence-transformers for fixtures/reference-vectors.json.

Why: docket's local embedder (src/embed/local.rs) must give the same vectors as the Python stack
people know, for every kind of text a document yields. This script is the reference side: it runs
the model directory that scripts/get-model.sh installs through sentence-transformers on torch
(CPU) and writes each text with its vector. The Rust test (tests/api/local.rs) compares against
the committed output, so no Python is needed at test time.

Usage (in a throwaway venv with sentence-transformers and torch installed):
    python3 scripts/reference-vectors.py [MODEL_DIR] > fixtures/reference-vectors.json
MODEL_DIR defaults to $DOCKET_MODEL_DIR, else ~/.cache/docket/models/all-MiniLM-L6-v2.
"""

import json
import os
import sys

PARAGRAPHS = [
    "The invoice lists three items: consulting hours, a travel allowance and a software licence. "
    "Payment is due within thirty days of the invoice date; late payments accrue interest at two "
    "percent per month. Questions about the amounts should go to the accounts team before the due "
    "date, quoting the invoice number printed in the top right corner.",
    "Photosynthesis converts light energy into chemical energy. In the chloroplasts, chlorophyll "
    "absorbs mostly blue and red light, water is split to release oxygen, and the energy captured "
    "is stored in sugars that the plant later burns for growth. Without it, the oxygen in the "
    "atmosphere would slowly disappear.",
    "The committee met on Tuesday to review the budget for the new library wing. After a long "
    "discussion about heating costs, it agreed to postpone the decision on solar panels until the "
    "engineers deliver their report, expected in early spring. The chair thanked the volunteers "
    "who had organised the book sale.",
    "To reset the router, hold the small button on the back for ten seconds until the lights "
    "flash amber. The device restarts with factory settings: the network name and password are "
    "printed on the sticker underneath. Reconnect your computer, open the setup page, and choose "
    "a new password before doing anything else.",
    "Medieval cathedrals took generations to build. Masons passed their knowledge from master to "
    "apprentice, and the design often changed halfway through as styles evolved, which is why many "
    "naves are Romanesque while their towers are Gothic. Funding came from tithes, pilgrims and "
    "wealthy patrons hoping to secure a place in heaven.",
]

CODE = [
    "fn main() {\n    let xs: Vec<u32> = (1..=10).collect();\n    println!(\"{}\", xs.iter().sum::<u32>());\n}",
    "SELECT d.id, count(*) AS chunks\nFROM documents d JOIN chunks c ON c.document_id = d.id\n"
    "WHERE d.status = 'ready'\nGROUP BY d.id ORDER BY chunks DESC LIMIT 10;",
    "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n",
    "<div class=\"card\"><h2>{{ title }}</h2><p>{{ body | truncate(120) }}</p></div>",
    "$ curl -s -X POST http://127.0.0.1:8080/api/documents -F file=@report.pdf | jq .id",
]

SHORT = [
    "hello",
    "What is the capital of France?",
    "How do I reset my password?",
    "payment terms of the invoice",
    "The cat sat on the mat.",
    "Quarterly revenue grew by 12% year over year.",
    "Does the warranty cover water damage?",
    "A man is playing a guitar on stage.",
    "Error 404: page not found",
    "Ünïcödé çharacters ärë fïne",
    "naïve café résumé coöperate",
    "42",
    "e = mc^2",
    "THIS SENTENCE IS WRITTEN IN CAPITAL LETTERS",
    "Les chats dorment beaucoup pendant la journée.",
    "Der schnelle braune Fuchs springt über den faulen Hund.",
    "東京の天気は晴れです",
    "机器学习是人工智能的一个分支。",
    "😀 🎉 emoji in a sentence 👍",
    "https://example.org/path/to/resource?query=1&lang=en#section",
]

KOREAN = [
    "오늘 서울의 날씨는 맑고 따뜻합니다.",
    "이 문서는 회사의 연간 예산 계획을 설명합니다. 각 부서는 다음 달 말까지 지출 보고서를 제출해야 합니다.",
    "한국어 자연어 처리는 형태소 분석이 중요합니다.",
    "비밀번호를 잊어버렸을 때는 로그인 화면에서 비밀번호 재설정을 누르세요. "
    "등록된 이메일로 확인 링크가 전송되며, 링크는 24시간 동안 유효합니다.",
]

EMPTYISH = ["", " ", "\n\n", "...", "-", "?!", "[PAD]", "   \t  "]


def texts():
    out = []
    out += SHORT
    out += KOREAN
    out += EMPTYISH
    out += CODE
    # About 60-80 tokens each.
    out += PARAGRAPHS
    # About 250 tokens: three or four paragraphs together (under the 256-token limit or just at it).
    out.append(" ".join(PARAGRAPHS[0:3]))
    out.append(" ".join(PARAGRAPHS[1:4]))
    out.append(" ".join(PARAGRAPHS[2:5]))
    out.append("\n\n".join([PARAGRAPHS[3], PARAGRAPHS[0], PARAGRAPHS[4]]))
    # Just under the limit (about 230-255 tokens), where padding matters most within a batch.
    out.append(" ".join(PARAGRAPHS[0:3] + SHORT[1:6]))
    out.append(" ".join(PARAGRAPHS[2:5] + SHORT[4:9]))
    out.append(" ".join(PARAGRAPHS[1:4]) + "\n" + CODE[0])
    # Over-length: truncated at the model's max sequence length.
    out.append(" ".join(PARAGRAPHS))
    out.append(" ".join(PARAGRAPHS * 3))
    out.append("\n".join(CODE * 4))
    out.append(" ".join(KOREAN * 6))
    out.append("word " * 600)
    return out


def main():
    from sentence_transformers import SentenceTransformer  # imported late: slow and optional

    default_dir = os.path.expanduser("~/.cache/docket/models/all-MiniLM-L6-v2")
    model_dir = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("DOCKET_MODEL_DIR", default_dir)
    model = SentenceTransformer(model_dir, device="cpu")
    items = texts()
    vectors = model.encode(items, batch_size=16, normalize_embeddings=True, convert_to_numpy=True)
    tokenizer = model.tokenizer
    fixture = {
        "generator": "scripts/reference-vectors.py",
        "model": os.path.basename(os.path.normpath(model_dir)),
        "max_seq_length": model.max_seq_length,
        "texts": [
            {
                "text": text,
                # Tokens the model sees (special tokens included, after truncation).
                "tokens": len(tokenizer(text, truncation=True, max_length=model.max_seq_length)["input_ids"]),
                "vector": [round(float(v), 6) for v in vector],
            }
            for text, vector in zip(items, vectors)
        ],
    }
    json.dump(fixture, sys.stdout, ensure_ascii=False, indent=None, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
