"""ELMoForManyLangs (HIT-SCIR) models read as data: their dictionaries
(``dictionaries``), their model folder (``model_folder``: ``config.json``, the model config,
``char.dic``, ``word.dic`` and the two PyTorch state_dicts) and its conversion into our model's
options and weights (``conversion``). No PyTorch, and no code from the files, is ever run.
"""
