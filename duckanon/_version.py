"""The package version, importable from anywhere below the package face without a cycle."""

__version__ = "0.1.0"
