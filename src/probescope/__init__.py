"""probescope: look inside vision models and score them."""

__version__ = "0.1.0"
