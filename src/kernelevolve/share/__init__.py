"""Kernels that travel: export a registered kernel in the Hugging Face kernels layout with its
evidence inside (export.py), the load-time gate (verify.py), and import into another machine's
registry in shadow (importer.py). The loader that travels with an export is shipped.py.
"""
