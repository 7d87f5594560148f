"""Run in a child process by test_decode_mutants.py: decode every file of a folder, one JSON line each.

``python decode_probe.py dataset WORKERS[,WORKERS...] DIR``: the files of DIR,
copied into the train split of a new paired dataset beside DIR, read in order
through one DataLoader with WORKERS worker processes (once per number given).
``python decode_probe.py predict RUN_DIR DIR``: each file goes through
``predict`` (the API the command uses) with the run's generator, loaded once.

A line is ``{"file": ..., "ok": true}`` or ``{"error": <type>, "message":
<text>}`` (the message must name the file). A decoder that crashes the process ends the child with
a signal, which the test sees as the return code: that is the point of
running it in a child.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path


def dataset_outcomes(workers: int, folder: Path) -> None:
    """Every file of ``folder`` as a sample of one dataset, read in order through one DataLoader.

    A DataLoader goes on after a sample raised (the next ``next()`` returns the
    next sample), so one loader, one set of workers, reads every mutant.
    """
    from nectargan_core.errors import NectarGANError
    from nectargan_translate.data.paired import PairedDataset
    from nectargan_translate.data.loader import build_dataloader

    root = Path(tempfile.mkdtemp(prefix=f"dataset-{workers}-", dir=folder.parent))
    (root / "train").mkdir()
    for path in folder.iterdir():
        if path.is_file():
            shutil.copy(path, root / "train" / path.name)
    options = {"root": str(root), "verify": "none", "load_size": 16, "crop_size": 16, "num_workers": workers,
               "persistent_workers": False, "batch_size": 1, "shuffle": False, "cache": "off"}
    dataset = PairedDataset(options, "train")
    iterator = iter(build_dataloader(dataset))
    for _ in range(len(dataset)):
        try:
            batch = next(iterator)
            assert batch["A"].shape == (1, 3, 16, 16), batch["A"].shape
            print(json.dumps({"workers": workers, "file": batch["path"][0], "ok": True}), flush=True)
        except NectarGANError as exc:
            print(json.dumps({"workers": workers, "error": type(exc).__name__, "message": str(exc)}), flush=True)
        except Exception as exc:  # noqa: BLE001 - anything else is a finding: report it and go on
            print(json.dumps({"workers": workers, "error": type(exc).__name__, "message": str(exc)}), flush=True)
            if "DataLoader worker" in str(exc):
                return  # a dead worker ends the loader


def predict_outcomes(run_dir: str, folder: Path) -> None:
    from nectargan_core.errors import NectarGANError
    from nectargan_translate.files import plan
    from nectargan_translate.inference import load_generator
    from nectargan_translate import predictor

    generator = load_generator(run_dir, "latest")
    predictor.load_generator = lambda *args, **kwargs: generator  # load once, predict many times
    for path in sorted(p for p in folder.iterdir() if p.is_file()):
        out = folder.parent / "predicted" / path.name
        try:
            jobs = plan([path], out)
            predictor.predict_jobs(run_dir, jobs, out)
            print(json.dumps({"file": str(path), "ok": True}), flush=True)
        except NectarGANError as exc:
            print(json.dumps({"file": str(path), "error": type(exc).__name__, "message": str(exc)}), flush=True)
        except Exception as exc:  # noqa: BLE001
            print(json.dumps({"file": str(path), "error": type(exc).__name__, "message": str(exc)}), flush=True)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "dataset":
        for count in sys.argv[2].split(","):
            dataset_outcomes(int(count), Path(sys.argv[3]))
    elif mode == "predict":
        predict_outcomes(sys.argv[2], Path(sys.argv[3]))
    else:
        raise SystemExit(f"unknown mode {mode}")
