"""The window's side of the computation: the task pool and its threads, the compute kernel's clients (a local
process, a Ray actor), the Tasks panel's record of what ran, and the compute device."""
