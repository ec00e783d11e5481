"""The command line, `python -m steering COMMAND --help`: every command's arguments are parsed here (main, and
analyze for `analyze KIND`), which then call the domain that does the work. The top floor: nothing imports it."""
