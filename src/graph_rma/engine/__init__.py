r"""What every task shares: seeding, atomic result files, verified checkpoints with RNG state, early stopping,
and the ``torch.distributed`` helpers.

Tasks (Cora, text, AGENDA, WebNLG) build on these instead of re-implementing them, so a crash never leaves a
half-written result or checkpoint, and a resumed run reads exactly what was saved.
"""

from .checkpoint import CheckpointError, load_checkpoint, rng_state, save_checkpoint, set_rng_state
from .device import device_memory, resolve_device
from .early_stopping import EarlyStopping
from .errors import one_line_errors
from .files import PathLike, atomic_write_bytes, atomic_write_text, read_json, read_lines, slug, write_csv, write_json
from .interrupt import deferred_interrupt, interrupt_requested
from .resume import ResumeMismatchError, check_resume
from .seeding import seed_everything
from .stats import format_spread, mean_std, paired_comparison

__all__ = [
    "CheckpointError",
    "EarlyStopping",
    "PathLike",
    "ResumeMismatchError",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_resume",
    "deferred_interrupt",
    "device_memory",
    "interrupt_requested",
    "load_checkpoint",
    "format_spread",
    "mean_std",
    "one_line_errors",
    "paired_comparison",
    "read_json",
    "read_lines",
    "resolve_device",
    "rng_state",
    "save_checkpoint",
    "seed_everything",
    "set_rng_state",
    "slug",
    "write_csv",
    "write_json",
]
