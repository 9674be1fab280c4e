"""A line for the person running the workflow."""

import sys


def tell(line: str) -> None:
    """A line for the person running the workflow: in the rule's log and on their terminal."""
    print(line, file=sys.stderr, flush=True)
    if sys.__stderr__ is not None and sys.__stderr__ is not sys.stderr:
        print(line, file=sys.__stderr__, flush=True)
