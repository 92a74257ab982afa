"""python -m bcg_train ... (torchrun --nproc_per_node=2 -m bcg_train ...)."""

import sys

from bcg_train.cli import main

sys.exit(main())
