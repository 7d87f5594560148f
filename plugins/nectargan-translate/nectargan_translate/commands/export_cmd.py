"""``nectargan export``: the generator as ONNX or TorchScript, with a parity check, or as the reference's files."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click

from nectargan_core import BoundedFloat, BoundedInt, printable, printable_lines

from .options import GivenPath, SizeType, checkpoint_option, direction_option

#: ``--opset``: ONNX numbers its opsets in the twenties today; the exporter checks the exact one it supports.
OPSET_OPTION = BoundedInt(7, 99, "ONNX has no opset anywhere near that")
#: ``--tolerance``: outputs lie in [-1, 1], so no difference exceeds 2.
TOLERANCE_OPTION = BoundedFloat(0.0, 2.0, "outputs lie in [-1, 1], so a larger tolerance accepts any export")


@click.command("export")
@click.argument("target", metavar="RUN_DIR|CHECKPOINT", type=GivenPath(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["onnx", "torchscript", "reference"]), required=True,
              help="onnx (needs nectargan-translate[onnx]), torchscript, or reference: the generator(s) as "
                   "pytorch-CycleGAN-and-pix2pix state dicts (<label>_net_G.pth).")
@checkpoint_option
@click.option("-o", "--output", type=GivenPath(path_type=Path), default=None,
              help="Output file (default: RUN_DIR/export/<checkpoint>.onnx or .torchscript.pt, where <checkpoint> holds "
                   "the epoch and step, e.g. best-epoch0003-step00000012); with --format "
                   "reference a folder, the reference's checkpoints/<name> (default: RUN_DIR/export/reference).")
@click.option("--size", type=SizeType(), metavar="N|HxW", default=None,
              help="Input size N or HxW (default: the training crop size).")
@click.option("--opset", type=OPSET_OPTION, default=18, show_default=True, help="ONNX opset version.")
@click.option("--tolerance", type=TOLERANCE_OPTION, default=1e-4, show_default=True,
              help="Largest accepted |export - pytorch| difference.")
@direction_option
def export_command(target: Path, fmt: str, which: str, output: Optional[Path], size: Optional[tuple[int, int]],
                   opset: int, tolerance: float, direction: Optional[str]) -> None:
    """Export the generator (eval mode, dynamic batch axis; ONNX: any height and width) and check it against PyTorch.

    The export is run on random batches of 2 and 1 and compared with the
    PyTorch model (ONNX through onnxruntime when installed; TorchScript by
    loading the file back); a difference above --tolerance exits with 1.
    A sidecar <file>.json records input and output names, shapes, channels,
    the [-1, 1] range, the checkpoint, its epoch and the parity result.

    --format reference writes <label>_net_G.pth (latest_net_G.pth by default;
    CycleGAN: _net_G_A.pth and _net_G_B.pth), which the reference's define_G
    with the printed options loads with strict=True, and a sidecar per file;
    --size, --opset and --tolerance do not apply (every tensor is read back and
    must come back identical).

    \b
    Examples:
      nectargan export runs/facades/version_0 --format onnx
      nectargan export runs/facades/version_0 --format torchscript --checkpoint best -o g.pt
      nectargan export runs/facades/version_0 --format reference -o checkpoints/facades_pix2pix
      nectargan export runs/horse2zebra/version_0 --format onnx --direction BtoA
    """
    from nectargan_core import require_torch

    require_torch("nectargan export")
    if fmt == "reference":
        from ..reference_export import export_reference

        for line in export_reference(target, which, output=output).describe():
            click.echo(printable_lines(line))
        return
    from ..export import export_generator

    report = export_generator(target, which, fmt=fmt, output=output, size=size, opset=opset, tolerance=tolerance,
                              direction=direction)
    for note in report.notes():
        click.echo(printable(note), err=True)
    click.echo(printable_lines(report.parity.describe()))
    click.echo(printable(f"wrote {report.path} ({report.describe_sizes()}; {report.weights}) "
                         f"and {report.sidecar.name}"))
