"""The `tooldns` command: one module per subcommand."""
