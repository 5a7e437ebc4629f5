"""One module per job family: read inputs, call :mod:`gpu`, write outputs."""
