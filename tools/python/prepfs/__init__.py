"""prepfs: the training-job side of the prepfs cache daemon.

PrepfsSampler publishes each epoch's order to a prepfs mount, can take cached samples first
(opportunistic mode) or oversample high-loss ones (importance mode), and resumes mid-epoch.
MountClient reads and writes the mount's .prepfs/ control files. See docs/SAMPLER.md.
"""
from .mount import MountClient, ProtocolError, Resident
from .sampler import MODES, Indexed, PrepfsSampler, PrepfsWarning

__version__ = "0.1.0"
__all__ = ["PrepfsSampler", "PrepfsWarning", "Indexed", "MODES", "MountClient", "ProtocolError", "Resident"]
