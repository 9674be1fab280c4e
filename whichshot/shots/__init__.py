"""The ground floor every stage reads: what a shot row holds (its grid axes first), the checks of one
shot, older shots tables read as current, and the caveat record rules fire."""
