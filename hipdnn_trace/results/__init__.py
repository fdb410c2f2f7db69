"""Frames, the run directory and its files: the only package that knows file formats."""
