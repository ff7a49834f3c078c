"""A third-party plug-in for kernelevolve: the `toyc` language, for the built-in `cpu` platform.

It declares the platform it runs on (`platforms = ("cpu",)`); kernelevolve's cpu platform module
is not edited. The entry point in toy_lang_kernelevolve-0.1.dist-info is how kernelevolve finds it.
"""
