"""One module per subcommand (``add_parser(subparsers)`` and ``main(args)``), and
``argtypes``, the argparse converters they share."""
