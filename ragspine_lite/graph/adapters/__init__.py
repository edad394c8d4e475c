"""Graph-store adapters behind extras (``networkx_store``: the ``[graph]`` extra)."""

__all__: list[str] = []
