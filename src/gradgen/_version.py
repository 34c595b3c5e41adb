"""gradgen's version: the root package exports it, build.py writes it into every module header."""

__version__ = "0.1.0"
