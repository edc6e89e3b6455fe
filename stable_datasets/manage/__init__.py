"""The front door's cache manager: what each cache is, which are superseded, and what to remove."""
