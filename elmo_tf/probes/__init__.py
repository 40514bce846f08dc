"""Probes of what a model's vectors hold: ``word_senses`` (does a word's vector follow its
sense?), behind ``elmo-tf senses``; ``fidelity`` (how far a reduced-precision run's vectors
are from float32's), behind ``benchmarks/precision.py``."""
