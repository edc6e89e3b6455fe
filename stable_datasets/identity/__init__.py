"""Identity: what a cache's fingerprint is made of, in one place.

fingerprint.py: canonical JSON and the digest that keys every cache folder; code.py: what user code computes
(functions, classes, the modules they read) and the one rule for which modules are the user's, which the Ray
engine also follows to ship them; inputs.py: the identity of input files (size and mtime, or content, or a
remote validator). It sits on the storage floor, so the write path and the cache may use it.
"""
