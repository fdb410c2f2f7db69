"""device"""
