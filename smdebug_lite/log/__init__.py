"""Logging for the whole package: named loggers and the scrubbing of credentials from every record."""
