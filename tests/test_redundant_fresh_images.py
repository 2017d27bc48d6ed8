"""redundant-input's fresh-image tasks (#33 item 8): the CNN sees every training image once, as the paper's
generator gives it a new batch every step."""

from __future__ import annotations

from compbench.encodings import encode
from compbench.suite import load_suite
from compbench.tasks import make_task


def test_the_fresh_tasks_hold_exactly_one_pass_of_the_cnns_steps():
    loaded = load_suite("redundant-input")
    suite = loaded.suite
    model = next(m for m in suite.models if m.id == "cnn-200-fresh")
    steps, batch = model.params["steps"], model.params["batch_size"]
    assert (steps, batch) == (200, 64) and model.params["theory"] == "none"
    fresh = [t for t in suite.tasks if t.id.endswith("-fresh")]
    assert [t.id for t in fresh] == ["img-A-fresh", "img-B-fresh"]
    for t in fresh:
        enc = encode(t.encoding["name"], make_task(t.family, **t.params),
                     **{k: v for k, v in t.encoding.items() if k != "name"})
        # one pass: 200 steps × 64 images, no image drawn for training twice within the run
        assert len(enc.train) == steps * batch == 12_800, t.id
