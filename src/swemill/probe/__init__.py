"""The acceptance probe: LoRA SFT of a small model on a run's corpus, judged on held-out loss.

Heavy libraries (torch, transformers, TRL, PEFT) are imported only when a probe runs; they
come with the ``probe`` extra (``pip install 'swemill[probe]'``).
"""

from swemill.probe.probe_config import (
           TINY_MODEL,
           HeldOut,
           Margin,
           ProbeConfig,
           ProbeResult,
           Training,
)
from swemill.probe.probe_stage import decide, probe_key, run_probe

__all__ = ["ProbeConfig", "ProbeResult", "HeldOut", "Margin", "Training", "TINY_MODEL",
           "run_probe", "probe_key", "decide"]
