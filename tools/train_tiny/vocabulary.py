"""A small CLIP BPE vocabulary for the shapes model: the byte alphabet, the special tokens, and the
merges of the real CLIP vocabulary that its words need.

Why this reproduces CLIP's tokenization of those words exactly: byte-pair encoding applies, at each
step, the lowest-ranked merge among the pairs present in the word. Keeping the subset of CLIP's merges
that fire on our words, in their original order, leaves that choice unchanged at every step for those
words. Other words fall back to shorter pieces (down to single bytes, which are all in the vocabulary),
so any prompt still tokenizes.
"""
import json
import re
from pathlib import Path

# Every word of the training captions, and a few common words that prompts tend to contain.
WORDS = ["a", "an", "the", "on", "in", "of", "and", "with", "background", "shape",
         "red", "green", "blue", "yellow", "white", "black", "purple", "orange",
         "circle", "square", "triangle", "star",
         "top", "bottom", "left", "right", "center", "centre", "middle", "corner"]


def bytes_to_unicode() -> dict:
    """GPT-2/CLIP's reversible map from bytes to printable characters."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    codes = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            codes.append(256 + extra)
            extra += 1
    return dict(zip(printable, [chr(c) for c in codes]))


def read_merges(path: Path) -> list:
    lines = path.read_text(encoding="utf-8").split("\n")
    return [tuple(line.split()) for line in lines[1:] if line.strip()]


def bpe(word: str, ranks: dict) -> tuple:
    """CLIP's BPE of one word; returns (pieces, merges applied in order)."""
    pieces = list(word[:-1]) + [word[-1] + "</w>"]
    applied = []
    while len(pieces) > 1:
        pairs = [(ranks.get((a, b), float("inf")), i) for i, (a, b) in enumerate(zip(pieces, pieces[1:]))]
        rank, _ = min(pairs)
        if rank == float("inf"):
            break
        pair = next((a, b) for a, b in zip(pieces, pieces[1:]) if ranks.get((a, b)) == rank)
        applied.append(pair)
        merged, i = [], 0
        while i < len(pieces):
            if i + 1 < len(pieces) and (pieces[i], pieces[i + 1]) == pair:
                merged.append(pieces[i] + pieces[i + 1])
                i += 2
            else:
                merged.append(pieces[i])
                i += 1
        pieces = merged
    return tuple(pieces), applied


def build(clip_merges: Path, out_dir: Path) -> dict:
    """Writes vocab.json and merges.txt into out_dir; returns the vocabulary."""
    merges = read_merges(clip_merges)
    ranks = {m: i for i, m in enumerate(merges)}
    byte_map = bytes_to_unicode()
    needed = set()
    for word in WORDS:
        assert re.fullmatch(r"[a-z]+", word), word
        pieces, applied = bpe("".join(byte_map[b] for b in word.encode()), ranks)
        assert pieces == (word + "</w>",), f"CLIP splits {word!r} into {pieces}; pick words that are whole tokens"
        needed.update(applied)
    kept = sorted(needed, key=ranks.__getitem__)
    base = list(byte_map.values())
    tokens = base + [c + "</w>" for c in base] + ["".join(m) for m in kept] + ["<|startoftext|>", "<|endoftext|>"]
    vocab = {t: i for i, t in enumerate(tokens)}
    assert len(vocab) == len(tokens), "duplicate token"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (out_dir / "merges.txt").write_text("#version: 0.2\n" + "\n".join(" ".join(m) for m in kept) + "\n",
                                        encoding="utf-8")
    return vocab


if __name__ == "__main__":
    import sys
    v = build(Path(sys.argv[1]), Path(sys.argv[2]))
    print(len(v), "tokens")
