"""A read-only local viewer of a cache root: `stable-datasets view` (see docs/viewer.md).

    from stable_datasets.viewer import serve_in_thread
    server, url = serve_in_thread(root)   # open url in a browser; server.shutdown() stops it
"""

from stable_datasets.viewer.server import make_server, serve, serve_in_thread, server_url

__all__ = ["make_server", "serve", "serve_in_thread", "server_url"]
