"""Probes of what a model's vectors hold: ``word_senses`` (does a word's vector follow its
sense?), behind ``elmo-tf senses``."""
