"""`python -m bot` and its commands: one module per command, `main` wires them to the command line."""
