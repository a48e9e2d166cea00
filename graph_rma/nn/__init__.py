"""Layers: drop-in repulsive versions of PyG and torch attention layers, and GraphWriter's encoder block."""
__all__ = []
