"""profilers"""
