"""``swemill probe --run RUN_ID --model PATH_OR_ID --out ROOT``: does the corpus teach anything?"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from swemill.cli._common import emit_json, fail
from swemill.cli.options import JsonOut, Out, Run

if TYPE_CHECKING:
    from swemill.probe import ProbeResult


def register(app: typer.Typer) -> None:
    @app.command()
    def probe(
        run: Run,
        model: Annotated[str, typer.Option(
            "--model", help="Model directory, Hub id, or 'tiny' (random init, smoke runs).")],
        out: Out,
        steps: Annotated[int, typer.Option("--steps", min=1, help="LoRA SFT steps.")] = 30,
        lora_r: Annotated[int, typer.Option("--lora-r", min=1, help="LoRA rank.")] = 8,
        threshold: Annotated[float, typer.Option(
            "--threshold", help="Accept when held-out NLL falls by at least this (nats/token).")]
        = 0.01,
        learning_rate: Annotated[float, typer.Option("--lr", min=0.0, help="Learning rate.")]
        = 2e-4,
        batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Rows per step.")]
        = 1,
        max_length: Annotated[int, typer.Option(
            "--max-length", min=16, help="Tokens kept per row.")] = 4096,
        max_eval_rows: Annotated[int, typer.Option(
            "--max-eval-rows", min=1, help="Held-out rows and DPO pairs measured, at most.")]
        = 64,
        device: Annotated[str, typer.Option("--device", help="auto, cpu or cuda.")] = "auto",
        seed: Annotated[int, typer.Option("--seed", help="Seed of init and data order.")] = 0,
        json_out: JsonOut = False,
    ) -> None:
        """LoRA-SFT a small model on the run's sft split; held-out loss decides 'accepted'."""
        from pydantic import ValidationError

        from swemill.cli._common import console
        from swemill.probe import ProbeConfig, run_probe
        from swemill.store import Store

        if device not in ("auto", "cpu", "cuda"):
            fail(f"unknown --device {device!r}: choose auto, cpu or cuda")
        try:
            config = ProbeConfig(model=model, steps=steps, lora_r=lora_r, threshold=threshold,
                                 learning_rate=learning_rate, batch_size=batch_size,
                                 max_length=max_length, max_eval_rows=max_eval_rows,
                                 device=device, seed=seed)  # type: ignore[arg-type]
        except ValidationError as exc:
            fail(f"bad probe setting: {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}")
        store = Store.open(out)
        result = run_probe(store, run, config, say=lambda msg: console.print(f"probe: {msg}"))
        if json_out:
            emit_json(result)
            return
        _print(result)


def _print(result: ProbeResult) -> None:
    from swemill.cli._common import console

    if result.training:
        t = result.training
        console.print(f"trained    {t.steps} steps, loss {t.first_loss:.4f} -> {t.last_loss:.4f}"
                      f" ({t.seconds:.1f}s)")
    if result.heldout:
        h = result.heldout
        console.print(f"held-out   NLL/token {h.before:.4f} -> {h.after:.4f} (delta {h.delta:+.4f},"
                      f" {h.tokens} tokens in {h.rows} rows)")
    if result.dpo_margin:
        m = result.dpo_margin
        console.print(f"dpo margin {m.before:.3f} -> {m.after:.3f} over {m.pairs} pairs "
                      f"(chosen preferred {m.accuracy_before:.0%} -> {m.accuracy_after:.0%})"
                      + (f", {m.pairs_unscored} pairs not scored" if m.pairs_unscored else ""))
    for what, why in result.skipped.items():
        console.print(f"[yellow]skipped[/] {what}: {why}")
    verdict = {True: "[green]accepted[/]", False: "[red]not accepted[/]",
               None: "[yellow]undecided[/]"}
    console.print(f"{verdict[result.accepted]}: {result.reason}")
