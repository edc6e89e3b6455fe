"""Cache rules: where caches live, what they are keyed by, and how they are published."""
