"""The headless commands: argparse shells over probescope.jobs, one module per subcommand (see probescope.main)."""
