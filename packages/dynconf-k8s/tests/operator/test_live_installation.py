"""The operator takes its store budgets from the installation in force, and follows an edit."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from dynconf.budget import Budget, ledger
from dynconf_k8s.contract import InstallationError
from dynconf_k8s.inforce import DocumentWatch, follow_budgets
from dynconf_k8s.operator.main import INSTALLATION_FILE_ENV, installation_at_start
from dynconf_k8s.operator.metrics import OperatorMetrics


def _document(budget: str) -> str:
    return f"storeDefaults:\n  consul:\n    store-budget: {budget}\n"


def _swap(path: Path, text: str) -> None:
    """Replace the file in one rename, as the kubelet's symlink swap appears to a reader."""
    scratch = path.with_suffix(".tmp")
    scratch.write_text(text, encoding="utf-8")
    os.replace(scratch, path)


@pytest.fixture
def document(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "installation.yaml"
    path.write_text(_document('"10/20"'), encoding="utf-8")
    yield path
    ledger().configure({})


def test_budgets_follow_the_document_live(document: Path) -> None:
    env = {INSTALLATION_FILE_ENV: str(document)}
    holder = installation_at_start(env)
    metrics = OperatorMetrics()
    metrics.installation.follow(holder)

    assert follow_budgets(holder, env) is True
    assert ledger().budget("consul") == Budget(10.0, 20)

    watch = DocumentWatch(str(document), holder)
    _swap(document, _document('"2/4"'))
    assert (offer := watch.check()) is not None and offer.outcome == "applied"
    assert ledger().budget("consul") == Budget(2.0, 4)
    assert (
        metrics.registry.get_sample_value(
            "dynamic_config_operator_installation_reloads_total", {"outcome": "applied"}
        )
        == 1.0
    )


def test_bad_budget_edit_keeps_the_budget_in_force(document: Path) -> None:
    env = {INSTALLATION_FILE_ENV: str(document)}
    holder = installation_at_start(env)
    follow_budgets(holder, env)
    watch = DocumentWatch(str(document), holder)

    _swap(document, _document("lots"))
    assert (offer := watch.check()) is not None and offer.outcome == "refused"
    assert "store-budget" in offer.first_problem
    assert ledger().budget("consul") == Budget(10.0, 20)


def test_the_variable_fixes_the_budgets_for_the_process(document: Path) -> None:
    env = {INSTALLATION_FILE_ENV: str(document), "DYNAMIC_CONFIG_STORE_BUDGETS": "consul=5"}
    holder = installation_at_start(env)

    assert follow_budgets(holder, env) is False
    assert holder.offer(_document('"2/4"'), origin="an edit").outcome == "applied"
    assert ledger().budget("consul") == Budget(5.0, 5)


def test_an_invalid_document_at_start_is_refused(document: Path) -> None:
    document.write_text(_document("lots"), encoding="utf-8")
    with pytest.raises(InstallationError, match="store-budget"):
        installation_at_start({INSTALLATION_FILE_ENV: str(document)})
