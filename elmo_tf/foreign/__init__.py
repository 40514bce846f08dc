"""Readers of other libraries' files, as data: bytes in, checked values out. They know nothing
of elmo-tf's model (``elmo_tf.kinds`` turns what they read into one).

=====================  ===========================================================
``torch_state_dict``   PyTorch's ``state_dict`` files (legacy and zip layouts), never run
``zip_archives``       an archive of one model folder (the NLPL repository's), as hostile input
``efml_dictionaries``  ELMoForManyLangs' ``char.dic`` and ``word.dic``
``efml_folder``        an ELMoForManyLangs model folder, every file checked against the others
``simple_elmo_vocab``  the first tokens of simple_elmo's ``vocab.txt``, which a load caches
=====================  ===========================================================
"""
