"""hipdnn-trace: run, time, validate and profile hipDNN operation graphs."""

__version__ = "0.1.0"
