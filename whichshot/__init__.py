"""whichshot: reproducible, honestly labelled LLM-inference speed measurements."""

__version__ = "0.1.0"
