"""Set once for every test: one torch thread (the tests train tiny models, and the test
command runs test files side by side, one per core) and matplotlib's Agg backend (no
display; figures are drawn and closed, never shown)."""

import matplotlib

matplotlib.use("Agg")

import torch  # noqa: E402

torch.set_num_threads(1)
