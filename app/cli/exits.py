"""What a command is, and the exit statuses it returns."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from app import config

Command = Callable[[argparse.Namespace, config.Settings], int]
"""A subcommand: its parsed arguments and the settings in, the exit status out."""

EXIT_ERROR = 1
EXIT_REFUSED = 2
