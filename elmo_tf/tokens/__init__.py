"""From text to ids: lines of whitespace-separated tokens, and the two ways a model maps a token.

==================  ==============================================================
``text_lines``      every command's reader of lines: bounded, decoded or refused by line
``characters``      bilm-tf's scheme: a token's UTF-8 bytes as 50 character ids
``codepoints``      ELMoForManyLangs' scheme: the model's own code-point and word tables
``token_mappers``   the one choice between them, made by a model's config
==================  ==============================================================
"""
