"""docs/recipes/inspect.md runs as its page shows it: an Inspect eval of 20 samples at once,
each on its own fork of one seed, scored from the database the sample left."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any, List

import pytest

import scion
import scion.aio
from conftest import load_example

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def recipe() -> ModuleType:
    return load_example(REPO / "examples" / "python" / "inspect_eval.py")


def test_an_inspect_eval_forks_the_database_per_sample_and_scores_each_from_its_diff(
    recipe: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = recipe.main(tmp_path / "store", samples=20, log_dir=tmp_path / "logs")
    printed = capsys.readouterr().out
    # The scripted model ships the named order; for every fifth it ships the customer's
    # three orders, which leaves the named row right and only the diff can catch.
    assert result["verdicts"] == {n: ("I" if n % 5 == 0 else "C") for n in range(1, 21)}
    assert result["accuracy"] == pytest.approx(0.8)
    assert "sample 5: order 5 is shipped; rows changed: {'orders': 3}" in printed, printed
    assert "sample 4:" not in printed, printed
    # The samples ran side by side, each with its own fork.
    assert result["peak"] > 1, result
    assert len(result["fork_ms"]) == 20
    assert "20 samples, accuracy 0.80" in printed, printed
    # Inspect wrote its log; every fork is gone and the seed is as it was made (report()
    # checks both and raises otherwise).
    assert list((tmp_path / "logs").glob("*.eval")), list((tmp_path / "logs").iterdir())
    assert "branches left: ['shop@main']" in printed, printed


def test_a_sample_that_fails_still_has_its_fork_destroyed(recipe: ModuleType, tmp_path: Path) -> None:
    from inspect_ai import eval
    from inspect_ai.model import get_model

    def failing_on_order_3(messages: List[Any], *args: Any) -> Any:
        if "order 3." in messages[0].text:
            raise RuntimeError("the model broke on order 3")
        return recipe.scripted_model(messages, *args)

    store = scion.open_store(tmp_path / "store", create=True)
    store.create("shop", source=recipe.seed_file(tmp_path / "shop.db", 4))
    forks = recipe.Forks()
    [log] = eval(
        recipe.make_task(scion.aio.AsyncStore(store), 4, forks),
        model=get_model("mockllm/model", custom_outputs=failing_on_order_3),
        max_samples=4,
        fail_on_error=False,
        log_dir=str(tmp_path / "logs"),
        display="none",
    )
    assert log.samples is not None
    errors = {s.id: s.error.message for s in log.samples if s.error}
    assert list(errors) == [3] and "the model broke on order 3" in errors[3], errors
    # Four forks were made; the failed sample's went with the others.
    assert len(forks.fork_ms) == 4
    assert [b.branch for b in store.branches("shop")] == ["shop@main"]
