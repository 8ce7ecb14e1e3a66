"""`python -m deputy_tools` is the same as the `deputy-tools` console script."""

from deputy_tools.cli import main

raise SystemExit(main())
