"""The gated evaluation harness: sandboxed workers, gates, timing, and `evaluate()`."""
