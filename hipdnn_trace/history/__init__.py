"""The results store and its history: every run in one database (DuckDB file or PostgreSQL), series per
graph x configuration x GPU, change points found with a maintained detector, one HTML dashboard.
docs/history.md."""
