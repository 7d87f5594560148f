"""SSIM for any image ``nectargan test`` meets: a photograph scored in bands of rows gives the score it gets whole
with memory bounded by the band, and an image narrower than the 11-pixel window is scored, not a traceback."""

from __future__ import annotations

import pytest
import torch

import nectargan_translate.evaluation as evaluation
from nectargan_translate.evaluation import per_image, ssim


def pair(shape, seed=0):
    generator = torch.Generator().manual_seed(seed)
    a = torch.rand(*shape, generator=generator)
    return a, (a + 0.2 * torch.rand(*shape, generator=generator)).clamp(0, 1)


@pytest.mark.parametrize("shape", [(2, 3, 300, 200), (1, 1, 97, 1000), (1, 3, 23, 500), (1, 3, 64, 64)])
def test_bands_of_rows_give_the_score_of_the_whole_image(shape, monkeypatch):
    from torchmetrics.functional.image import structural_similarity_index_measure

    a, b = pair(shape)
    whole = structural_similarity_index_measure(a, b, data_range=1.0, reduction="none")
    assert torch.allclose(ssim(a, b), whole, rtol=0, atol=1e-6)  # below the band size: torchmetrics as it is
    monkeypatch.setattr(evaluation, "SSIM_BAND_PIXELS", 3000)  # bands of 15 to 130 rows here
    assert torch.allclose(ssim(a, b), whole, rtol=0, atol=1e-6)


@pytest.mark.parametrize("shape", [(1, 3, 40, 1), (2, 3, 1, 40), (1, 3, 5, 7), (1, 1, 10, 300)])
def test_images_smaller_than_the_window_are_scored(shape):
    a, b = pair(shape)
    same, other = ssim(a, a), ssim(a, b)
    assert torch.allclose(same, torch.ones(shape[0]))
    assert ((other > -1) & (other < 1)).all()
    scores = per_image(a * 2 - 1, b * 2 - 1)  # as nectargan test calls it
    assert set(scores) == {"l1", "psnr", "ssim"} and all(v.shape == (shape[0],) for v in scores.values())
