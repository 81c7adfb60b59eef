"""Entry point: `probescope` opens the GUI on the demo world; subcommands run headless."""

from probescope.main import main

if __name__ == "__main__":
    raise SystemExit(main())
