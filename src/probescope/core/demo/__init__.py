"""The embedded demo world: a generated probing dataset, a small trained model, a sampler, simulated judgments."""
