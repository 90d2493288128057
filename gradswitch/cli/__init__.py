"""The command line (`gradswitch`, main.py) and the tools behind its subcommands."""
