"""Which version of loopcore is this? Written here once; packaging reads it from here."""

__version__ = "0.1.0"
