"""Human-readable and machine-readable views of results."""
