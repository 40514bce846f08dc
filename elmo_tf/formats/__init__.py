"""elmo-tf's own file formats, each read as hostile input and written atomically.

==================  ==============================================================
``options_file``    bilm-tf's ``options.json`` (and its extension): each key's rule
``weight_file``     bilm-tf's HDF5 weights: one table of datasets, checked, then loaded
``embedding_file``  the HDF5 file of ``elmo-tf embed``: AllenNLP's former ``elmo`` layout
==================  ==============================================================
"""
