"""`python -m stable_datasets.cli`: the `stable-datasets` command."""

import sys

from stable_datasets.cli import main

sys.exit(main())
