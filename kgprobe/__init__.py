"""kgprobe: measure what a language model knows by probing it on a knowledge graph."""

__version__ = "0.1.0"
