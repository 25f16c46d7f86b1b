"""The `sapo` command line: thin typer commands that parse, call the client and print."""
