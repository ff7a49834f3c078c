"""The trusted side: evaluate() runs the gates in order over a pool of sandboxed worker servers and a build service. Never imported by worker code."""
