# problem: problems/softmax_small.py
# expect: load
# reason: memory limit
"""A compile bomb: twelve macro levels that each repeat the one below four times, over a 64 KiB
string literal, so that g++ concatenates 4^12 copies (a terabyte) into one constant. Without a
limit the compiler takes the machine's memory until something dies; the build step runs it
under an address-space limit, so it is a `load` rejection that names the limit and its size
within a second or two. (The kernel would be a plain softmax.)"""
import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp

CHUNK = "A" * 65536
SRC = "\n".join([f'#define S0 "{CHUNK}"',
                 *(f"#define S{i} S{i - 1} S{i - 1} S{i - 1} S{i - 1}" for i in range(1, 13)),
                 'extern "C" const char* bomb() { return S12; }', ""])
lib = load_cpp(SRC, name="corpus_compile_bomb")


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
