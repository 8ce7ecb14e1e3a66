"""One module per benchmark kind; each calls registry.register() on import.

To support a new benchmark, add `<benchmark>.py` here (the name of its
JSON "benchmark" field) with its figures and tables; see mover.py.
"""
