"""Helpers for analysing trials: refresh control and argument parsing."""
