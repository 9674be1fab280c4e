"""The built-in engine kinds, one module each, written against whichshot's engine protocol
(whichshot/engine/base.py) and registered by name in whichshot/engine/__init__.py. A new kind is
one module here, or anywhere a config's `engine_modules` can import (docs/engines.md)."""
