"""The measurement: the timing loop, one graph on its configurations, and the suite runner."""
