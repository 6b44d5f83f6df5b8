"""Benchmarks, the trap world and the demo: what measures lessonledger against baselines."""
