"""What elmo-tf needs of the machine it runs on, each behind one module.

===================  ==============================================================
``environment``      the ``ELMO_TF_*`` variables, each checked once
``extras``           which optional extras are installed, and the command to add one
``files``            outputs written atomically, never onto an input or a device
``untrusted_files``  inputs read bounded, as hostile files
``urls``             download addresses, shown without credentials
``native_logs``      TensorFlow's C++ start-up lines kept off the command line's stderr
``cpu_threads``      the thread pools that run the two LSTM directions side by side
===================  ==============================================================
"""
