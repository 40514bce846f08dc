"""Helpers the tests, the benchmarks and ``serving/loadtest.py`` share (imported by name from
the installed package: no ``sys.path`` edits).

==================  ==============================================================
``random_weights``  official-layout weight files of random values in a given shape
``processes``       a server in a child process; its CPU, memory, threads; tables
``sotu_text``       the State of the Union text split and tokenised as for the bundled model
``onnx_stand_in``   ONNX files shaped like an export (input, outputs, metadata), no TensorFlow
``signatures``      the SavedModel export's signatures as ``SignatureSpec``s, without exporting
``memory``          the peak memory of a call (``tracemalloc``), and the bound on a parser's
==================  ==============================================================
"""
