"""The tiny FID/CLIP proxies are real metrics: identical sets score ~0 FID and a high CLIP; noised,
pixel-shuffled or mislabelled sets score clearly worse. The classifier is trained here exactly as
`prepare` trains it (a few hundred steps, under a second)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits

from reference_impls.stable_diffusion import metrics
from reference_impls.tiny_images import caption


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny convs: one thread is several times faster on a shared 2-core box
    torch.manual_seed(0)
    d = load_digits()
    x = torch.tensor(d.images, dtype=torch.float32)[:, None] / 16 * 2 - 1
    images = F.interpolate(x, size=16, mode="bilinear", align_corners=False).clamp(-1, 1).repeat(1, 3, 1, 1)
    labels = torch.tensor(d.target)
    clf = metrics.DigitsClassifier()
    opt = torch.optim.Adam(clf.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    for _ in range(200):
        i = torch.randint(300, len(labels), (64,), generator=g)
        loss = F.cross_entropy(clf(images[i]), labels[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
    path = tmp_path_factory.mktemp("clf") / "classifier.pt"
    torch.save(clf.state_dict(), path)
    yield metrics.TinyScorer(path), images[:300], labels[:300]
    torch.set_num_threads(threads)


def _fid(scorer, a, b, prompts):
    fa, _ = scorer.score(a, prompts)
    fb, _ = scorer.score(b, prompts)
    return metrics.frechet_distance(*metrics.stats(fa), *metrics.stats(fb))


def test_frechet_distance_matches_the_closed_form():
    mu1, mu2 = np.zeros(3), np.array([1.0, 2.0, 0.0])
    s1, s2 = np.diag([1.0, 4.0, 9.0]), np.diag([4.0, 1.0, 9.0])
    # |mu1-mu2|^2 + sum (sqrt(a) - sqrt(b))^2 for diagonal covariances = 5 + (1 + 1 + 0)
    assert metrics.frechet_distance(mu1, s1, mu2, s2) == pytest.approx(7.0, abs=1e-6)
    assert metrics.frechet_distance(mu1, s1, mu1, s1) == pytest.approx(0.0, abs=1e-6)


def test_identical_sets_score_zero_and_degraded_sets_score_clearly_worse(setup):
    scorer, images, labels = setup
    prompts = [caption(int(y)) for y in labels]
    same = _fid(scorer, images, images.clone(), prompts)
    g = torch.Generator().manual_seed(0)
    noised = (images + 0.5 * torch.randn(images.shape, generator=g)).clamp(-1, 1)
    shuffled = images.flatten(2)[:, :, torch.randperm(256, generator=g)].view_as(images)
    fid_noised = _fid(scorer, images, noised, prompts)
    fid_shuffled = _fid(scorer, images, shuffled, prompts)
    assert same < 1e-3
    assert fid_noised > 20 and fid_shuffled > 200, (fid_noised, fid_shuffled)


def test_clip_proxy_rewards_the_prompted_digit(setup):
    scorer, images, labels = setup
    right = [caption(int(y)) for y in labels]
    wrong = [caption((int(y) + 1) % 10) for y in labels]
    n = len(labels)
    assert scorer.score(images, right)[1] / n > 0.8
    assert scorer.score(images, wrong)[1] / n < 0.1
    assert metrics.label_of("a photo of the digit seven") == 7 and metrics.label_of("a cat") == -1


def test_frechet_distance_uses_the_sqrtm_call_every_scipy_accepts(monkeypatch):
    """SciPy 1.18 removed sqrtm's `disp` (1.16-1.17 warn): the FID must not pass it. The 1.18
    signature is stood in by a wrapper that takes only the matrix; the installed SciPy must not warn."""
    import warnings

    real = metrics.linalg.sqrtm
    monkeypatch.setattr(metrics.linalg, "sqrtm", lambda a: real(a))  # SciPy >= 1.18: sqrtm(A) only
    mu, s1, s2 = np.zeros(3), np.diag([1.0, 4.0, 9.0]), np.diag([4.0, 1.0, 9.0])
    assert metrics.frechet_distance(mu, s1, mu, s2) == pytest.approx(2.0, abs=1e-6)
    monkeypatch.undo()
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # installed SciPy (1.17: disp deprecated)
        assert metrics.frechet_distance(mu, s1, mu, s2) == pytest.approx(2.0, abs=1e-6)
