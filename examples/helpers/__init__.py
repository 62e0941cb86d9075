"""
Modules the example scripts import, beside them: not examples themselves (tests/test_examples.py runs every
``examples/*.py`` as one). Running an example puts its folder first on the path, so ``helpers`` imports as it is.
"""
