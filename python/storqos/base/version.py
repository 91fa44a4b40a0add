"""The package's version (as pyproject.toml and the Rust crates give it)."""

__version__ = "0.1.0"
