"""``timebound demo``: the main job.

Replays the example trace bundled with every replay command and prints, per protocol,
a summary table of what its core decided.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from importlib import resources

from timebound.replay import load_commands, replay_rows


def example_path(name: str) -> str:
    """Filesystem path of a bundled example trace."""
    return str(resources.files("timebound.examples").joinpath(name))


def run_demo(out_dir: str | None) -> int:
    commands = load_commands()
    with tempfile.TemporaryDirectory(prefix="timebound-demo-") as scratch:
        target = out_dir or scratch
        os.makedirs(target, exist_ok=True)
        for index, command in enumerate(commands, start=1):
            output = os.path.join(target, f"{command.name}.decisions.jsonl")
            parser = argparse.ArgumentParser(prog=f"timebound replay {command.name}")
            command.add_arguments(parser)
            args = parser.parse_args(
                ["--input", example_path(command.example_file), "--output", output,
                 *command.example_args]
            )
            print(f"[{index}/{len(commands)}] {command.name}: {command.help}")
            print(f"    timebound replay {command.name} --input {command.example_file} "
                  f"{' '.join(command.example_args)}")
            replayer = replay_rows(command, args)
            rows = replayer.summary()
            width = max(len(label) for label, _ in rows)
            for label, value in rows:
                print(f"    {label:<{width}}  {value}")
            print()
        if out_dir:
            print(f"decisions written to {out_dir}")
    return 0
