"""The runtime target adapters (`dsv4_model.target:graph_safe` and `:reference`) on the CPU."""
import torch

from dsv4_model import target
from dsv4_model.factory import PROMPT_LEN
from dsv4_model.testing import one_torch_thread  # noqa: F401  (autouse fixture)


def _drive(t, steps, prepare=True):
    t.reset()
    out = []
    for i in range(steps):
        if prepare:
            t.prepare(i)
        logits, nxt = t.step()
        out.append((logits.clone(), nxt.clone()))
    return out


def test_graph_safe_target_follows_the_protocol():
    t = target.graph_safe(torch.device("cpu"), config="tiny", batch=2, seed=0)
    assert t.device == torch.device("cpu") and t.max_steps == 1024
    assert t.forced.shape == (1024, 2)
    t.reset()
    first = t.step()
    t.prepare(1)
    assert torch.equal(t.model.tok, t.forced[1])
    second = t.step()
    # Static outputs: the same tensors every call, written in place.
    assert second[0] is first[0] and second[1] is first[1]
    assert first[0].shape == (2, 1024) and first[0].dtype == torch.float32


def test_graph_safe_target_reset_replays_identically_and_prepare_changes_the_inputs():
    t = target.graph_safe("cpu", seed=1)
    forced = _drive(t, 12)
    assert all(torch.equal(a[0], b[0]) for a, b in zip(forced, _drive(t, 12)))
    greedy = _drive(t, 12, prepare=False)
    # The prompt is the first PROMPT_LEN forced tokens: the inputs agree until it ends.
    same = [torch.equal(a[0], b[0]) for a, b in zip(forced, greedy)]
    assert all(same[:PROMPT_LEN]) and not all(same)


def test_reference_target_follows_the_protocol_and_agrees_with_the_graph_safe_target():
    ref = target.reference("cpu", batch=2, seed=0, dtype="fp32")
    safe = target.graph_safe("cpu", batch=2, seed=0, dtype="fp32")
    assert ref.max_steps == safe.max_steps == 1024
    for a, b in zip(_drive(ref, 20), _drive(safe, 20)):
        assert (a[0] - b[0]).abs().max() < 1e-4 and torch.equal(a[1], b[1])
    # Without prepare() both feed back their own greedy tokens after the prompt.
    for a, b in zip(_drive(ref, 20, prepare=False), _drive(safe, 20, prepare=False)):
        assert torch.equal(a[1], b[1])


def test_target_options_reach_the_model():
    t = target.graph_safe("cpu", hca_ratio=16, dtype="fp32")
    assert t.model.cfg.compress_ratios == (0, 0, 4, 16)
    assert t.model.weights.dtype == torch.float32
