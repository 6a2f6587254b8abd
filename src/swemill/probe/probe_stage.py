"""``run_probe``: does a generation of the corpus teach a small model anything?

Order: load splits -> load (or build, for ``tiny``) the model -> measure the held-out NLL
and the DPO margin -> LoRA SFT on ``sft`` -> measure again -> write ``probe.json`` -> record
``accepted`` in the manifest. The manifest is written last, so a crash never leaves an
``accepted`` flag without the ``probe.json`` that explains it.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from typing import Any

from swemill.core.errors import CorpusError
from swemill.core.records import RunManifest, utcnow
from swemill.probe.data import Splits, load_splits, no_sft_rows, present
from swemill.probe.deps import require
from swemill.probe.model import check_model_spec
from swemill.probe.probe_config import TINY_MODEL, HeldOut, Margin, ProbeConfig, ProbeResult
from swemill.sandbox.leftovers import scratch_prefix
from swemill.store import Store
from swemill.store.layout import manifest_key, report_key

__all__ = ["run_probe", "probe_key", "decide"]

Say = Callable[[str], None]


def probe_key(run_id: str) -> str:
    return report_key(run_id, "probe.json")


def _head(dataset: Any, n: int) -> Any:
    return dataset.select(range(min(n, dataset.num_rows)))


def decide(heldout: HeldOut | None, threshold: float) -> tuple[bool | None, str]:
    """Accepted when held-out NLL fell by at least ``threshold``; None when not measured."""
    if heldout is None:
        return None, "undecided: held-out loss was not measured"
    verb = ">=" if heldout.delta >= threshold else "<"
    return heldout.delta >= threshold, (
        f"held-out NLL fell by {heldout.delta:.4f} nats/token ({heldout.before:.4f} -> "
        f"{heldout.after:.4f}), {verb} threshold {threshold}")


def _skips(store: Store, run_id: str) -> dict[str, str]:
    """What cannot be measured, and why; an error when nothing can be (before heavy imports)."""
    have = present(store, run_id)
    if not have["sft"]:
        raise no_sft_rows(store, run_id)
    skipped = {}
    if not have["sft_holdout"]:
        skipped["heldout"] = (f"run {run_id} has no held-out SFT rows (corpus/holdout part-sft-*"
                              "); rerun `swemill corpus` with --holdout > 0")
    if not have["dpo"]:
        skipped["dpo_margin"] = f"run {run_id} has no DPO pairs (corpus/dpo or held-out dpo)"
    if len(skipped) == 2:
        raise CorpusError(f"run {run_id} has neither held-out SFT rows nor DPO pairs: the "
                          "probe would have nothing to measure")
    return skipped


def _measure(model: Any, tokenizer: Any, splits: Splits, config: ProbeConfig) -> dict[str, Any]:
    from swemill.probe.score import score_pairs, score_rows

    out: dict[str, Any] = {}
    model.eval()
    if splits.sft_holdout is not None:
        out["heldout"] = score_rows(model, tokenizer, _head(splits.sft_holdout,
                                    config.max_eval_rows), config.max_length)
    if splits.dpo is not None:
        out["dpo"] = score_pairs(model, tokenizer, _head(splits.dpo, config.max_eval_rows),
                                 config.max_length)
    return out


def _results(before: dict[str, Any], after: dict[str, Any]) -> tuple[HeldOut | None,
                                                                    Margin | None]:
    heldout = margin = None
    if "heldout" in before and before["heldout"].tokens:
        b, a = before["heldout"], after["heldout"]
        heldout = HeldOut(before=b.per_token, after=a.per_token,
                          delta=b.per_token - a.per_token, tokens=b.tokens, rows=b.rows,
                          all_token_before=b.all_per_token, all_token_after=a.all_per_token,
                          rows_scored_whole=b.rows_scored_whole, rows_truncated=b.rows_truncated)
    if "dpo" in before and before["dpo"].margins:
        b, a = before["dpo"], after["dpo"]
        margin = Margin(before=b.mean, after=a.mean, delta=a.mean - b.mean,
                        accuracy_before=b.accuracy, accuracy_after=a.accuracy,
                        pairs=len(b.margins), rows_truncated=b.rows_truncated,
                        pairs_unscored=b.unscored)
    return heldout, margin


def _load(config: ProbeConfig, splits: Splits, placement: Any, scratch: str) -> tuple[Any, Any]:
    from swemill.probe.model import load_model
    from swemill.probe.tiny import build_tiny_model, row_texts

    spec = config.model
    if spec == TINY_MODEL:
        spec = str(build_tiny_model(row_texts(splits.sft), f"{scratch}/tiny", seed=config.seed))
    return load_model(spec, placement)


def run_probe(store: Store, run_id: str, config: ProbeConfig, *,
              say: Say | None = None) -> ProbeResult:
    """Train, measure, write ``probe.json`` and the manifest's ``accepted``; returns the result."""
    say = say or (lambda _msg: None)
    started = time.monotonic()
    if config.model != TINY_MODEL:
        check_model_spec(config.model)
    skipped = _skips(store, run_id)
    modules = require()
    splits = load_splits(store, run_id)
    from swemill.probe.model import place
    from swemill.probe.train import lora_sft, quiet

    quiet()
    modules["transformers"].set_seed(config.seed)
    placement = place(config.device)
    with tempfile.TemporaryDirectory(prefix=scratch_prefix("probe-model")) as scratch:
        say(f"loading {config.model} on {placement.device} ({placement.dtype})")
        model, tokenizer = _load(config, splits, placement, scratch)
        say(f"measuring before: {splits.rows}")
        before = _measure(model, tokenizer, splits, config)
        say(f"LoRA SFT: {config.steps} steps on {splits.rows['sft']} rows")
        trained, training = lora_sft(model, tokenizer, splits.sft, config, placement)
        say("measuring after")
        after = _measure(trained, tokenizer, splits, config)
    heldout, margin = _results(before, after)
    if heldout is None and "heldout" not in skipped:
        skipped["heldout"] = (f"the held-out rows have no assistant tokens within the first "
                              f"{config.max_length} tokens (raise --max-length)")
    if margin is None and "dpo_margin" not in skipped:
        skipped["dpo_margin"] = (f"no pair has assistant tokens on both sides within the last "
                                 f"{config.max_length} tokens (raise --max-length)")
    accepted, reason = decide(heldout, config.threshold)
    result = ProbeResult(
        run_id=run_id, model=config.model, device=placement.device, dtype=placement.dtype,
        config=config.model_dump(), rows=splits.rows, heldout=heldout, dpo_margin=margin,
        training=training, threshold=config.threshold, accepted=accepted, reason=reason,
        skipped=skipped, seconds=round(time.monotonic() - started, 3))
    store.write_json(probe_key(run_id), result.model_dump(mode="json"))
    _record(store, result)
    return result


def _record(store: Store, result: ProbeResult) -> None:
    run_id = result.run_id
    manifest = (store.read_manifest(run_id) if store.exists(manifest_key(run_id))
                else RunManifest(run_id=run_id, command="probe"))
    manifest.accepted = result.accepted
    manifest.timings_s["probe"] = result.seconds
    manifest.metadata["probe"] = {
        "key": probe_key(run_id), "model": result.model, "threshold": result.threshold,
        "heldout_delta": result.heldout.delta if result.heldout else None,
        "reason": result.reason, "at": utcnow(),
    }
    store.write_manifest(manifest)
