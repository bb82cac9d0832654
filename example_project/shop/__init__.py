"""A small online shop whose background work runs on backwave_django (see jobs.py)."""
