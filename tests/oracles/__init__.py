"""Test oracles: slow, obviously-correct reference code and generated problems, used by the tests and benchmarks
(never shipped in the package)."""
