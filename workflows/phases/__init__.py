"""The phases of a run, one job per module; base.py draws how they stack."""
