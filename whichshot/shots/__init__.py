"""The ground floor every stage reads: what a shot row holds (its grid axes first)."""
