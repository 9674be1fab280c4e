"""Offline bundles (issue 35): `python -m whichshot.offline build` on a connected machine writes the
project, its wheels, engine sources and models; `install` (or the bundle's own install.py, standard
library only) sets them up on a node without network. docs/offline.md."""
