"""A third-party plug-in for kernelevolve: the `toy` platform and the `toyl` language.

Nothing here is part of kernelevolve; the entry points in toy_kernelevolve-0.1.dist-info are
how kernelevolve finds it (tests/test_plugins.py puts this folder on PYTHONPATH).
"""
