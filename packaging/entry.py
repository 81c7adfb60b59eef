"""The frozen bundle's entry point: the same dispatcher as the `probescope` console script."""

import multiprocessing

from probescope.main import main

multiprocessing.freeze_support()  # a dissection's unit workers are this executable started again
raise SystemExit(main())
