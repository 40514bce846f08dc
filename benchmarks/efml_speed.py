#!/usr/bin/env python
"""An ELMoForManyLangs-shape model against the published ``original`` shape, side by side.

Both with random weights, in one process, on the same sentences, through ``ELMo.embed`` (the
path of ``elmo-tf embed``, with its thread pools: ``elmo_tf.configure_threads()``):

- ``original``: 2x4096_512, 2048 filters, 2 highway layers, 16-wide characters (UTF-8 bytes);
- ``efml``: ELMoForManyLangs' standard config: the same biLM, 50-wide characters from a table
  of ``--chars`` code points, and a 100-wide word embedding of ``--words`` words, its
  projection reading 2148 values (ids and tables as ``elmo-tf convert`` makes them).

Workloads: ``repeated`` is ``--sentences`` (default examples/sentences.txt) repeated to
``--n`` sentences (few distinct tokens: the biLSTM's rate); ``distinct`` the same with every
token made unique (``word_17``: the character encoder, and EFML's word lookup, on every
token). Each timed pass starts with an empty token cache. The passes alternate between the
models (A B A B ...), after one untimed pass each; the table gives the median real tokens/s of
``--repeats`` passes with their range, and the ratio of the medians and of the best passes
(another process on the machine only ever slows a pass down).

Run only on an otherwise idle machine (``uptime``: load < 0.5)::

    python benchmarks/efml_speed.py                 # n 256, batch 64, 3 repeats
    python benchmarks/efml_speed.py --quick         # smoke test: n 16, 1 repeat
"""

import argparse
import os
import platform
import sys

from timing import Timing, read_sentences, seconds

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _configs(chars, words):
    from elmo_tf import presets
    from elmo_tf.config import ElmoConfig
    from elmo_tf.foreign.efml_folder import STANDARD_CONFIG
    from elmo_tf.tokens import codepoints

    original = presets.preset("original")
    embedder, encoder = STANDARD_CONFIG["token_embedder"], STANDARD_CONFIG["encoder"]
    n_chars = chars + len(codepoints.CHAR_SPECIALS) + 1
    efml = ElmoConfig(
        filters=tuple(map(tuple, embedder["filters"])),
        char_embedding_dim=embedder["char_dim"],
        n_highway=embedder["n_highway"],
        activation=embedder["activation"],
        projection_dim=encoder["projection_dim"],
        lstm_dim=encoder["dim"],
        n_lstm_layers=encoder["n_layers"],
        cell_clip=float(encoder["cell_clip"]),
        proj_clip=float(encoder["proj_clip"]),
        n_characters=n_chars,
        character_scheme=codepoints.CODEPOINTS,
        special_characters=tuple(range(chars + 1, n_chars)),
        word_embedding_dim=embedder["word_dim"],
        n_words=words + 5,
        special_words=(1, 2, 3, 4),
    )
    return original, efml


def _efml_tables(sentences, chars, words):
    """EFML-style dictionaries: the corpus's characters first (then other code points up to
    ``chars``), the six specials; ``<oov> <bos> <eos> <pad>``, the corpus's words, fillers."""
    from elmo_tf.tokens import codepoints

    seen = list(dict.fromkeys(c for s in sentences for t in s for c in t))
    extra = (chr(c) for c in range(0x4E00, 0x4E00 + chars) if chr(c) not in seen)
    char_list = (seen + list(extra))[:chars]
    char_lexicon = {c: i for i, c in enumerate(char_list)}
    for name in codepoints.CHAR_SPECIALS:
        char_lexicon[codepoints.special_token(name)] = len(char_lexicon)
    vocabulary = ["<oov>", "<bos>", "<eos>", "<pad>"]
    vocabulary += list(dict.fromkeys(t for s in sentences for t in s))[: words // 2]
    vocabulary += [f"filler{i}" for i in range(words - len(vocabulary) + 4)]
    word_lexicon = {w: i for i, w in enumerate(vocabulary)}
    table, _, _ = codepoints.CodepointVocabulary.from_lexicons(char_lexicon, word_lexicon)
    return table


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", default=os.path.join(ROOT, "examples", "sentences.txt"))
    parser.add_argument("--n", type=int, default=256, help="sentences per pass")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--chars", type=int, default=5000, help="code points in the char table")
    parser.add_argument("--words", type=int, default=150_000, help="words in the vocabulary")
    parser.add_argument("--quick", action="store_true", help="n 16, 1 repeat")
    args = parser.parse_args()
    if args.quick:
        args.n, args.repeats = 16, 1

    import elmo_tf
    from elmo_tf.models import ELMo
    from elmo_tf.tokens import token_mappers

    elmo_tf.configure_threads()
    base = read_sentences(args.sentences)
    repeated = [base[i % len(base)] for i in range(args.n)]
    distinct = [[f"{t}_{i}" for t in s] for i, s in enumerate(repeated)]
    workloads = {"repeated": repeated, "distinct": distinct}
    original_config, efml_config = _configs(args.chars, args.words)
    models = {"original": ELMo(original_config), "efml": ELMo(efml_config)}
    table = _efml_tables(repeated + distinct, args.chars, args.words)
    models["efml"].token_mapper = token_mappers.mapper_for(efml_config, table)
    for name, model in models.items():
        print(f"{name}: {model.config.describe()}, {model.config.parameter_count:,} weights",
              file=sys.stderr)  # fmt: skip

    rows = []
    for workload, sentences in workloads.items():
        tokens = sum(len(s) for s in sentences)

        def one_pass(model, sentences=sentences):
            model.token_cache.clear()
            model.embed(sentences, batch_size=args.batch_size)

        for model in models.values():
            one_pass(model)  # untimed: compiles and warms
        times = {name: [] for name in models}
        for _ in range(args.repeats):
            for name, model in models.items():
                times[name].append(seconds(lambda m=model: one_pass(m)))
        for name in models:
            run = Timing(times[name])
            rate = tokens / run.median
            low, high = tokens / max(run.seconds), tokens / min(run.seconds)
            rows.append((workload, name, rate, low, high))
            print(f"{workload} {name}: {rate:,.0f} tokens/s", file=sys.stderr, flush=True)

    cpu = _cpu_name()
    print(f"\n{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"{args.n} sentences, batch {args.batch_size}, {args.repeats} passes\n")  # fmt: skip
    print("| workload | model | tokens/s (median) | range | efml / original (median, best) |")
    print("|---|---|---:|---|---:|")
    rates = {(w, m): (r, h) for w, m, r, _, h in rows}
    for workload, name, rate, low, high in rows:
        ratio = ""
        if name == "efml":
            median, best = rates[(workload, "original")]
            ratio = f"{rate / median:.2f}, {high / best:.2f}"
        print(f"| {workload} | {name} | {rate:,.0f} | {low:,.0f}-{high:,.0f} | {ratio} |")


def _cpu_name():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


if __name__ == "__main__":
    main()
