"""The kinds of model elmo-tf reads (bilm-tf's, ELMoForManyLangs'), and the one seam that knows
them: ``model_kinds`` tells a kind from its files and turns any of them into a ``ModelContents``
(the config, the weights, the token tables); ``efml_conversion`` turns an ELMoForManyLangs
model into elmo-tf's config and weights, as keras-hub's converters fill a backbone.
"""
