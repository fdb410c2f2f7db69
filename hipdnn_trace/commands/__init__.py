"""One module per subcommand: add_parser(subparsers) and main(args)."""
