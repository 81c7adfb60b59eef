"""The frozen bundle's entry point: the same dispatcher as the `probescope` console script."""

from probescope.main import main

raise SystemExit(main())
