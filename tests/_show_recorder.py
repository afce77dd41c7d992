"""A matplotlib backend (``MPLBACKEND=module://_show_recorder``) that draws like Agg and
records every ``plt.show()``: one line per call, the number of figures it would show, in
the file named by the ``SHOW_RECORD`` environment variable."""

import os

import matplotlib.pyplot as plt
from matplotlib.backends.backend_agg import FigureCanvasAgg as FigureCanvas

__all__ = ["FigureCanvas", "show"]


def show(*args, **kwargs):
    with open(os.environ["SHOW_RECORD"], "a", encoding="utf-8") as record:
        record.write(f"{len(plt.get_fignums())}\n")
