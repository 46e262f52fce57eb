"""Side-by-side benchmarks. Each prints medians and ratios; none is a test."""
