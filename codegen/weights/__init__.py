"""HugeCTR's saved weights <-> the PyTorch trainer's checkpoint (``ctrgen weights import`` / ``export``).

``layout`` maps the typed model onto HugeCTR's files (the dense file's network order, the running statistics of
``.ntp.json``, each table's keys and rows); ``files`` reads and writes those files, checking every size first;
``convert`` moves the values between them and a state_dict; ``cli`` is the command. docs/hugectr.md §5 holds the
file layout, each fact with the test that holds it.
"""
