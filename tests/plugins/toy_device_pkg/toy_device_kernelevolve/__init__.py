"""A third-party plug-in for kernelevolve: the `toydev` accelerator and its `toydl` language.

The accelerator is not the CPU as kernelevolve sees it: it is timed in the candidate's own
process with its own synchronize, asks Ray for its own resource, and names its own stream
module for the integrity rules. Its tensors live in host memory (torch device "cpu"), so it
runs anywhere. Nothing here is part of kernelevolve; the entry points in
toy_device_kernelevolve-0.1.dist-info are how kernelevolve finds it.
"""
